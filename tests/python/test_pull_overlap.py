"""transport.pull_overlap: a worker starts each layer's forward once that layer's
weights are pulled and the servers answer pulls in forward order (docs/architecture.md,
"Pulls in forward order"). The key and the command lines it makes, and real bsp jobs
of two workers, on and off: the same weights bit for bit (a net with a weight shared
by two layers, worker 0 testing and snapshotting on the way)."""
from __future__ import annotations

import hashlib
import pathlib

import pytest

from ps_train_util import base_job, write_job
from pstrain import Job
from pstrain.errors import JobError

NET = """name: "shared_mlp"
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 }
  data_param { source: "DATA/train_lmdb" batch_size: 16 backend: LMDB } }
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TEST }
  transform_param { scale: 0.00390625 }
  data_param { source: "DATA/test_lmdb" batch_size: 50 backend: LMDB } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  param { lr_mult: 1 } param { lr_mult: 2 }
  inner_product_param { num_output: 32 weight_filler { type: "xavier" } } }
layer { name: "tanh1" type: "TanH" bottom: "ip1" top: "ip1" }
layer { name: "sa" type: "InnerProduct" bottom: "ip1" top: "sa"
  param { name: "shared_w" lr_mult: 1 } param { name: "shared_b" lr_mult: 2 }
  inner_product_param { num_output: 32 weight_filler { type: "xavier" } } }
layer { name: "tanh2" type: "TanH" bottom: "sa" top: "sa" }
layer { name: "sb" type: "InnerProduct" bottom: "sa" top: "sb"
  param { name: "shared_w" lr_mult: 1 } param { name: "shared_b" lr_mult: 2 }
  inner_product_param { num_output: 32 weight_filler { type: "xavier" } } }
layer { name: "ip2" type: "InnerProduct" bottom: "sb" top: "ip2"
  param { lr_mult: 1 } param { lr_mult: 2 }
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
  include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""


def _solver(tmp: pathlib.Path, name: str, data: pathlib.Path) -> pathlib.Path:
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "net.prototxt").write_text(NET.replace("DATA", str(data)))
    solver = folder / "solver.prototxt"
    solver.write_text(f'net: "{folder}/net.prototxt"\nbase_lr: 0.05\nmomentum: 0.9\n'
                      f'lr_policy: "fixed"\ndisplay: 5\nmax_iter: 30\ntest_iter: 2\n'
                      f'test_interval: 10\nsnapshot: 15\nsnapshot_prefix: "{folder}/snap"\n'
                      f'random_seed: 5\nsolver_mode: CPU\n')
    return solver


def _job(tmp: pathlib.Path, name: str, data: pathlib.Path, overlap) -> dict:
    job = base_job(tmp, name=name, solver=str(_solver(tmp, name, data)),
                   consistency={"mode": "bsp", "staleness": 0}, engine="fast")
    job["cluster"]["workers"] = 2
    job["cluster"]["servers"] = 2
    job["solver_overrides"] = {"max_iter": 30, "display": 5}
    job["transport"]["host_aggregation"] = False  # else auto groups one host's workers
    job["transport"]["pull_overlap"] = overlap
    job["transport"]["chunk_bytes"] = 4096  # several chunks per weight
    return job


def _digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_auto_is_on_where_it_applies(tmp_path, build_dir):
    job = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
    job["transport"]["host_aggregation"] = False
    plan = Job.from_yaml(write_job(tmp_path, job)).plan()
    assert plan.job.transport.pull_overlap == "auto"
    assert "--pull-overlap" in plan.server_command(0, None)
    assert "--pull-overlap" in plan.worker_command(1, ["tcp://127.0.0.1:5000"])
    # host groups (auto aggregation of one host's workers), local SGD, false: off
    for changes in ({"transport": {"host_aggregation": "auto"}},
                    {"consistency": {"mode": "bsp", "staleness": 0, "local_sgd": {"tau": 2}}},
                    {"transport": {"host_aggregation": False, "pull_overlap": False}}):
        j = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
        for section, values in changes.items():
            j[section].update(values)
        plan = Job.from_yaml(write_job(tmp_path, j)).plan()
        assert not plan.pull_overlap(), changes
        assert "--pull-overlap" not in plan.server_command(0, None)
        assert "--pull-overlap" not in plan.worker_command(0, ["e"])
    # a step gate (pstrain.DistributedSolver): auto is off, true stays on
    j = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
    j["transport"]["host_aggregation"] = False
    plan = Job.from_yaml(write_job(tmp_path, j)).plan()
    plan.step_gate = True
    assert not plan.pull_overlap()
    j["transport"]["pull_overlap"] = True
    plan = Job.from_yaml(write_job(tmp_path, j)).plan()
    plan.step_gate = True
    assert plan.pull_overlap()


def test_pull_overlap_key_error(tmp_path, build_dir):
    j = base_job(tmp_path)
    j["transport"]["pull_overlap"] = "yes"
    path = write_job(tmp_path, j)
    with pytest.raises(JobError) as e:
        Job.from_yaml(path)
    assert str(e.value) == f"{path}: transport.pull_overlap: must be auto, true or false, got 'yes'"


def test_bsp_weights_are_bit_identical_with_the_overlap_on_and_off(tmp_path, build_dir,
                                                                   fashion_mnist):
    runs = {}
    for name, overlap in (("on", True), ("off", False)):
        job = Job.from_yaml(write_job(tmp_path, _job(tmp_path, name, fashion_mnist, overlap),
                                      f"{name}.yaml"))
        cmd = job.plan().worker_command(0, ["e"])
        assert ("--pull-overlap" in cmd) == overlap
        runs[name] = job.run(quiet=True, timeout=240)
        assert runs[name].ok, runs[name].summary["message"]
    on, off = runs["on"].summary, runs["off"].summary
    assert on["iterations"] == off["iterations"] == 30
    assert _digest(pathlib.Path(on["snapshot"])) == _digest(pathlib.Path(off["snapshot"]))
    # the snapshot worker 0 wrote at iteration 15 (after a whole-pull wait) too
    mid = {n: sorted(pathlib.Path(r.summary["snapshot"]).parent.glob("*_iter_15.caffemodel"))
           for n, r in runs.items()}
    assert len(mid["on"]) == len(mid["off"]) == 1
    assert _digest(mid["on"][0]) == _digest(mid["off"][0])
    # the tests worker 0 ran on the way saw the same weights
    tests = {n: [r.get("accuracy") for r in runs[n].metrics if r["event"] == "test"]
             for n in runs}
    assert tests["on"] == tests["off"] and len(tests["on"]) >= 3
    waits = [r["pull_wait_seconds"] for r in runs["on"].metrics
             if r["event"] == "train" and "pull_wait_seconds" in r]
    assert waits and all(w >= 0 for w in waits)
