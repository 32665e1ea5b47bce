"""Parameter-server training end to end: real ps-server and ps-worker processes
on loopback TCP, on Fashion-MNIST.

BSP must be exactly large-batch SGD, with dropout on too; reruns must be
bit-identical; SSP must keep its staleness bound, seen from the servers and
from the workers' own reports, and make the fast worker wait (ASP never); a
resumed job must start where the first run stopped and end bit-identical to
the uninterrupted one; and ssp/bsp with 2 servers and 3 workers must reach
the accuracy of single-process training.

Weights are compared with `ps-net diff`, which fails on NaN and on a layer or
blob missing from either file.
"""
import json
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import ROOT
from ps_job import run_job

SMOOTH_NET = ROOT / "tests/e2e/nets/mlp_smooth.prototxt"
DROPOUT_NET = ROOT / "tests/e2e/nets/mlp_dropout.prototxt"
LENET_NET = ROOT / "configs/nets/lenet_train_test.prototxt"


def write_job(tmp: pathlib.Path, name: str, net_template: pathlib.Path, data: pathlib.Path,
              batch: int, max_iter: int, *, snapshot: int = 0, test_interval: int = 0,
              test_iter: int = 100, base_lr: float = 0.01, display: int = 10,
              drop_name: str = "drop1", extra: str = "") -> pathlib.Path:
    """A solver and its net in tmp/name/, with the train batch set to `batch`."""
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    net = net_template.read_text()
    if "BATCH" in net:
        net = net.replace("BATCH", str(batch)).replace("DATA", str(data))
        net = net.replace("DROP", drop_name)
    else:  # LeNet: train batch 64, data under data/fashion-mnist
        net, n = re.subn(r"batch_size: 64", f"batch_size: {batch}", net)
        assert n == 1
        net = net.replace('"data/fashion-mnist', f'"{data}')
    (folder / "net.prototxt").write_text(net)
    solver = folder / "solver.prototxt"
    tests = f"test_iter: {test_iter}\ntest_interval: {test_interval}\n" if test_interval else ""
    solver.write_text(
        f'net: "{folder}/net.prototxt"\n{tests}'
        f"base_lr: {base_lr}\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: \"fixed\"\n"
        f"display: {display}\nmax_iter: {max_iter}\nsnapshot: {snapshot}\n"
        f'snapshot_prefix: "{folder}/snap"\nrandom_seed: 7\nsolver_mode: CPU\n{extra}')
    return solver


def final_model(solver: pathlib.Path, max_iter: int) -> pathlib.Path:
    path = solver.parent / f"snap_iter_{max_iter}.caffemodel"
    assert path.exists(), f"{path} was not written"
    return path


def compare(build_dir, a: pathlib.Path, b: pathlib.Path, max_rel: float = 0.0):
    """`ps-net diff`: (exit status, report); 0 when equal within max_rel."""
    out = subprocess.run([str(build_dir / "bin/ps-net"), "diff", str(a), str(b), "--json",
                          "--max-rel", repr(max_rel)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1) and out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def assert_same(build_dir, a: pathlib.Path, b: pathlib.Path, max_rel: float = 0.0) -> dict:
    """The report of `ps-net diff`, which must find the models equal within max_rel
    (0: every value identical)."""
    code, report = compare(build_dir, a, b, max_rel)
    assert code == 0 and report["equal"], f"{a} and {b} differ: {report}"
    return report


def ok(result):
    bad = {k: v for k, v in result.returncodes.items() if v != 0}
    assert not bad, f"exit codes {bad}: " + " | ".join(result.stderr[k][-600:] for k in bad)
    return result


def test_bsp_is_large_batch_sgd(build_dir, fashion_mnist, tmp_path):
    iters = 50
    one = write_job(tmp_path, "w1", SMOOTH_NET, fashion_mnist, 64, iters)
    two = write_job(tmp_path, "w2", SMOOTH_NET, fashion_mnist, 32, iters)
    two_servers = write_job(tmp_path, "w2s2", SMOOTH_NET, fashion_mnist, 32, iters)
    single = write_job(tmp_path, "single", SMOOTH_NET, fashion_mnist, 64, iters)
    ok(run_job(build_dir, one, workers=1, servers=1))
    ok(run_job(build_dir, two, workers=2, servers=1))
    ok(run_job(build_dir, two_servers, workers=2, servers=2, chunk_bytes=16384))
    subprocess.run([str(build_dir / "bin/ps-net"), "train", "--solver", str(single),
                    "--threads", "1", "--json"], check=True, capture_output=True, timeout=300)

    reference = final_model(one, iters)
    assert_same(build_dir, reference, final_model(single, iters), max_rel=1e-6)
    assert_same(build_dir, reference, final_model(two, iters), max_rel=1e-5)
    assert_same(build_dir, reference, final_model(two_servers, iters), max_rel=1e-5)


def test_bsp_with_dropout_is_large_batch_sgd(build_dir, fashion_mnist, tmp_path):
    """Dropout masks are keyed by each sample's position in the data stream:
    worker 1 of 2 (batch 32) draws the masks of samples 32..63 of one worker's
    batch of 64, not worker 0's masks, so the two jobs end equal."""
    iters = 50
    one = write_job(tmp_path, "w1", DROPOUT_NET, fashion_mnist, 64, iters)
    two = write_job(tmp_path, "w2", DROPOUT_NET, fashion_mnist, 32, iters)
    other_masks = write_job(tmp_path, "other", DROPOUT_NET, fashion_mnist, 64, iters,
                            drop_name="drop2")
    ok(run_job(build_dir, one, workers=1, servers=1))
    ok(run_job(build_dir, two, workers=2, servers=1))
    ok(run_job(build_dir, other_masks, workers=1, servers=1))
    report = assert_same(build_dir, final_model(one, iters), final_model(two, iters),
                         max_rel=1e-5)
    print(f"dropout, 2 workers of 32 vs 1 of 64: max_abs {report['max_abs']:.3g}, "
          f"max_rel {report['max_rel']:.3g}")
    # The control: the same job with other masks (the layer's name keys them)
    # ends far outside 1e-5, so the match above needs every sample's mask to
    # agree; had worker 1 drawn worker 0's masks, half of them would not.
    code, other = compare(build_dir, final_model(one, iters), final_model(other_masks, iters))
    print(f"control, other masks: max_rel {other['max_rel']:.3g}")
    assert code == 1 and not other["mismatches"] and other["max_rel"] > 1e-3, other


def test_bsp_lenet_matches_large_batch(build_dir, fashion_mnist, tmp_path):
    one = write_job(tmp_path, "w1", LENET_NET, fashion_mnist, 64, 3)
    two = write_job(tmp_path, "w2", LENET_NET, fashion_mnist, 32, 3)
    ok(run_job(build_dir, one, workers=1, servers=1))
    ok(run_job(build_dir, two, workers=2, servers=2, chunk_bytes=65536))
    assert_same(build_dir, final_model(one, 3), final_model(two, 3), max_rel=1e-4)


def test_bsp_reruns_are_bit_identical(build_dir, fashion_mnist, tmp_path):
    first = write_job(tmp_path, "a", SMOOTH_NET, fashion_mnist, 16, 30)
    second = write_job(tmp_path, "b", SMOOTH_NET, fashion_mnist, 16, 30)
    for solver in (first, second):
        ok(run_job(build_dir, solver, workers=3, servers=2, chunk_bytes=8192,
                   worker_args={1: ["--straggle-jitter-ms", "5"]}))
    assert_same(build_dir, final_model(first, 30), final_model(second, 30))


def test_bsp_through_shared_memory_is_bit_identical_to_tcp(build_dir, fashion_mnist, tmp_path):
    """Over ipc the pushes and pull replies of 16 KB or more travel through
    shared-memory rings (common/transport/shared_ring.hpp): the job must end
    bit-identical to the same job over tcp, with nearly every payload byte
    reported as having gone through the rings (and none over tcp)."""
    iters = 6
    tcp = write_job(tmp_path, "tcp", LENET_NET, fashion_mnist, 32, iters)
    shm = write_job(tmp_path, "shm", LENET_NET, fashion_mnist, 32, iters)
    sockets = pathlib.Path(tempfile.mkdtemp(prefix="pstrain-shm-"))  # short ipc paths
    try:
        over_tcp = ok(run_job(build_dir, tcp, workers=2, servers=2))
        over_shm = ok(run_job(build_dir, shm, workers=2, servers=2,
                              bind=f"ipc://{sockets}/server-{{k}}.sock"))
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    assert_same(build_dir, final_model(tcp, iters), final_model(shm, iters))
    done = [over_shm.of("done", f"server-{k}")[-1] for k in range(2)]
    received = sum(d["bytes_received"] for d in done)
    sent = sum(d["bytes_sent"] for d in done)
    through_ring = (sum(d["shared_memory_bytes_received"] for d in done),
                    sum(d["shared_memory_bytes_sent"] for d in done))
    print(f"through the rings: {through_ring[0]} of {received} bytes received, "
          f"{through_ring[1]} of {sent} sent")
    assert through_ring[0] > 0.95 * received and through_ring[1] > 0.95 * sent
    assert through_ring[0] <= received and through_ring[1] <= sent
    for k in range(2):
        d = over_tcp.of("done", f"server-{k}")[-1]
        assert d["shared_memory_bytes_received"] == 0 and d["shared_memory_bytes_sent"] == 0


def reported_iters(result, source: str) -> list:
    return [e["iter"] for e in result.of("train", source)]


def clock_gaps(result, workers: int) -> list:
    """How far the other workers' clocks were ahead of a worker when it reported.

    Needs the workers' events in the order written (merge_worker_stdout) and a
    train event every iteration (display 1). Events number iterations from 0,
    as Caffe displays them: a worker reports iteration c after its backward pass
    of c, before it can start c + 1, so its clock is c or c + 1 then; a worker
    that reported j had been allowed to start j. With staleness s, j - s is at
    most the reporter's clock, so every gap is at most s + 1.
    """
    last = {}
    gaps = []
    for e in result.events:
        if e["event"] != "train" or not e["source"].startswith("worker"):
            continue
        last[e["source"]] = e["iter"]
        if len(last) == workers:
            gaps.append(max(last.values()) - e["iter"])
    return gaps


def leads(result, fast: str, slow: str) -> list:
    """At each of the slow worker's train events, how many iterations the fast
    worker's last report was ahead of it (merged worker stdout, display 1)."""
    last = {}
    out = []
    for e in result.events:
        if e["event"] != "train" or e["source"] not in (fast, slow):
            continue
        last[e["source"]] = e["iter"]
        if e["source"] == slow and fast in last:
            out.append(last[fast] - e["iter"])
    return out


@pytest.mark.parametrize("staleness", [0, 1, 3])
def test_ssp_bound_holds_and_fast_worker_waits(build_dir, fashion_mnist, tmp_path, staleness):
    iters = 40
    solver = write_job(tmp_path, f"s{staleness}", SMOOTH_NET, fashion_mnist, 16, iters,
                       display=1)
    result = ok(run_job(build_dir, solver, workers=2, servers=2, mode="ssp",
                        staleness=staleness, chunk_bytes=8192,
                        worker_args={1: ["--straggle-ms", "30"]}, merge_worker_stdout=True))
    done = result.of("done")
    servers = [e for e in done if e["role"] == "server"]
    assert len(servers) == 2
    for server in servers:
        assert server["staleness_max"] <= staleness + 1, server
    # From the workers' side: a pull for iteration t waits until every clock
    # is >= t - staleness, so no worker gets more than staleness + 1 ahead.
    for w in range(2):
        assert reported_iters(result, f"worker-{w}") == list(range(iters))
    gaps = clock_gaps(result, 2)
    print(f"ssp staleness {staleness}: worker clock gaps, largest {max(gaps)}, "
          f"server staleness_max {[s['staleness_max'] for s in servers]}")
    assert gaps and max(gaps) <= staleness + 1, gaps
    # The slow worker is 30 ms behind at every iteration; the fast one runs up
    # to the bound while it waits, so it was `staleness` ahead at some report.
    assert max(gaps) >= staleness, gaps
    # 40 iterations, the slow worker 30 ms behind each: the fast one runs ahead
    # to the bound and waits there, so at most of the slow one's reports it is
    # exactly `staleness` ahead (counted, not timed; without the bound it would
    # be ever further ahead, as in test_asp_never_waits).
    ahead = leads(result, "worker-0", "worker-1")
    print(f"ssp staleness {staleness}: worker 0 ahead at worker 1's reports: {ahead}")
    assert len(ahead) >= iters - 1 and max(ahead) <= staleness + 1, ahead
    assert sum(a == staleness for a in ahead) >= len(ahead) // 2, ahead


def test_asp_never_waits(build_dir, fashion_mnist, tmp_path):
    iters = 40
    solver = write_job(tmp_path, "asp", SMOOTH_NET, fashion_mnist, 16, iters, display=1)
    result = ok(run_job(build_dir, solver, workers=2, servers=1, mode="asp",
                        worker_args={1: ["--straggle-ms", "30"]}, merge_worker_stdout=True))
    # Nothing holds the fast worker: it runs past every bound ssp would keep
    # (test_ssp_bound_holds_and_fast_worker_waits: at most staleness + 1 <= 4)
    # and the servers apply gradients that many steps stale.
    for w in range(2):
        assert reported_iters(result, f"worker-{w}") == list(range(iters))
    ahead = leads(result, "worker-0", "worker-1")
    print(f"asp: worker 0 ahead at worker 1's reports: {ahead}")
    assert max(ahead) > 4, ahead
    assert max(e["staleness_max"] for e in result.of("done") if e["role"] == "server") > 4


def test_bsp_resume_continues_exactly(build_dir, fashion_mnist, tmp_path):
    """With dropout on, so the resumed run must also draw the masks the
    uninterrupted one drew from iteration 20 on."""
    straight = write_job(tmp_path, "straight", DROPOUT_NET, fashion_mnist, 32, 40)
    first_half = write_job(tmp_path, "resumed", DROPOUT_NET, fashion_mnist, 32, 20, display=1)
    ok(run_job(build_dir, straight, workers=2, servers=2, chunk_bytes=16384))
    first = ok(run_job(build_dir, first_half, workers=2, servers=2, chunk_bytes=16384))
    assert reported_iters(first, "worker-0") == list(range(20))
    manifest = first_half.parent / "snap_iter_20.manifest"
    assert manifest.exists()
    second_half = write_job(tmp_path, "resumed", DROPOUT_NET, fashion_mnist, 32, 40, display=1)
    second = ok(run_job(build_dir, second_half, workers=2, servers=2, chunk_bytes=16384,
                        resume=manifest))
    # Both workers started at iteration 20: their first step was the 21st.
    for w in range(2):
        assert reported_iters(second, f"worker-{w}") == list(range(20, 40)), w
    assert_same(build_dir, final_model(straight, 40), final_model(second_half, 40))


@pytest.mark.parametrize("mode,staleness", [("bsp", 0), ("ssp", 2)])
def test_two_servers_three_workers_reach_single_process_accuracy(
        build_dir, fashion_mnist, tmp_path, mode, staleness):
    iters = 1500
    single = write_job(tmp_path, "single", LENET_NET, fashion_mnist, 63, iters,
                       test_interval=iters)
    proc = subprocess.run([str(build_dir / "bin/ps-net"), "train", "--solver", str(single),
                           "--threads", "2", "--json"], capture_output=True, text=True,
                          timeout=600, check=True)
    tests = [json.loads(l) for l in proc.stdout.splitlines() if '"event":"test"' in l]
    single_accuracy = tests[-1]["accuracy"]

    ps = write_job(tmp_path, mode, LENET_NET, fashion_mnist, 21, iters, test_interval=iters)
    result = ok(run_job(build_dir, ps, workers=3, servers=2, mode=mode, staleness=staleness,
                        chunk_bytes=65536, timeout=600))
    ps_accuracy = result.of("test", "worker-0")[-1]["accuracy"]
    assert single_accuracy > 0.8
    assert abs(ps_accuracy - single_accuracy) <= 0.015, (ps_accuracy, single_accuracy)
