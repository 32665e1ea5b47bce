"""transport.host_aggregation on Slurm, for real: a two-node Slurm cluster made by
the test (slurm_cluster.py, nodes=2: two slurmd on this machine, pstnode0 and
pstnode1), a bsp job submitted with sbatch through scripts/slurm/pstrain.sbatch,
once with host_aggregation auto and once with false. ps-train places the
workers from the allocation's SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE
(python/pstrain/slurm.py), so the servers count one pusher a node: 2 nodes x 2
workers push half the gradient bytes, and the per_host servers are still one a
node. The weights: equal up to rounding with two pairs, bit for bit with a pair
and a lone worker (each test says why)."""
from __future__ import annotations

import hashlib
import json
import pathlib
import time

import numpy as np
import pytest

import slurm_cluster
from pstrain.caffe.proto import caffe_pb2
from test_hostfile import job_dict
from test_slurm import submit

ITERS = 20
# LeNet's learnable floats (configs/nets/lenet_train_test.prototxt): conv1 20x1x5x5 + 20,
# conv2 50x20x5x5 + 50, ip1 500x800 + 500, ip2 10x500 + 10.
LENET_BYTES = 4 * (520 + 25050 + 400500 + 5010)


@pytest.fixture(scope="module")
def slurm2():
    with slurm_cluster.started("pstrain-slurm2-", nodes=2) as cluster:
        yield cluster


def _segments() -> set[str]:
    return {p.name for p in pathlib.Path("/dev/shm").glob("pstrain-*")}


def _wait(slurm, job_id: str, out: pathlib.Path, limit_s: float = 240) -> str:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not slurm.run("squeue", "--noheader", f"--jobs={job_id}").stdout.strip():
            return out.read_text() if out.exists() else ""
        time.sleep(1)
    slurm.run("scancel", job_id)
    pytest.fail(f"Slurm job {job_id} still queued or running after {limit_s} s: "
                f"{out.read_text() if out.exists() else ''}")


def run_pair(slurm, tmp_path: pathlib.Path, workers: int, sbatch: list[str]
             ) -> tuple[dict, dict, dict]:
    """The same bsp job (LeNet, ITERS iterations, per_host servers) submitted twice,
    host_aggregation auto ("grouped") and false ("alone"); per name its summary,
    final .caffemodel and slurm_tasks.json tasks."""
    summaries, models, tasks = {}, {}, {}
    for name, aggregation in (("grouped", "auto"), ("alone", False)):
        job = job_dict(tmp_path, name)
        job["solver_overrides"].update(max_iter=ITERS, snapshot=ITERS, test_interval=ITERS,
                                       test_iter=2)
        job["cluster"]["workers"] = workers
        del job["cluster"]["servers"]       # per_host, Slurm's default: one server a node
        job["transport"]["host_aggregation"] = aggregation
        job_id, out = submit(slurm, tmp_path, job, name, sbatch)
        text = _wait(slurm, job_id, out)
        run = tmp_path / "runs" / name
        assert (run / "summary.json").exists(), text
        summary = json.loads((run / "summary.json").read_text())
        assert summary["status"] == "ok", (summary["message"], text)
        assert summary["iterations"] == ITERS
        summaries[name] = summary
        models[name] = run / "snapshots" / f"{name}_iter_{ITERS}.caffemodel"
        tasks[name] = json.loads((run / "slurm_tasks.json").read_text())["tasks"]
    # nothing left: no program in the cluster, no group's shared memory
    assert not [p for p in slurm.pids() if _program(p).endswith((b"ps-server", b"ps-worker"))]
    return summaries, models, tasks


def blobs(path: pathlib.Path) -> dict[str, np.ndarray]:
    net = caffe_pb2.NetParameter()
    net.ParseFromString(path.read_bytes())
    return {f"{layer.name}[{i}]": np.array(b.data, dtype=np.float32)
            for layer in net.layer for i, b in enumerate(layer.blobs)}


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_two_nodes_of_two_workers_push_once_a_node(tmp_path, slurm2, fashion_mnist):
    before = _segments()
    summaries, models, tasks = run_pair(slurm2, tmp_path, 4,
                                        ["--nodes=2", "--ntasks=4", "--ntasks-per-node=2"])
    grouped, alone = summaries["grouped"], summaries["alone"]
    # per_host servers, one a node, and the workers in the allocation's block order
    # (SLURM_TASKS_PER_NODE 2(x2)), with and without groups
    for summary in (grouped, alone):
        assert summary["hosts"] == {"server-0": "pstnode0", "server-1": "pstnode1",
                                    "worker-0": "pstnode0", "worker-1": "pstnode0",
                                    "worker-2": "pstnode1", "worker-3": "pstnode1"}
    # the grouped workers were placed by ps-train (srun --distribution=arbitrary), and
    # the servers count two pushers while averaging over four workers
    workers = [t for t in tasks["grouped"] if t["role"] == "worker"]
    assert [t["node"] for t in workers] == ["pstnode0", "pstnode0", "pstnode1", "pstnode1"]
    assert _flag(workers[3]["argv"], "--host-groups") == "0,0,1,1"
    for server in [t["argv"] for t in tasks["grouped"] if t["role"] == "server"]:
        assert (_flag(server, "--workers"), _flag(server, "--average-over")) == ("2", "4")
    assert all("node" not in t and "--host-groups" not in t["argv"] for t in tasks["alone"])
    # one push a node: half the gradient bytes (both count worker 0's init push once)
    pushed = {n: s["bytes_pushed"] - LENET_BYTES for n, s in summaries.items()}
    assert pushed["alone"] == ITERS * 4 * LENET_BYTES
    assert pushed["grouped"] == ITERS * 2 * LENET_BYTES
    # The shard adds the two nodes' sums, (g0 + g1) + (g2 + g3), where alone it adds
    # ((g0 + g1) + g2) + g3: the same step up to float rounding, not bit for bit (the
    # next test has a layout where the two sums are the same floats).
    a, b = blobs(models["grouped"]), blobs(models["alone"])
    assert a.keys() == b.keys()
    for name in a:
        assert np.abs(a[name] - b[name]).max() <= 1e-5 * np.abs(b[name]).max(), name
    assert _segments() <= before, _segments() - before


def test_a_pair_and_a_lone_worker_give_the_weights_of_false_bit_for_bit(tmp_path, slurm2,
                                                                         fashion_mnist):
    # --nodes=2 --ntasks=3 on two-CPU nodes: SLURM_TASKS_PER_NODE 2,1, groups 0,0,1. The
    # shard adds (g0 + g1) + g2, the rank order in which it adds the three alone.
    before = _segments()
    summaries, models, tasks = run_pair(slurm2, tmp_path, 3, ["--nodes=2", "--ntasks=3"])
    workers = [t for t in tasks["grouped"] if t["role"] == "worker"]
    assert [t["node"] for t in workers] == ["pstnode0", "pstnode0", "pstnode1"]
    assert _flag(workers[0]["argv"], "--host-groups") == "0,0,1"
    assert summaries["grouped"]["hosts"] == summaries["alone"]["hosts"] == {
        "server-0": "pstnode0", "server-1": "pstnode1", "worker-0": "pstnode0",
        "worker-1": "pstnode0", "worker-2": "pstnode1"}
    pushed = {n: s["bytes_pushed"] - LENET_BYTES for n, s in summaries.items()}
    assert pushed["alone"] == ITERS * 3 * LENET_BYTES
    assert pushed["grouped"] == ITERS * 2 * LENET_BYTES
    assert hashlib.sha256(models["grouped"].read_bytes()).hexdigest() == \
        hashlib.sha256(models["alone"].read_bytes()).hexdigest()
    assert _segments() <= before, _segments() - before


def _program(pid: int) -> bytes:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return b""
