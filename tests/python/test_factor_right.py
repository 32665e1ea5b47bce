"""transport.factor_right: holder (R pushed once, issue 32): under sufficient-factor
broadcasting a worker pushes its R factor only to its holder shard, L alone to the
weight's other shards, and those get the R from a worker that has it from the relay
(docs/architecture.md, "R pushed once"). The wide MLP (784-1024-1024-10, batch 16)
on 2 shards, bsp, strict replica checks every 4 iterations: the run ends bit for bit
where the same job with every_shard ends (2 and 3 workers, float32 and fp16 factors),
the shards receive exactly (S - 1) x s x c values a worker, iteration and weight less,
and a worker killed and restarted mid-run changes nothing. Also the key's values and
errors and the forwarders ps-train chooses on hosts."""
from __future__ import annotations

import pathlib
import subprocess

import pytest

from ps_train_util import run_killing_worker, write_job
from pstrain import Job, JobError
from pstrain import costmodel
from pstrain.hosts import Host, place
from pstrain.hostrun import HostLayout
from test_factor_broadcast import BSP, digest, plan_of, wide_job
from test_factor_sixteen_bits import half_frame

ITERS = 20
BATCH = 16
COLS = (784, 1024)  # ip1's and ip2's rows (R: BATCH x cols)
SIZES = [1024 * 784, 1024, 1024 * 1024, 1024, 10 * 1024, 10]  # ip1, its bias, ip2, ...


def run(tmp_path, data, name: str, right: str, workers: int = 2,
        compression: str = "none", servers: int = 2) -> dict:
    job = wide_job(tmp_path, name, data)
    job["cluster"]["straggler"] = None
    job["cluster"]["workers"] = workers
    job["cluster"]["servers"] = servers
    job["solver_overrides"]["max_iter"] = ITERS
    job["transport"]["factor_right"] = right
    job["transport"]["compression"] = compression
    job["transport"]["host_aggregation"] = False
    result = Job.from_yaml(write_job(tmp_path, job, f"{name}.yaml")).run(quiet=True, timeout=300)
    assert result.ok, result.summary["message"]
    return result.summary


def r_bytes(compression: str) -> int:
    """One worker's R frames of ip1 and ip2 in one iteration."""
    if compression == "fp16":
        return sum(half_frame(BATCH * c) for c in COLS)
    return sum(4 * BATCH * c for c in COLS)


@pytest.mark.parametrize("workers, servers, compression",
                         [(2, 2, "none"), (3, 2, "none"), (2, 2, "fp16"), (2, 3, "none")])
def test_holder_is_bit_identical_and_pushes_each_r_once(tmp_path, fashion_mnist, monkeypatch,
                                                        workers, servers, compression):
    """W = S, W > S (a shard holds the R's of two workers) and W < S (worker 0
    forwards to shards 0 and 2)."""
    monkeypatch.setenv("PSTRAIN_FACTOR_VERIFY_INTERVAL", "4")
    monkeypatch.setenv("PSTRAIN_FACTOR_VERIFY_STRICT", "1")
    every = run(tmp_path, fashion_mnist, "every", "every_shard", workers, compression, servers)
    once = run(tmp_path, fashion_mnist, "once", "holder", workers, compression, servers)
    assert digest(once["snapshot"]) == digest(every["snapshot"])
    # The placement spreads ip1 and ip2 over every shard (S of them): S - 1 R's less a
    # worker, iteration and weight.
    chunks = costmodel.place(SIZES, servers, 1 << 20)
    assert [len({c.shard for c in chunks if c.param == p}) for p in (0, 2)] == [servers] * 2
    assert every["bytes_pushed"] - once["bytes_pushed"] == \
        (servers - 1) * ITERS * workers * r_bytes(compression)
    assert r_bytes("none") == 4 * 16 * (784 + 1024) == 115712
    assert r_bytes("fp16") == 57856
    # What the workers pull is the same: the R's went ahead of the relay instead of in it.
    log = (pathlib.Path(once["run_dir"]) / "logs/worker-1.log").read_text()
    assert "factor broadcast: ip2/0:" in log


def test_a_killed_worker_restarts_and_the_run_is_unchanged(tmp_path, fashion_mnist,
                                                           monkeypatch):
    """Worker 1 (the forwarder of shard 1, the holder of its own R) is killed in
    iteration 1 or 2 and restarted: pushes of L parked on a shard, R's forwarded or not,
    the same end as the clean every_shard run, bit for bit."""
    monkeypatch.setenv("PSTRAIN_FACTOR_VERIFY_INTERVAL", "4")
    monkeypatch.setenv("PSTRAIN_FACTOR_VERIFY_STRICT", "1")

    def job_of(name, right):
        job = wide_job(tmp_path, name, fashion_mnist)
        job["cluster"]["servers"] = 2
        job["transport"]["factor_right"] = right
        return job
    reference = Job.from_yaml(write_job(tmp_path, job_of("clean", "every_shard"),
                                        "clean.yaml")).run(quiet=True, timeout=300)
    assert reference.ok, reference.summary["message"]
    job = Job.from_yaml(write_job(tmp_path, job_of("killed", "holder"), "killed.yaml"))
    r = run_killing_worker(job, rank=1)
    assert r.summary["status"] == "ok", r.summary
    assert r.summary["worker_restarts"] >= 1 and r.summary["iterations"] == 40
    log = (job.config.run_dir / "logs/worker-1.log").read_text()
    assert "restart 1 of worker 1" in log
    assert digest(r.summary["snapshot"]) == digest(reference.summary["snapshot"])


def test_values_flags_and_errors(tmp_path, build_dir):
    job, plan = plan_of(tmp_path, {"sufficient_factors": "broadcast", "factor_right": "holder"},
                        consistency=BSP)
    assert job.transport.factor_right == "holder"
    worker = plan.worker_command(1, ["e"])
    assert worker[worker.index("--factor-right") + 1] == "holder"
    assert "--forward-shards" not in worker  # one machine: ps-worker's k mod W
    _, default = plan_of(tmp_path, {"sufficient_factors": "broadcast"}, consistency=BSP)
    assert default.job.transport.factor_right == "every_shard"
    assert "--factor-right" not in default.worker_command(1, ["e"])
    with pytest.raises(JobError, match=r"/job\.yaml: transport\.factor_right: holder needs "
                                       r"transport\.sufficient_factors: broadcast \(R reaches "
                                       r"the other shards through the relay\), got "
                                       r"sufficient_factors: 'push'$"):
        plan_of(tmp_path, {"sufficient_factors": "push", "factor_right": "holder"},
                consistency=BSP)
    with pytest.raises(JobError, match=r"/job\.yaml: transport\.factor_right: must be one of "
                                       r"every_shard, holder, got 'once'$"):
        plan_of(tmp_path, {"sufficient_factors": "broadcast", "factor_right": "once"},
                consistency=BSP)


def test_the_forwarder_of_a_shard_is_a_worker_on_its_host(tmp_path, build_dir):
    """per_host: server k beside the k-th worker host; 2 slots a host puts workers 0-1 on
    a, 2-3 on b: shard 0's forwarder is worker 0, shard 1's worker 2. first_slots: the
    shards' hosts run no worker: shard k goes to worker k mod W."""
    job, plan = plan_of(tmp_path, {"sufficient_factors": "broadcast", "factor_right": "holder"},
                        consistency=BSP)
    hosts = [Host("a", slots=2), Host("b", slots=2), Host("c", slots=2)]
    plan.layout = HostLayout(place(hosts, 2, 4, "hosts", placement="per_host"))
    assert plan.forward_shards() == [[0], [], [1], []]
    command = plan.worker_command(2, ["e", "f"])
    assert command[command.index("--forward-shards") + 1] == "1"
    one = plan.worker_command(1, ["e", "f"])
    assert one[one.index("--forward-shards") + 1] == "none"
    plan.layout = HostLayout(place(hosts, 2, 4, "hosts", placement="first_slots"))
    assert plan.forward_shards() == [[0], [1], [], []]


@pytest.mark.parametrize("flags, error", [
    (["--factor-right", "once"], '--factor-right must be every_shard or holder, got "once"'),
    (["--factor-right", "holder"], "--factor-right holder needs --factor-broadcast (R reaches "
                                   "the other shards through the relay)"),
    (["--sufficient-factors", "--factor-broadcast", "--forward-shards", "1"],
     "--forward-shards needs --factor-right holder"),
    (["--sufficient-factors", "--factor-broadcast", "--factor-right", "holder",
      "--forward-shards", "1,x"], '--forward-shards: "1,x": shard numbers (0,2)'),
])
def test_ps_worker_names_a_bad_flag(build_dir, flags, error):
    out = subprocess.run([str(build_dir / "bin/ps-worker"), "--solver", "s.prototxt",
                          "--servers", "tcp://127.0.0.1:1", *flags],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.splitlines()[0] == f"ps-worker: {error}", out.stderr
