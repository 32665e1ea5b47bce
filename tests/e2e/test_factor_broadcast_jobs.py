"""Sufficient-factor broadcasting end to end (ps-worker --sufficient-factors
--factor-broadcast): bsp with 2 workers on the fc-heavy MLP (784 -> 1024 ->
1024 -> 10, batch 16), momentum 0.9 and weight decay. The shard relays every
worker's factors of ip1 and ip2 in its pull replies and each worker steps its
replica of them exactly as the shard steps its own: the final weights are bit
for bit those of the push-only factor run and within 1e-5 of the dense run,
with the strict verification (every 5 iterations the replica is compared with
the shard's weights and history, bit for bit) on, and the shard sends exactly
the relay's bytes; also across 2 shards with chunks ending mid-row and
iter_size 2. (A worker killed with SIGKILL and restarted:
tests/python/test_factor_broadcast.py.)"""
import re

from conftest import ROOT
from ps_job import run_job
from test_ps_training import assert_same, final_model, ok, write_job

WIDE_NET = ROOT / "tests/e2e/nets/mlp_wide.prototxt"
ITERS = 20
BATCH = 16
WORKERS = 2
EXTRA = ""  # write_job: momentum 0.9, weight_decay 0.0005
# Parameters in order: (ip1 weight, bias, ip2 weight, bias, ip3 weight, bias).
IP1 = 1024 * 784
IP2 = 1024 * 1024
OTHER = 1024 + 1024 + 10 * 1024 + 10
FACTORS = ["--sufficient-factors"]
BROADCAST = FACTORS + ["--factor-broadcast"]
STRICT = BROADCAST + ["--factor-verify-interval", "5", "--factor-verify-strict"]


def server_stat(result, key: str) -> int:
    done = [e for e in result.events
            if e["source"].startswith("server") and e.get("event") == "done"]
    assert done, "no server reported its statistics"
    return sum(e[key] for e in done)


def run(build_dir, data, tmp_path, name, args, **kw):
    solver = write_job(tmp_path, name, WIDE_NET, data, BATCH, ITERS, extra=EXTRA)
    result = ok(run_job(build_dir, solver, workers=WORKERS, servers=1, timeout=120,
                        worker_args={0: args, 1: args}, **kw))
    return result, solver


def test_broadcast_is_bit_identical_to_push_only_and_pulls_the_relay_bytes(
        build_dir, fashion_mnist, tmp_path):
    dense, a = run(build_dir, fashion_mnist, tmp_path, "dense", [])
    push, b = run(build_dir, fashion_mnist, tmp_path, "push", FACTORS)
    strict, c = run(build_dir, fashion_mnist, tmp_path, "strict", STRICT)
    relay, d = run(build_dir, fashion_mnist, tmp_path, "relay", BROADCAST)
    assert_same(build_dir, final_model(b, ITERS), final_model(c, ITERS))
    assert_same(build_dir, final_model(b, ITERS), final_model(d, ITERS))
    assert_same(build_dir, final_model(a, ITERS), final_model(d, ITERS), max_rel=1e-5)
    # Pulls: worker 0 pulls iterations 0..20, worker 1 0..19 (41 pulls).
    pulls = WORKERS * ITERS + 1
    assert server_stat(dense, "bytes_sent") == pulls * (IP1 + IP2 + OTHER) * 4
    assert server_stat(push, "bytes_sent") == server_stat(dense, "bytes_sent")
    # Broadcast: each worker's first pull brings ip1 and ip2 with their
    # momentum history; every later one every worker's factors of both, 16
    # samples x (rows + cols) each: 2 x 16 x (1024 + 784) and 2 x 16 x 2048.
    relay_values = WORKERS * BATCH * (1024 + 784) + WORKERS * BATCH * (1024 + 1024)
    assert relay_values == 123392
    expected = (pulls * OTHER + WORKERS * 2 * (IP1 + IP2) + (pulls - WORKERS) * relay_values) * 4
    assert server_stat(relay, "bytes_sent") == expected
    # A steady-state pull: 7.45 MB of weights -> 0.54 MB (the biases and ip3 stay dense).
    assert (IP1 + IP2 + OTHER) / (OTHER + relay_values) > 13.7
    said = relay.stderr["worker-1"]
    assert "factor broadcast: ip2/0: 262144 bytes of factors pulled instead of 4194304" in said
    # The strict run compared at iterations 5, 10, 15 and 20 (worker 0) and found nothing.
    assert "differs" not in strict.stderr["worker-0"] + strict.stderr["worker-1"]


def test_broadcast_across_shards_mid_row_chunks_and_iter_size_2(build_dir, fashion_mnist,
                                                                tmp_path):
    # 100000-byte chunks on 2 shards: each weight's chunks end mid-row and lie on
    # both shards, each relays its L columns and one worker's R (its holder).
    kw = {"servers": 2, "chunk_bytes": 100000}
    runs = []
    for name, args in (("push", FACTORS), ("strict", STRICT)):
        solver = write_job(tmp_path, name, WIDE_NET, fashion_mnist, BATCH, ITERS,
                           extra="iter_size: 2\n")
        runs.append((ok(run_job(build_dir, solver, workers=WORKERS, timeout=120,
                                worker_args={0: args, 1: args}, **kw)), solver))
    (push, b), (strict, c) = runs
    assert_same(build_dir, final_model(b, ITERS), final_model(c, ITERS))
    assert "differs" not in strict.stderr["worker-0"] + strict.stderr["worker-1"]
    # What each worker says a pull of a weight's factors costs (RelayBytes: per shard
    # both workers' 32 x rows-touched L columns, plus both R once) ...
    said = {m[0]: int(m[1]) for m in re.findall(r"factor broadcast: (ip\d)/0: (\d+) bytes",
                                                strict.stderr["worker-0"])}
    assert sorted(said) == ["ip1", "ip2"]
    assert 2 * 32 * (1024 + 784) * 4 < said["ip1"] < 2 * 32 * (2 * 1024 + 784) * 4
    # ... is what the shards sent: the first pull of each worker and the 7
    # verification pulls (iterations 5, 10, 15, 20 of worker 0; 5, 10, 15 of
    # worker 1) bring ip1 and ip2 with their history, the verifications their
    # factors too, and every pull after the first their factors.
    pulls = WORKERS * ITERS + 1
    with_history = WORKERS + 7
    expected = (pulls * OTHER * 4 + with_history * 2 * (IP1 + IP2) * 4
                + (pulls - WORKERS) * (said["ip1"] + said["ip2"]))
    assert server_stat(strict, "bytes_sent") == expected


def test_pull_overlap_asked_for_is_turned_off_under_broadcast(build_dir, fashion_mnist, tmp_path):
    # A layer's forward may not start on its chunks' arrival: a broadcast weight's
    # values exist only once every relay is in. The worker says so and waits whole.
    push, b = run(build_dir, fashion_mnist, tmp_path, "push", FACTORS)
    overlap, c = run(build_dir, fashion_mnist, tmp_path, "overlap", STRICT + ["--pull-overlap"],
                     server_args=["--pull-overlap"])
    assert_same(build_dir, final_model(b, ITERS), final_model(c, ITERS))
    assert "pull overlap: off with factor broadcast" in overlap.stderr["worker-1"]
