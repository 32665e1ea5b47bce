"""pstrain.caffe's solvers: every update rule's first step by hand from the
diffs, the solver's attributes and callbacks, snapshot and restore, and the key
check of issue 25: `solver.step(n)` from given weights writes the same bytes
(.caffemodel and .solverstate) as `ps-net train --weights` for n iterations.
Then Caffe's LeNet tutorial flow (examples/01-learning-lenet.ipynb) on
Fashion-MNIST: the train loss falls and the test accuracy, counted here with
numpy, rises. And the GIL: a Python thread runs while step() does.

Needs the compiled extension (pstrain._core), build/bin/ps-net and the
Fashion-MNIST LMDBs (made on first use)."""
from __future__ import annotations

import gc
import pathlib
import subprocess
import threading
from typing import Any

import numpy as np
import pytest

from pstrain_testing import find_build_dir

# A softmax classifier on Fashion-MNIST: one InnerProduct layer, fast enough
# for tests that run many solvers.
TINY_NET = """name: "tiny"
layer {{ name: "fmnist" type: "Data" top: "data" top: "label" include {{ phase: TRAIN }}
  transform_param {{ scale: 0.00390625 }}
  data_param {{ source: "{data}/train_lmdb" batch_size: 16 backend: LMDB }} }}
layer {{ name: "fmnist" type: "Data" top: "data" top: "label" include {{ phase: TEST }}
  transform_param {{ scale: 0.00390625 }}
  data_param {{ source: "{data}/test_lmdb" batch_size: 50 backend: LMDB }} }}
layer {{ name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "xavier" }}
                        bias_filler {{ type: "constant" }} }} }}
layer {{ name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy"
  include {{ phase: TEST }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }}
"""

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def caffe() -> Any:
    import pstrain.caffe

    pstrain.caffe.set_mode_cpu()
    pstrain.caffe.set_engine("fast")
    pstrain.caffe.set_random_seed(1701)
    pstrain.caffe.init_log(1)  # warnings only: keep the test output short
    yield pstrain.caffe
    pstrain.caffe.init_log(0)


@pytest.fixture(scope="module")
def ps_net() -> pathlib.Path:
    return find_build_dir(("ps-net",)) / "bin" / "ps-net"


def lenet_net(tmp: pathlib.Path, data: pathlib.Path, train_batch: int = 64,
              test_batch: int = 100) -> str:
    """configs/nets/lenet_train_test.prototxt with absolute LMDB paths."""
    text = (ROOT / "configs/nets/lenet_train_test.prototxt").read_text()
    text = text.replace('"data/fashion-mnist', f'"{data}')
    text = text.replace("batch_size: 64", f"batch_size: {train_batch}")
    text = text.replace("batch_size: 100", f"batch_size: {test_batch}")
    path = tmp / "lenet_train_test.prototxt"
    path.write_text(text)
    return str(path)


def tiny_net(tmp: pathlib.Path, data: pathlib.Path) -> str:
    path = tmp / "tiny.prototxt"
    path.write_text(TINY_NET.format(data=data))
    return str(path)


def solver_file(tmp: pathlib.Path, net: str, name: str = "solver.prototxt", **fields) -> str:
    """A solver prototxt: `net`, snapshots under tmp/snap, and `fields`."""
    values = {"test_iter": 2, "test_interval": 1000, "test_initialization": "false",
              "base_lr": 0.01, "lr_policy": '"fixed"', "display": 0, "max_iter": 10,
              "snapshot_prefix": f'"{tmp / "snap" / "model"}"', "random_seed": 1}
    values.update(fields)
    (tmp / "snap").mkdir(exist_ok=True)
    lines = [f'net: "{net}"'] + [f"{k}: {v}" for k, v in values.items()]
    path = tmp / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def tiny_solver(tmp_path: pathlib.Path, fashion_mnist: pathlib.Path) -> str:
    return solver_file(tmp_path, tiny_net(tmp_path, fashion_mnist))


# --- the update rules, one step by hand ---------------------------------------------------------

RULES = {
    # class name: (fields the rule needs, first update from g with zero history)
    "SGDSolver": ("momentum: 0", lambda g, lr: lr * g),
    "NesterovSolver": ("momentum: 0.9", lambda g, lr: (1 + 0.9) * lr * g),
    "AdaGradSolver": ("delta: 1e-6", lambda g, lr: lr * g / (np.abs(g) + 1e-6)),
    "RMSPropSolver": ("rms_decay: 0.9\ndelta: 1e-6",
                      lambda g, lr: lr * g / (np.sqrt(0.1 * g * g) + 1e-6)),
    "AdaDeltaSolver": ("momentum: 0.95\ndelta: 1e-6",
                       lambda g, lr: lr * g * np.sqrt(1e-6 / (0.05 * g * g + 1e-6))),
    # Adam's bias-corrected first step: lr * sqrt(1-b2)/(1-b1) * (1-b1) g / (sqrt(1-b2)|g| + eps)
    "AdamSolver": ("momentum: 0.9\nmomentum2: 0.999\ndelta: 1e-8",
                   lambda g, lr: lr * np.sqrt(1 - 0.999) * g
                   / (np.sqrt(0.001 * g * g) + 1e-8)),
}


def set_weights_and_diffs(net: Any, seed: int) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    weights, diffs = [], []
    for blob in net.params["ip"]:
        blob.data[...] = rng.normal(0, 0.1, blob.data.shape)
        blob.diff[...] = rng.normal(0, 1.0, blob.diff.shape)
        weights.append(blob.data.astype(np.float64).copy())
        diffs.append(blob.diff.astype(np.float64).copy())
    return weights, diffs


@pytest.mark.parametrize("cls", sorted(RULES))
def test_each_class_forces_its_rule(caffe: Any, tmp_path: pathlib.Path,
                                    fashion_mnist: pathlib.Path, cls: str) -> None:
    """The file says SGD or some other rule; the class decides, as in pycaffe."""
    fields, update = RULES[cls]
    other = '"SGD"' if cls != "SGDSolver" else '"Adam"'
    path = solver_file(tmp_path, tiny_net(tmp_path, fashion_mnist), base_lr=0.05,
                       type=other, **dict(line.split(": ") for line in fields.splitlines()))
    solver = getattr(caffe, cls)(path)
    assert type(solver).__name__ == cls and isinstance(solver, caffe.Solver)
    weights, diffs = set_weights_and_diffs(solver.net, seed=1)
    solver.apply_update()
    assert solver.iter == 0  # apply_update does not advance the iteration
    for blob, w, g in zip(solver.net.params["ip"], weights, diffs):
        np.testing.assert_allclose(blob.data, w - update(g, 0.05), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind,cls", [("SGD", "SGDSolver"), ("Nesterov", "NesterovSolver"),
                                      ("AdaGrad", "AdaGradSolver"),
                                      ("RMSProp", "RMSPropSolver"),
                                      ("AdaDelta", "AdaDeltaSolver"), ("Adam", "AdamSolver")])
def test_get_solver_reads_the_type_from_the_file(caffe: Any, tmp_path: pathlib.Path,
                                                 fashion_mnist: pathlib.Path, kind: str,
                                                 cls: str) -> None:
    fields, update = RULES[cls]
    path = solver_file(tmp_path, tiny_net(tmp_path, fashion_mnist), base_lr=0.05,
                       type=f'"{kind}"', **dict(line.split(": ") for line in fields.splitlines()))
    solver = caffe.get_solver(path)
    assert type(solver).__name__ == cls
    weights, diffs = set_weights_and_diffs(solver.net, seed=2)
    solver.apply_update()
    for blob, w, g in zip(solver.net.params["ip"], weights, diffs):
        np.testing.assert_allclose(blob.data, w - update(g, 0.05), rtol=1e-4, atol=1e-6)


def test_apply_update_is_one_sgd_step_with_lr_mult(caffe: Any, tmp_path: pathlib.Path,
                                                   fashion_mnist: pathlib.Path) -> None:
    """Caffe's test_solver.py apply_update, and lr_mult 2 on the bias as LeNet has."""
    net = tiny_net(tmp_path, fashion_mnist)
    pathlib.Path(net).write_text(pathlib.Path(net).read_text().replace(
        'top: "ip"\n', 'top: "ip" param { lr_mult: 1 } param { lr_mult: 2 }\n'))
    solver = caffe.SGDSolver(solver_file(tmp_path, net, base_lr=0.01, momentum=0,
                                         weight_decay=0))
    weights, diffs = set_weights_and_diffs(solver.net, seed=3)
    solver.apply_update()
    W, b = solver.net.params["ip"]
    np.testing.assert_allclose(W.data, weights[0] - 0.01 * diffs[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(b.data, weights[1] - 0.02 * diffs[1], rtol=1e-5, atol=1e-7)


def test_base_lr_is_settable_and_effective(caffe: Any, tiny_solver: str) -> None:
    solver = caffe.SGDSolver(tiny_solver)
    assert solver.param.base_lr == pytest.approx(0.01)
    assert solver.lr == pytest.approx(0.01)
    solver.param.base_lr = 0.5
    assert solver.param.base_lr == pytest.approx(0.5) and solver.lr == pytest.approx(0.5)
    weights, diffs = set_weights_and_diffs(solver.net, seed=4)
    solver.apply_update()
    np.testing.assert_allclose(solver.net.params["ip"][0].data, weights[0] - 0.5 * diffs[0],
                               rtol=1e-5, atol=1e-6)


def test_attributes(caffe: Any, tmp_path: pathlib.Path, fashion_mnist: pathlib.Path) -> None:
    path = solver_file(tmp_path, tiny_net(tmp_path, fashion_mnist), max_iter=37, display=5,
                       base_lr=0.02, lr_policy='"inv"', gamma=0.1, power=0.75)
    solver = caffe.SGDSolver(path)
    assert (solver.param.max_iter, solver.param.display) == (37, 5)
    assert solver.iter == 0
    assert len(solver.test_nets) == 1
    assert list(solver.net.blobs)[:2] == ["data", "label"]
    assert "accuracy" in solver.test_nets[0].outputs and "accuracy" not in solver.net.outputs
    assert solver.net.blobs["data"].shape == [16, 1, 28, 28]
    assert solver.test_nets[0].blobs["data"].shape == [50, 1, 28, 28]
    # The test nets share the train net's weights, as Caffe's do.
    assert np.shares_memory(solver.test_nets[0].params["ip"][0].data,
                            solver.net.params["ip"][0].data)
    solver.step(4)
    assert solver.iter == 4
    # lr is this iteration's rate under the "inv" policy.
    assert solver.lr == pytest.approx(0.02 * (1 + 0.1 * 4) ** -0.75, rel=1e-6)


def test_nets_outlive_the_solver(caffe: Any, tiny_solver: str) -> None:
    """Caffe's test_solver.py test_net_memory: nets kept after the solver goes."""
    solver = caffe.SGDSolver(tiny_solver)
    solver.step(1)
    nets = [solver.net] + list(solver.test_nets)
    expected = solver.net.params["ip"][0].data.copy()
    del solver
    gc.collect()
    assert len(nets) == 2
    for net in nets:
        np.testing.assert_array_equal(net.params["ip"][0].data, expected)
        for blob in net.blobs.values():
            assert np.isfinite(blob.data).all() and np.isfinite(blob.diff).all()
    nets[1].forward()  # and they still run


def test_step_trains_and_solve_runs_to_max_iter(caffe: Any, tmp_path: pathlib.Path,
                                                tiny_solver: str) -> None:
    solver = caffe.SGDSolver(tiny_solver)
    before = solver.net.params["ip"][0].data.copy()
    solver.step(3)
    assert solver.iter == 3
    assert not np.array_equal(before, solver.net.params["ip"][0].data)
    solver.solve()
    assert solver.iter == 10
    # Solve ends with a snapshot at max_iter, as Caffe's does.
    assert (tmp_path / "snap" / "model_iter_10.caffemodel").is_file()
    assert (tmp_path / "snap" / "model_iter_10.solverstate").is_file()


def test_snapshot_writes_weights_caffe_can_load(caffe: Any, tmp_path: pathlib.Path,
                                                tiny_solver: str) -> None:
    solver = caffe.SGDSolver(tiny_solver)
    solver.step(2)
    solver.snapshot()
    model = tmp_path / "snap" / "model_iter_2.caffemodel"
    assert model.is_file() and (tmp_path / "snap" / "model_iter_2.solverstate").is_file()
    # Read the file with protobuf alone: the blobs are the solver's weights.
    from pstrain.caffe.proto import caffe_pb2

    param = caffe_pb2.NetParameter.FromString(model.read_bytes())
    layer = next(l for l in param.layer if l.name == "ip")
    np.testing.assert_array_equal(np.array(layer.blobs[0].data, np.float32).reshape(10, 784),
                                  solver.net.params["ip"][0].data)
    np.testing.assert_array_equal(np.array(layer.blobs[1].data, np.float32),
                                  solver.net.params["ip"][1].data)


def test_restore_continues_exactly(caffe: Any, tmp_path: pathlib.Path,
                                   fashion_mnist: pathlib.Path) -> None:
    net = tiny_net(tmp_path, fashion_mnist)
    path = solver_file(tmp_path, net, momentum=0.9, weight_decay=0.0005)
    straight = caffe.SGDSolver(path)
    straight.step(5)
    expected = [b.data.copy() for b in straight.net.params["ip"]]

    first = caffe.SGDSolver(path)
    first.step(3)
    first.snapshot()
    state = str(tmp_path / "snap" / "model_iter_3.solverstate")
    for resume in ("restore", "solve"):
        second = caffe.SGDSolver(path)
        if resume == "restore":
            second.restore(state)
            assert second.iter == 3
            second.step(2)
            assert second.iter == 5
            got = [b.data for b in second.net.params["ip"]]
        else:  # solve(resume) runs on to max_iter; compare with a straight run to 10
            second.solve(state)
            assert second.iter == 10
            straight.step(5)
            expected = [b.data.copy() for b in straight.net.params["ip"]]
            got = [b.data for b in second.net.params["ip"]]
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)


def test_callbacks_run_once_an_iteration_before_the_update(caffe: Any, tiny_solver: str) -> None:
    solver = caffe.SGDSolver(tiny_solver)  # momentum 0, weight_decay 0: no diff, no change
    calls: list[str] = []
    seen_diff: list[float] = []
    # Views, not the solver: a callback that held the solver would keep it alive for good.
    diffs = [blob.diff for blob in solver.net.params["ip"]]

    def on_gradients_ready() -> None:
        calls.append("ready")
        for diff in diffs:
            seen_diff.append(float(np.abs(diff).sum()))
            diff[...] = 0  # the update that follows must see the zeros

    solver.add_callback(lambda: calls.append("start"), on_gradients_ready)
    before = [b.data.copy() for b in solver.net.params["ip"]]
    solver.step(4)
    assert calls == ["start", "ready"] * 4
    assert all(d > 0 for d in seen_diff)  # the gradients were there
    for blob, old in zip(solver.net.params["ip"], before):
        np.testing.assert_array_equal(blob.data, old)

    class Counter:  # an object with the two methods, as Caffe's NCCL
        def __init__(self) -> None:
            self.starts = self.ready = 0

        def on_start(self) -> None:
            self.starts += 1

        def on_gradients_ready(self) -> None:
            self.ready += 1

    counter = Counter()
    solver.add_callback(counter)
    solver.step(3)
    assert (counter.starts, counter.ready) == (3, 3)
    assert calls.count("start") == 7


def test_callback_exception_stops_the_step(caffe: Any, tiny_solver: str) -> None:
    solver = caffe.SGDSolver(tiny_solver)
    starts = [0]

    def on_start() -> None:
        starts[0] += 1
        if starts[0] == 3:  # the start of iteration 2
            raise RuntimeError("stop at two")

    solver.add_callback(on_start, lambda: None)
    with pytest.raises(RuntimeError, match="stop at two"):
        solver.step(5)
    assert solver.iter == 2


def test_share_weights_with_a_deploy_net(caffe: Any, tmp_path: pathlib.Path,
                                         tiny_solver: str) -> None:
    deploy = tmp_path / "deploy.prototxt"
    deploy.write_text('layer { name: "data" type: "Input" top: "data"\n'
                      '  input_param { shape { dim: 3 dim: 1 dim: 28 dim: 28 } } }\n'
                      'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"\n'
                      '  inner_product_param { num_output: 10 } }\n')
    solver = caffe.SGDSolver(tiny_solver)
    net = caffe.Net(str(deploy), caffe.TEST)
    solver.share_weights(net)
    solver.step(2)
    W, b = (blob.data.astype(np.float64) for blob in solver.net.params["ip"])
    assert np.shares_memory(net.params["ip"][0].data, solver.net.params["ip"][0].data)
    x = np.random.default_rng(5).uniform(0, 1, (3, 1, 28, 28)).astype(np.float32)
    np.testing.assert_allclose(net.forward(data=x)["ip"], x.reshape(3, -1) @ W.T + b,
                               rtol=1e-5, atol=1e-5)


def test_bad_solver_files(caffe: Any, tmp_path: pathlib.Path, fashion_mnist: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match="absent_solver.prototxt"):
        caffe.SGDSolver(str(tmp_path / "absent_solver.prototxt"))
    bad = tmp_path / "bad_solver.prototxt"
    bad.write_text('net: "x.prototxt"\nbase_lr: fast\n')
    with pytest.raises(ValueError, match=r"bad_solver\.prototxt:2"):
        caffe.get_solver(str(bad))
    missing_net = solver_file(tmp_path, str(tmp_path / "no_net.prototxt"), name="s2.prototxt")
    with pytest.raises(Exception, match="no_net.prototxt"):
        caffe.SGDSolver(missing_net)
    solver = caffe.SGDSolver(solver_file(tmp_path, tiny_net(tmp_path, fashion_mnist)))
    with pytest.raises(Exception, match="absent.solverstate"):
        solver.restore(str(tmp_path / "absent.solverstate"))
    with pytest.raises(ValueError):
        solver.step(-1)



def test_solver_mode_in_the_file_is_ignored(caffe: Any, tmp_path: pathlib.Path,
                                            fashion_mnist: pathlib.Path) -> None:
    """pycaffe never reads solver_mode (only `caffe train` does): set_mode_cpu()
    decides, so Caffe's own solvers (`solver_mode: GPU`) run on the CPU, and
    train exactly as the same solver with `solver_mode: CPU`."""
    net = tiny_net(tmp_path, fashion_mnist)
    weights = []
    for mode in ("GPU", "CPU"):
        caffe.set_random_seed(1701)
        solver = caffe.get_solver(solver_file(tmp_path, net, name=f"{mode}.prototxt",
                                              solver_mode=mode, device_id=7))
        solver.step(2)
        assert solver.iter == 2
        weights.append([b.data.copy() for b in solver.net.params["ip"]])
    for gpu_file, cpu_file in zip(*weights):
        np.testing.assert_array_equal(gpu_file, cpu_file)


def test_refused_solver_field_names_its_line(caffe: Any, tmp_path: pathlib.Path,
                                             fashion_mnist: pathlib.Path) -> None:
    net = tmp_path / "slash.prototxt"
    net.write_text(TINY_NET.replace('name: "ip"', 'name: "fc/ip"').format(data=fashion_mnist))
    path = solver_file(tmp_path, str(net), snapshot_format="HDF5")
    with pytest.raises(ValueError) as error:
        caffe.get_solver(path)
    # line 11: net, the nine default fields, then snapshot_format
    assert str(error.value) == (f"{path}:11: snapshot_format HDF5 cannot write layer 'fc/ip' (a "
                                f"'/' in its name); use BINARYPROTO")


def test_snapshot_format_hdf5_writes_caffes_hdf5_files(caffe: Any, tmp_path: pathlib.Path,
                                                       fashion_mnist: pathlib.Path) -> None:
    net = tiny_net(tmp_path, fashion_mnist)
    path = solver_file(tmp_path, net, momentum=0.9, snapshot_format="HDF5")
    first = caffe.SGDSolver(path)
    first.step(3)
    first.snapshot()
    model = tmp_path / "snap" / "model_iter_3.caffemodel.h5"
    state = tmp_path / "snap" / "model_iter_3.solverstate.h5"
    assert sorted(p.name for p in (tmp_path / "snap").iterdir()) == [model.name, state.name]
    h5py = pytest.importorskip("h5py")
    with h5py.File(model, "r") as f:   # Caffe's Net::ToHDF5 layout
        assert sorted(f["data"]) == ["fmnist", "ip", "loss"]   # the TRAIN net's layers
        np.testing.assert_array_equal(f["data/ip/0"][()], first.net.params["ip"][0].data)
        np.testing.assert_array_equal(f["data/ip/1"][()], first.net.params["ip"][1].data)
    with h5py.File(state, "r") as f:   # SGDSolver::SnapshotSolverStateToHDF5's
        assert f["iter"][()].tolist() == [3] and f["current_step"][()].tolist() == [0]
        assert f["learned_net"][()].decode() == str(model)
        assert sorted(f["history"]) == ["0", "1"]
    second = caffe.SGDSolver(path)
    second.restore(str(state))
    assert second.iter == 3
    second.step(2)
    first.step(2)
    for a, b in zip(second.net.params["ip"], first.net.params["ip"]):
        np.testing.assert_array_equal(a.data, b.data)


# --- the key test: byte-identical to ps-net train -----------------------------------------------


@pytest.mark.parametrize("rule", ["SGD", "Adam"])
def test_step_is_byte_identical_to_ps_net_train(caffe: Any, tmp_path: pathlib.Path,
                                                fashion_mnist: pathlib.Path,
                                                ps_net: pathlib.Path, rule: str) -> None:
    iterations = 5
    fields = ({"momentum": 0.9, "weight_decay": 0.0005, "lr_policy": '"inv"', "gamma": 0.0001,
               "power": 0.75} if rule == "SGD" else
              {"type": '"Adam"', "momentum": 0.9, "momentum2": 0.999, "delta": 1e-8,
               "base_lr": 0.001})
    net = lenet_net(tmp_path, fashion_mnist)
    solver_path = solver_file(tmp_path, net, max_iter=iterations, **fields)
    # The starting weights: a net of other random weights, saved.
    caffe.set_random_seed(4242)
    weights = str(tmp_path / "start.caffemodel")
    caffe.Net(net, caffe.TRAIN).save(weights)
    snap = tmp_path / "snap"
    names = [f"model_iter_{iterations}.caffemodel", f"model_iter_{iterations}.solverstate"]

    run = subprocess.run([str(ps_net), "train", "--solver", solver_path, "--weights", weights,
                          "--engine", "fast"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    (tmp_path / "cli").mkdir()
    for name in names:  # move them aside: the Python run writes the same names
        (snap / name).rename(tmp_path / "cli" / name)

    solver = caffe.SGDSolver(solver_path) if rule == "SGD" else caffe.AdamSolver(solver_path)
    solver.net.copy_from(weights)
    if rule == "SGD":  # two calls continue as one run does
        solver.step(2)
        solver.step(iterations - 2)
    else:
        solver.step(iterations)
    solver.snapshot()
    for name in names:
        cli, py = (tmp_path / "cli" / name).read_bytes(), (snap / name).read_bytes()
        assert len(cli) > 1000 and cli == py, name
    # The run trained: the weights moved from the start.
    start = caffe.Net(net, caffe.TRAIN, weights=weights)
    assert not np.array_equal(start.params["conv1"][0].data, solver.net.params["conv1"][0].data)


# --- Caffe's LeNet tutorial, on Fashion-MNIST ---------------------------------------------------


def test_lenet_tutorial_flow(caffe: Any, tmp_path: pathlib.Path,
                             fashion_mnist: pathlib.Path) -> None:
    """examples/01-learning-lenet.ipynb: step(1) at a time, record the train
    loss, run the test net now and then, and count correct answers from its
    scores with numpy."""
    net = lenet_net(tmp_path, fashion_mnist, train_batch=64, test_batch=100)
    solver = caffe.SGDSolver(solver_file(
        tmp_path, net, base_lr=0.01, momentum=0.9, weight_decay=0.0005, lr_policy='"inv"',
        gamma=0.0001, power=0.75, test_interval=500, test_iter=10))

    # The tutorial's first look: a forward of each net fills the blobs.
    assert [(k, tuple(v.data.shape)) for k, v in solver.net.blobs.items()][:2] == [
        ("data", (64, 1, 28, 28)), ("label", (64,))]
    solver.net.forward()
    solver.test_nets[0].forward()
    data = solver.net.blobs["data"].data
    assert 0.0 <= data.min() and data.max() <= 1.0 and data.max() > 0.5  # scaled by 1/256
    labels = solver.net.blobs["label"].data
    assert set(np.unique(labels)) <= set(range(10)) and len(np.unique(labels)) > 3
    # forward(start='conv1') skips the data layer: the same test batch again.
    test_labels = solver.test_nets[0].blobs["label"].data.copy()
    scores = solver.test_nets[0].blobs["ip2"].data.copy()
    solver.test_nets[0].forward(start="conv1")
    np.testing.assert_array_equal(solver.test_nets[0].blobs["label"].data, test_labels)
    np.testing.assert_array_equal(solver.test_nets[0].blobs["ip2"].data, scores)

    def test_accuracy() -> float:
        test = solver.test_nets[0]
        correct = 0
        for _ in range(10):
            test.forward()
            scores = test.blobs["ip2"].data
            correct += int((scores.argmax(1) == test.blobs["label"].data).sum())
            # The Accuracy layer agrees with the count done here.
            assert test.blobs["accuracy"].data == pytest.approx(
                (scores.argmax(1) == test.blobs["label"].data).mean())
        return correct / 1000.0

    niter, test_every = 200, 50
    train_loss = np.zeros(niter)
    accuracy = {0: test_accuracy()}
    for it in range(niter):
        solver.step(1)
        train_loss[it] = solver.net.blobs["loss"].data
        if (it + 1) % test_every == 0:
            accuracy[it + 1] = test_accuracy()
    assert solver.iter == niter
    assert np.isfinite(train_loss).all()
    first, last = train_loss[:5].mean(), train_loss[-20:].mean()
    assert first > 1.8 and last < 0.5 * first, (first, last)  # ln 10 = 2.3 at the start
    assert accuracy[0] < 0.3 and accuracy[niter] > 0.7, accuracy
    assert accuracy[niter] > accuracy[niter // 2] - 0.05, accuracy  # no collapse on the way


# --- the GIL ------------------------------------------------------------------------------------


def test_python_thread_runs_while_step_runs(caffe: Any, tmp_path: pathlib.Path,
                                            fashion_mnist: pathlib.Path) -> None:
    """A thread that needs the GIL watches solver.iter during step(n): it sees
    the iterations in between, which it could not if step held the GIL."""
    solver = caffe.SGDSolver(solver_file(tmp_path, lenet_net(tmp_path, fashion_mnist, 32, 10)))
    solver.step(1)  # set-up work (first batches, engine choices) out of the way
    running = threading.Event()
    stop = threading.Event()
    seen: set[int] = set()
    count = [0]

    def watch() -> None:
        running.set()
        while not stop.is_set():
            count[0] += 1
            seen.add(solver.iter)
            stop.wait(0.0005)

    thread = threading.Thread(target=watch)
    thread.start()
    running.wait()
    count_before = count[0]
    solver.step(30)
    count_after = count[0]
    stop.set()
    thread.join()
    assert solver.iter == 31
    assert count_after > count_before
    assert seen & set(range(2, 31)), sorted(seen)  # iterations strictly inside the step
