"""pstrain.DistributedSolver: a ps-train job driven step by step from Python
(python/pstrain/distributed.py; docs/python.md, "Several GPUs and hosts from
Python").

* bsp, 2 workers x b32 over numpy arrays (MemoryData) ends, after 50
  iterations, at the weights of one pstrain.caffe SGDSolver with MemoryData b64
  over the same arrays (max relative difference <= 1e-5), and the weights moved;
* the same for a Python data layer that reads its share by self.rank;
* step(n) returns with every worker at iter + n in ssp too (the faster one
  waits at the gate), reports loss, images/s and staleness, calls callbacks;
* snapshot() writes a ps-train checkpoint that restore() resumes from;
* a worker killed with SIGKILL during a step is replaced and the step ends;
* the driver killed with SIGKILL, or interrupted (Ctrl-C), leaves no process behind
  (and no shared-memory segment);
* bad input: one exception naming the layer or file, nothing left running.
Every job is bounded in time; every process is gone at the end of each test."""
from __future__ import annotations

import json
import os
import re
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from ps_train_util import leftover_processes

caffe = pytest.importorskip("pstrain.caffe")
import pstrain  # noqa: E402

N = 256
ITERS = 50


def mlp(batch: int, data_layer: str | None = None) -> str:
    data = data_layer or f"""layer {{ name: "mem" type: "MemoryData" top: "data" top: "label"
  memory_data_param {{ batch_size: {batch} channels: 1 height: 4 width: 4 }} }}"""
    return f"""name: "mlp"
{data}
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param {{ num_output: 12 weight_filler {{ type: "gaussian" std: 0.3 }}
                        bias_filler {{ type: "constant" value: 0.1 }} }} }}
layer {{ name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param {{ num_output: 4 weight_filler {{ type: "gaussian" std: 0.3 }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
"""


def write_solver(folder: pathlib.Path, net: str, name: str, *, max_iter: int = ITERS,
                 extra: str = "") -> pathlib.Path:
    (folder / f"{name}.prototxt").write_text(net)
    path = folder / f"{name}_solver.prototxt"
    path.write_text(f'net: "{folder}/{name}.prototxt"\nbase_lr: 0.1\nmomentum: 0.9\n'
                    f'weight_decay: 0.0005\nlr_policy: "fixed"\nmax_iter: {max_iter}\n'
                    f'display: 10\nrandom_seed: 3\nsnapshot_after_train: false\n'
                    f'snapshot_prefix: "{folder}/{name}"\n{extra}')
    return path


def arrays(seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, 1, 4, 4)).astype(np.float32)
    y = (x.reshape(N, -1)[:, :4].argmax(axis=1)).astype(np.float32)
    return x, y


def params(net) -> dict[str, list[np.ndarray]]:
    return {k: [b.data.copy() for b in v] for k, v in net.params.items()}


def max_relative_difference(a: dict, b: dict) -> float:
    """max over blobs of max|a - b| / max|b| (NaN or inf: inf)."""
    worst = 0.0
    for name in a:
        for x, y in zip(a[name], b[name], strict=True):
            d = float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(y))), 1e-12))
            if not np.isfinite(d):
                return float("inf")
            worst = max(worst, d)
    return worst


@pytest.fixture(autouse=True)
def quiet_engine():
    caffe.set_mode_cpu()
    caffe.set_engine("fast")
    caffe.init_log(1)
    yield


@pytest.fixture
def no_leftovers(tmp_path):
    yield
    deadline = time.monotonic() + 15
    while leftover_processes(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftover_processes(str(tmp_path)) == []


def initial_weights(tmp_path: pathlib.Path, solver: pathlib.Path) -> pathlib.Path:
    start = caffe.get_solver(str(solver))
    path = tmp_path / "init.caffemodel"
    start.net.save(str(path))
    return path


def test_bsp_two_workers_over_arrays_equal_one_large_batch(tmp_path, no_leftovers):
    x, y = arrays()
    big = write_solver(tmp_path, mlp(64), "big")
    init = initial_weights(tmp_path, big)
    reference = caffe.SGDSolver(str(big))
    reference.net.copy_from(str(init))
    reference.net.set_input_arrays(x, y)
    reference.step(ITERS)

    small = write_solver(tmp_path, mlp(32), "small")
    solver = pstrain.DistributedSolver(small, workers=2, servers=2, mode="bsp",
                                       weights=init, output=tmp_path / "runs",
                                       security="none")
    solver.set_input_arrays(x, y)
    records = []
    solver.add_callback(records.append)
    start = params(solver.net)
    with solver:
        first = solver.step(20)
        assert (first.iter, first.version) == (20, 20)
        second = solver.step(ITERS - 20)
    assert second.iter == ITERS == solver.iter
    assert max_relative_difference(start, params(solver.net)) > 1e-2, "the weights did not move"
    assert max_relative_difference(params(reference.net), params(solver.net)) <= 1e-5
    assert second.images_per_second > 0 and second.loss is not None
    # bsp: every gradient applied fresh (a clock gap of one between pushes is allowed).
    histogram = second.staleness["histogram"]
    assert histogram[0] > 0 and not any(histogram[1:]), histogram
    assert any(r.get("event") == "train" and r.get("rank") == 0 for r in records)
    summary = json.loads((solver.run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["iterations"] == ITERS


RANK_LAYER = '''
import numpy as np
import pstrain.caffe as caffe


class Rows(caffe.Layer):
    """Rows of arrays.npz, the share of self.rank among self.num_workers: at its
    t-th forward, rows [(t*W + rank)*b, (t*W + rank + 1)*b) modulo N."""

    def setup(self, bottom, top):
        self.batch = int(self.param_str.split(",")[1])
        data = np.load(self.param_str.split(",")[0])
        self.x, self.y = data["x"], data["y"]
        self.t = 0

    def reshape(self, bottom, top):
        top[0].reshape(self.batch, 1, 4, 4)
        top[1].reshape(self.batch)

    def forward(self, bottom, top):
        first = (self.t * self.num_workers + self.rank) * self.batch
        rows = np.arange(first, first + self.batch) % len(self.x)
        top[0].data[...] = self.x[rows]
        top[1].data[...] = self.y[rows]
        self.t += 1

    def backward(self, top, propagate_down, bottom):
        pass
'''


def test_a_python_data_layer_reads_its_share_by_rank(tmp_path, no_leftovers, monkeypatch):
    x, y = arrays(11)
    np.savez(tmp_path / "arrays.npz", x=x, y=y)
    (tmp_path / "rank_rows.py").write_text(RANK_LAYER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")

    def layer(batch):
        return (f'layer {{ name: "rows" type: "Python" top: "data" top: "label" python_param '
                f'{{ module: "rank_rows" layer: "Rows" param_str: "{tmp_path}/arrays.npz,{batch}" '
                f'}} }}')
    big = write_solver(tmp_path, mlp(64, layer(64)), "big", max_iter=30)
    init = initial_weights(tmp_path, big)
    reference = caffe.SGDSolver(str(big))
    reference.net.copy_from(str(init))
    reference.step(30)

    small = write_solver(tmp_path, mlp(32, layer(32)), "small", max_iter=30)
    with pstrain.DistributedSolver(small, workers=2, weights=init, output=tmp_path / "runs",
                                   security="none") as solver:
        solver.step(30)
        assert max_relative_difference(params(reference.net), params(solver.net)) <= 1e-5


def test_ssp_steps_hold_the_faster_worker_at_the_gate(tmp_path, no_leftovers):
    x, y = arrays(5)
    small = write_solver(tmp_path, mlp(16), "ssp", max_iter=40)
    solver = pstrain.DistributedSolver(small, workers=2, mode="ssp", staleness=3,
                                       output=tmp_path / "runs", security="none",
                                       cluster={"straggler": {"rank": 1, "delay_ms": 30}})
    solver.set_input_arrays(x, y)
    with solver:
        for target in (10, 25):
            r = solver.step(target - solver.iter)
            assert r.iter == target
            stats = solver._client.stats()
            # Both workers stand at the gate: neither has run ahead of the step.
            assert [c for s in stats for c in s["worker_clocks"]] == [target] * 2 * len(stats)
        r = solver.step(15)
        assert r.iter == 40
        assert r.staleness["max"] >= 1, "the straggler made no gap"
    assert solver.result.summary["status"] == "ok"


def test_snapshot_then_restore_continues_from_it(tmp_path, no_leftovers):
    x, y = arrays(3)
    path = write_solver(tmp_path, mlp(16), "snap", max_iter=30)
    solver = pstrain.DistributedSolver(path, workers=2, output=tmp_path / "runs",
                                       security="none")
    solver.set_input_arrays(x, y)
    with solver:
        solver.step(12)
        model = solver.snapshot()
        at_12 = params(solver.net)
        solver.step(3)
        assert solver.iter == 15
    assert solver.result.summary["status"] == "stopped"
    assert model.name == "snap_solver_iter_12.caffemodel" and model.exists()
    assert model.with_suffix(".manifest").exists()
    saved = caffe.Net(str(tmp_path / "snap.prototxt"), str(model), caffe.TEST)
    assert max_relative_difference(at_12, params(saved)) == 0.0

    again = pstrain.DistributedSolver(path, workers=2, output=tmp_path / "runs",
                                      security="none")
    again.set_input_arrays(x, y)
    again.restore(model)
    assert again.iter == 12
    with again:
        r = again.step(18)
        assert r.iter == 30
    assert again.result.summary["start_iteration"] == 12


def test_a_worker_killed_during_a_step_is_replaced(tmp_path, no_leftovers):
    x, y = arrays(9)
    path = write_solver(tmp_path, mlp(16), "kill", max_iter=400)
    solver = pstrain.DistributedSolver(path, workers=2, output=tmp_path / "runs",
                                       security="none",
                                       cluster={"straggler": {"rank": 1, "delay_ms": 20}})
    solver.set_input_arrays(x, y)
    restarts = []
    killed = []

    def on_record(record):
        if record.get("event") == "restart":
            restarts.append(record)
        if not killed and record.get("event") == "train" and record.get("rank") == 0:
            worker = [p for p in pstrain_workers(tmp_path) if "--rank 1" in p[1]]
            if worker:
                os.kill(worker[0][0], signal.SIGKILL)
                killed.append(worker[0][0])
    solver.add_callback(on_record)
    with solver:
        r = solver.step(300)
        assert r.iter == 300
    assert killed and len(restarts) == 1 and restarts[0]["rank"] == 1


def pstrain_workers(marker: pathlib.Path) -> list[tuple[int, str]]:
    found = []
    for line in leftover_processes(str(marker)):
        pid, cmdline = line.split(": ", 1)
        if "ps-worker" in cmdline:
            found.append((int(pid), cmdline))
    return found


# The driver takes Ctrl-C as a script at a terminal does, even where the test
# runs with SIGINT ignored (a background job of a shell without job control:
# its children start with SIGINT ignored, and Python keeps it so).
DRIVER = '''
import signal; signal.signal(signal.SIGINT, signal.default_int_handler)
import sys, numpy as np, pstrain, pstrain.caffe as caffe
caffe.init_log(1)
x = np.random.default_rng(1).standard_normal((256, 1, 4, 4)).astype(np.float32)
y = np.zeros(256, np.float32)
s = pstrain.DistributedSolver(sys.argv[1], workers=2, output=sys.argv[2], security="none")
s.set_input_arrays(x, y)
s.step(5)
print("stepping", flush=True)
s.step(100000 - 5)
'''


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "Ctrl-C"])
def test_a_killed_or_interrupted_driver_leaves_nothing(tmp_path, how):
    path = write_solver(tmp_path, mlp(16), "orphan", max_iter=100000)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    segments = set(pathlib.Path("/dev/shm").glob("pstrain-*"))
    driver = subprocess.Popen([sys.executable, str(script), str(path), str(tmp_path / "runs")],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert driver.stdout.readline().strip() == "stepping"
        assert len(pstrain_workers(tmp_path)) == 2
        os.kill(driver.pid, how)
        assert driver.wait(timeout=30) == (-9 if how == signal.SIGKILL else 1)
        deadline = time.monotonic() + 20
        while leftover_processes(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert leftover_processes(str(tmp_path)) == []
        # Nor the workers' host-group segment (one push per host): it goes on SIGTERM.
        assert set(pathlib.Path("/dev/shm").glob("pstrain-*")) == segments
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        for line in leftover_processes(str(tmp_path)):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)


def test_bad_arrays_and_steps_raise_one_clear_error(tmp_path, no_leftovers):
    path = write_solver(tmp_path, mlp(16), "bad")
    solver = pstrain.DistributedSolver(path, workers=2, output=tmp_path / "runs",
                                       security="none")
    x, y = arrays()
    with pytest.raises(ValueError) as shape:
        solver.set_input_arrays(x.reshape(N, 2, 2, 4), y)
    assert str(shape.value) == ("set_input_arrays: layer 'mem' takes arrays of shape "
                                "(N, 1, 4, 4), got data of shape (256, 2, 2, 4)")
    with pytest.raises(ValueError) as few:
        solver.set_input_arrays(x[:20], y[:20])
    assert str(few.value) == ("set_input_arrays: layer 'mem': 20 samples, fewer than one "
                              "global batch (2 workers x batch 16 = 32)")
    with pytest.raises(ValueError) as labels:
        solver.set_input_arrays(x, y[:10])
    assert str(labels.value) == ("set_input_arrays: layer 'mem': 256 samples but labels of "
                                 "shape (10,) (need (256,))")
    with pytest.raises(ValueError) as layer:
        solver.set_input_arrays(x, y, layer="ip1")
    assert str(layer.value) == ("set_input_arrays: the training net has no MemoryData layer "
                                "'ip1' (its MemoryData layers: mem)")
    with pytest.raises(ValueError) as past:
        solver.step(ITERS + 1)
    assert str(past.value) == (f"step({ITERS + 1}): iteration {ITERS + 1} is past the solver's "
                               f"max_iter {ITERS} (a job's workers stop there); raise max_iter "
                               f"(solver_overrides={{'max_iter': N}}) to train longer")
    assert leftover_processes(str(tmp_path)) == []
    with pytest.raises(pstrain.JobError) as job:
        pstrain.DistributedSolver(path, workers=2, mode="fast")
    assert str(job.value).startswith(f"DistributedSolver('{path}'): consistency.mode: ")
    with pytest.raises(pstrain.JobError) as elastic:
        pstrain.DistributedSolver(path, workers=2, mode="asp",
                                  consistency={"easgd": {"tau": 5, "alpha": 0.1}})
    assert str(elastic.value) == (
        f"DistributedSolver('{path}'): consistency.easgd: a DistributedSolver steps iterations, "
        f"and these methods' workers count exchanges; run this job with ps-train")


def test_a_python_layer_that_fails_to_import_in_a_worker_ends_the_step(tmp_path, no_leftovers,
                                                                       monkeypatch):
    # The driver imports the module (it is on sys.path here); the workers do not
    # find it: their PYTHONPATH lacks the folder.
    (tmp_path / "only_here.py").write_text(RANK_LAYER)
    monkeypatch.syspath_prepend(str(tmp_path))
    x, y = arrays()
    np.savez(tmp_path / "arrays.npz", x=x, y=y)
    layer = (f'layer {{ name: "rows" type: "Python" top: "data" top: "label" python_param '
             f'{{ module: "only_here" layer: "Rows" param_str: "{tmp_path}/arrays.npz,16" }} }}')
    path = write_solver(tmp_path, mlp(16, layer), "noimport")
    monkeypatch.setenv("PYTHONPATH", "")
    solver = pstrain.DistributedSolver(path, workers=2, output=tmp_path / "runs",
                                       security="none")
    with pytest.raises(RuntimeError) as failed:
        with solver:
            solver.step(5)
    message = str(failed.value)
    assert re.search(r"^the job ended while [a-z ]+\d+: failed: worker-[01] exited with 1 \(a "
                     r"permanent failure\): ps-worker [01]: .*noimport\.prototxt:2: layer 'rows' "
                     r"\(Python\): python_param module 'only_here' layer 'Rows': "
                     r"ModuleNotFoundError: No module named 'only_here'", message), message
    assert solver.result.summary["status"] == "failed"


FAILING_LAYER = RANK_LAYER.replace("        self.t += 1", '''        self.t += 1
        if self.rank == 1 and self.t == 4:
            raise ValueError("sample 17 is corrupt")''')


def test_a_worker_that_fails_for_good_ends_the_step_naming_file_and_line(tmp_path, no_leftovers,
                                                                        monkeypatch):
    (tmp_path / "failing_rows.py").write_text(FAILING_LAYER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    x, y = arrays()
    np.savez(tmp_path / "arrays.npz", x=x, y=y)
    layer = (f'layer {{ name: "rows" type: "Python" top: "data" top: "label" python_param '
             f'{{ module: "failing_rows" layer: "Rows" param_str: "{tmp_path}/arrays.npz,16" }} }}')
    path = write_solver(tmp_path, mlp(16, layer), "fails")
    line = FAILING_LAYER.splitlines().index('            raise ValueError("sample 17 is corrupt")') + 1
    solver = pstrain.DistributedSolver(path, workers=2, output=tmp_path / "runs",
                                       security="none")
    with pytest.raises(RuntimeError) as failed:
        with solver:
            solver.step(3)        # fine: the layer fails at its 4th forward
            solver.step(10)
    message = str(failed.value)
    assert "worker-1 exited with 1 (a permanent failure): ps-worker 1: " in message, message
    assert f"ValueError: sample 17 is corrupt (at {tmp_path}/failing_rows.py:{line} in forward)" \
        in message, message
    assert solver.iter == 3


def test_devices_default_to_caffe_gpu_id_read_once(monkeypatch):
    from pstrain.distributed import _devices
    monkeypatch.delenv("CAFFE_GPU_ID", raising=False)
    monkeypatch.delenv("CAFFE_MODE", raising=False)
    assert _devices(None) == "cpu"
    monkeypatch.setenv("CAFFE_GPU_ID", "0,1")
    monkeypatch.setenv("CAFFE_MODE", "GPU")
    assert _devices(None) == [0, 1]
    monkeypatch.setenv("CAFFE_MODE", "CPU")
    assert _devices(None) == "cpu"
    monkeypatch.setenv("CAFFE_MODE", "GPU")
    monkeypatch.setenv("CAFFE_GPU_ID", "0,x")
    with pytest.raises(ValueError) as bad:
        _devices(None)
    assert str(bad.value) == "CAFFE_GPU_ID='0,x': expected GPU ids like 0,1"
    assert _devices([2, 3]) == [2, 3] and _devices(1) == [1] and _devices("cpu") == "cpu"
