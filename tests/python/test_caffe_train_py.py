"""Caffe's python/train.py on pstrain.caffe: its solve(), in the same shape
and with the same calls (set_device / set_mode, set_solver_count,
set_solver_rank, set_multiprocess(True), NCCL(solver, uid) with the uid of
NCCL.new_uid() from the parent, bcast, add_callback(nccl), after_backward(nccl)
under layer_wise_reduce, step(max_iter)), one process per rank started with
multiprocessing (spawn). Two ranks of batch 4 end with the weights of one
process of batch 8: their gradients meet in a bsp ps-server job that rank 0
started. Rank 0 killed leaves no ps-server; a bad uid or a rank 0 that never
comes is one error naming the rank and the uid."""
from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import pathlib
import shutil
import signal
import sys
import time

import numpy as np
import pytest

caffe = pytest.importorskip("pstrain.caffe")
from ps_train_util import leftover_processes  # noqa: E402

MODULE = "pstrain_test_train_py"
ITERS = 50
BATCH = 4  # per rank; the one process reads 2 * BATCH

# Caffe's python/train.py in its shape: time() and solve() make the same calls
# in the same order. The test's changes: `gpus` entries may be "cpu" (set_mode_cpu
# in place of set_device / set_mode_gpu), the engine is "fast" (no autotuning,
# which could pick different kernels for the two batch sizes), and solve()
# saves its rank's weights at the end.
SCRIPT = '''
"""Caffe's python/train.py in its shape, for tests/python/test_caffe_train_py.py,
and a data layer that reads its rank's share of every global batch."""
import json

import numpy as np
import pstrain.caffe as caffe


class Batches(caffe.Layer):
    """Tops x and y: global step t's rows [(t*W + r)*B, (t*W + r + 1)*B)
    (modulo their number) of the .npz file in param_str ("PATH B"), r being
    self.rank of W = self.num_workers; the rank and count it was made with
    go to PATH.rank<r>.json."""

    def setup(self, bottom, top):
        path, batch = self.param_str.split()
        arrays = np.load(path)
        self.x, self.y, self.batch, self.step = arrays["x"], arrays["y"], int(batch), 0
        with open(f"{path}.rank{self.rank}.json", "w") as f:
            json.dump({"rank": self.rank, "num_workers": self.num_workers}, f)

    def reshape(self, bottom, top):
        top[0].reshape(self.batch, self.x.shape[1])
        top[1].reshape(self.batch, self.y.shape[1])

    def forward(self, bottom, top):
        first = (self.step * self.num_workers + self.rank) * self.batch
        rows = np.arange(first, first + self.batch) % len(self.x)
        top[0].data[...] = self.x[rows]
        top[1].data[...] = self.y[rows]
        self.step += 1

    def backward(self, top, propagate_down, bottom):
        pass


def time(solver, nccl):
    fprop = []
    bprop = []
    total = caffe.Timer()
    allrd = caffe.Timer()
    for _ in range(len(solver.net.layers)):
        fprop.append(caffe.Timer())
        bprop.append(caffe.Timer())
    display = solver.param.display

    def show_time():
        if solver.iter % display == 0:
            s = "\\n"
            for i in range(len(solver.net.layers)):
                s += "forw %3d %8s " % (i, solver.net._layer_names[i])
                s += ": %.2f\\n" % fprop[i].ms
            for i in range(len(solver.net.layers) - 1, -1, -1):
                s += "back %3d %8s " % (i, solver.net._layer_names[i])
                s += ": %.2f\\n" % bprop[i].ms
            s += "solver total: %.2f\\n" % total.ms
            s += "allreduce: %.2f\\n" % allrd.ms
            caffe.log(s)

    solver.net.before_forward(lambda layer: fprop[layer].start())
    solver.net.after_forward(lambda layer: fprop[layer].stop())
    solver.net.before_backward(lambda layer: bprop[layer].start())
    solver.net.after_backward(lambda layer: bprop[layer].stop())
    solver.add_callback(lambda: total.start(), lambda: (total.stop(), allrd.start()))
    solver.add_callback(nccl)
    solver.add_callback(lambda: "", lambda: (allrd.stop(), show_time()))


def solve(proto, snapshot, gpus, timing, uid, rank, out):
    if gpus[rank] == "cpu":
        caffe.set_mode_cpu()
    else:
        caffe.set_device(gpus[rank])
        caffe.set_mode_gpu()
    caffe.set_engine("fast")
    caffe.set_solver_count(len(gpus))
    caffe.set_solver_rank(rank)
    caffe.set_multiprocess(True)

    solver = caffe.SGDSolver(proto)
    if snapshot and len(snapshot) != 0:
        solver.restore(snapshot)

    nccl = caffe.NCCL(solver, uid)
    nccl.bcast()

    if timing and rank == 0:
        time(solver, nccl)
    else:
        solver.add_callback(nccl)

    if solver.param.layer_wise_reduce:
        solver.net.after_backward(nccl)
    solver.step(solver.param.max_iter)
    np.savez(f"{out}/rank{rank}.npz", **{f"{name}/{i}": blob.data
                                         for name, blobs in solver.net.params.items()
                                         for i, blob in enumerate(blobs)})
'''

NET = """
name: "mlp"
layer {{ name: "data" type: "Python" top: "x" top: "y"
        python_param {{ module: "{module}" layer: "Batches" param_str: "{data} {batch}" }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "x" top: "ip1"
        inner_product_param {{ num_output: 16 weight_filler {{ type: "gaussian" std: 0.5 }}
                               bias_filler {{ type: "constant" value: 0.1 }} }} }}
layer {{ name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param {{ num_output: 2 weight_filler {{ type: "gaussian" std: 0.5 }} }} }}
layer {{ name: "loss" type: "EuclideanLoss" bottom: "ip2" bottom: "y" top: "loss" }}
"""

# A schedule, momentum and weight decay: the shard must run the solver's rule.
SOLVER = """net: "{net}"
base_lr: 0.05
lr_policy: "step"
gamma: 0.5
stepsize: 20
momentum: 0.9
weight_decay: 0.001
max_iter: {max_iter}
display: 25
random_seed: 3
snapshot_prefix: "{folder}/snap"
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    """The train.py-shaped module, importable here and in the spawned ranks."""
    folder = tmp_path_factory.mktemp("train_py")
    (folder / f"{MODULE}.py").write_text(SCRIPT)
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(MODULE)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(MODULE, None)


def write_job(folder: pathlib.Path, batch: int, max_iter: int = ITERS) -> pathlib.Path:
    """A solver and net in `folder` reading batches of `batch` from data.npz."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((ITERS * 2 * BATCH, 4)).astype(np.float32)
    y = np.stack([x[:, 0] - 0.5 * x[:, 1], np.tanh(x[:, 2] + x[:, 3])], axis=1)
    np.savez(folder / "data.npz", x=x, y=y.astype(np.float32))
    (folder / "net.prototxt").write_text(
        NET.format(module=MODULE, data=folder / "data.npz", batch=batch))
    solver = folder / "solver.prototxt"
    solver.write_text(SOLVER.format(net=folder / "net.prototxt", max_iter=max_iter, folder=folder))
    return solver


def start_ranks(script, solver: pathlib.Path, gpus: list, uid, out: pathlib.Path,
                timing: bool) -> list:
    """One spawned process per rank running solve(), as train.py's train() starts them."""
    context = multiprocessing.get_context("spawn")
    procs = []
    for rank in range(len(gpus)):
        p = context.Process(target=script.solve,
                            args=(str(solver), None, gpus, timing, uid, rank, str(out)))
        p.daemon = True
        p.start()
        procs.append(p)
    return procs


def kill(procs: list) -> None:
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join(10)


def train(script, solver: pathlib.Path, gpus: list, out: pathlib.Path, timing: bool) -> None:
    """train.py's train(): a uid, the ranks, their ends (bounded: killed after 120 s)."""
    uid = caffe.NCCL.new_uid()
    procs = start_ranks(script, solver, gpus, uid, out, timing)
    try:
        deadline = time.monotonic() + 120
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        assert [p.exitcode for p in procs] == [0] * len(gpus), "a rank failed or hung (log above)"
    finally:
        kill(procs)
    assert not os.path.exists(os.fsdecode(uid)), "the rendezvous is left behind"


def weights(path: pathlib.Path) -> dict:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def initial_weights(solver: pathlib.Path) -> dict:
    """The filler's weights of the solver's net (its random_seed), made here."""
    caffe.set_engine("fast")
    made = caffe.SGDSolver(str(solver))
    return {f"{name}/{i}": blob.data.copy()
            for name, blobs in made.net.params.items() for i, blob in enumerate(blobs)}


def gpu_ids(device: str) -> list:
    if device == "cpu":
        return ["cpu", "cpu"]
    from pstrain.programs import cuda_build, gpu_count
    if not cuda_build() or gpu_count() < 1:
        pytest.skip("no GPU (and a CUDA build) to run two ranks on GPU 0")
    return [0, 0]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_two_ranks_of_train_py_equal_one_process_of_twice_the_batch(script, tmp_path, device):
    gpus = gpu_ids(device)
    one = write_job(tmp_path / "one", 2 * BATCH)
    two = write_job(tmp_path / "two", BATCH)
    train(script, one, gpus[:1], tmp_path / "one", timing=False)
    # Rank 0 with train.py's timing hooks (its own after_backward hooks and callbacks
    # around the NCCL one), rank 1 without; both add the NCCL object to net and solver.
    train(script, two, gpus, tmp_path / "two", timing=True)

    for rank in (0, 1):  # each rank's layer knew its place, and read its own rows
        assert (tmp_path / "two" / f"data.npz.rank{rank}.json").read_text() == \
            f'{{"rank": {rank}, "num_workers": 2}}'
    reference = weights(tmp_path / "one" / "rank0.npz")
    start = initial_weights(one)
    rank0 = weights(tmp_path / "two" / "rank0.npz")
    rank1 = weights(tmp_path / "two" / "rank1.npz")
    assert sorted(reference) == sorted(rank0) == ["ip1/0", "ip1/1", "ip2/0", "ip2/1"]
    for key, expected in reference.items():
        moved = np.abs(expected - start[key]).max() / np.abs(expected).max()
        assert moved > 0.05, f"{key} barely moved ({moved:.3g}): the test proves nothing"
        worst = np.abs(rank0[key] - expected).max() / np.abs(expected).max()
        assert worst <= 1e-5, f"{key}: rank 0 is {worst:.3g} (relative) from one process"
        np.testing.assert_array_equal(rank1[key], rank0[key], err_msg=key)


def test_killing_rank_0_leaves_no_ps_server(script, tmp_path):
    solver = write_job(tmp_path, BATCH, max_iter=1_000_000)
    uid = caffe.NCCL.new_uid()
    directory = pathlib.Path(os.fsdecode(uid))
    procs = start_ranks(script, solver, ["cpu", "cpu"], uid, tmp_path, timing=False)
    server_pid = None
    try:
        deadline = time.monotonic() + 60
        while server_pid is None and time.monotonic() < deadline:
            if (directory / "server.json").exists():
                server_pid = int(json.loads((directory / "server.json").read_text())["pid"])
            time.sleep(0.05)
        assert server_pid is not None, "rank 0 started no ps-server within 60 s"
        assert leftover_processes(str(directory)), "the ps-server is not running"
        time.sleep(1.0)  # training under way
        assert all(p.is_alive() for p in procs)
        os.kill(procs[0].pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while leftover_processes(str(directory)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert leftover_processes(str(directory)) == []
    finally:
        kill(procs)
        if server_pid is not None and leftover_processes(str(directory)):
            os.kill(server_pid, signal.SIGKILL)
        shutil.rmtree(directory, ignore_errors=True)


def test_a_bad_uid_or_no_rank_0_is_one_error_naming_the_rank_and_the_uid(script, tmp_path):
    solver = caffe.SGDSolver(str(write_job(tmp_path, BATCH)))
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o755)
    open_folder.chmod(0o755)
    uid = caffe.NCCL.new_uid()
    try:
        caffe.set_solver_count(2)
        caffe.set_solver_rank(1)
        where = "NCCL rank 1 of 2 (uid {}): "
        with pytest.raises(ValueError) as e:
            caffe.NCCL(solver, b"/nonexistent/pstrain-nccl-uid", timeout_s=5)
        assert str(e.value) == where.format("/nonexistent/pstrain-nccl-uid") + \
            "the uid is not a rendezvous of caffe.NCCL.new_uid(): it names no directory " \
            "(No such file or directory)"
        with pytest.raises(ValueError) as e:
            caffe.NCCL(solver, str(open_folder), timeout_s=5)
        assert str(e.value) == where.format(open_folder) + \
            "the uid is not a rendezvous of caffe.NCCL.new_uid(): the directory's mode is " \
            "755, not 700"
        began = time.monotonic()
        with pytest.raises(TimeoutError) as e:
            caffe.NCCL(solver, uid, timeout_s=1)
        assert time.monotonic() - began < 10
        assert str(e.value) == where.format(os.fsdecode(uid)) + \
            "no parameter server appeared in the rendezvous within 1 s; rank 0 must make " \
            "NCCL(solver, uid) with the same uid (caffe.NCCL.new_uid() in the parent)"
    finally:
        caffe.set_solver_count(1)
        caffe.set_solver_rank(0)
        shutil.rmtree(os.fsdecode(uid), ignore_errors=True)


def test_one_solver_keeps_nccl_a_no_op_and_removes_the_unused_rendezvous(script, tmp_path):
    solver = caffe.SGDSolver(str(write_job(tmp_path, BATCH)))
    uid = caffe.NCCL.new_uid()
    assert isinstance(uid, bytes) and os.path.isdir(os.fsdecode(uid))
    try:
        nccl = caffe.NCCL(solver, uid)
        assert not os.path.exists(os.fsdecode(uid))
    finally:
        shutil.rmtree(os.fsdecode(uid), ignore_errors=True)
    assert nccl.applies_update is False
    before = solver.net.params["ip1"][0].data.copy()
    nccl.bcast()
    solver.add_callback(nccl)
    solver.net.after_backward(nccl)
    solver.step(2)
    assert solver.iter == 2
    assert not np.array_equal(solver.net.params["ip1"][0].data, before)  # the local update ran


def test_a_solver_of_several_is_rank_r_of_n_and_only_rank_0_snapshots_and_prints(
        script, tmp_path, capfd):
    path = write_job(tmp_path, BATCH)
    with open(path, "a") as f:
        f.write("snapshot: 1\n")
    caffe.init_log(0)
    try:
        caffe.set_solver_count(2)
        for rank in (1, 0):  # Caffe's root-solver rule: rank 0 tests, snapshots, displays
            caffe.set_solver_rank(rank)
            solver = caffe.SGDSolver(str(path))
            solver.step(1)  # alone (no NCCL): its own update, its own data share
            assert (tmp_path / "data.npz.rank{}.json".format(rank)).read_text() == \
                f'{{"rank": {rank}, "num_workers": 2}}'
            written = sorted(p.name for p in tmp_path.glob("snap_iter_1.*"))
            printed = capfd.readouterr().err
            if rank == 1:
                assert written == [] and "Iteration 0" not in printed
            else:
                assert written == ["snap_iter_1.caffemodel", "snap_iter_1.solverstate"]
                assert "Iteration 0: loss = " in printed
        caffe.set_solver_rank(2)
        with pytest.raises(ValueError) as e:
            caffe.SGDSolver(str(path))
        assert str(e.value) == "solver rank 2 is out of range for solver_count 2"
    finally:
        caffe.set_solver_count(1)
        caffe.set_solver_rank(0)
