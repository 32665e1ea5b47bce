"""The two layers issue 25 adds for pycaffe users: MemoryData (fed by
Net.set_input_arrays) and Python layers, from pstrain.caffe and from ps-net.

MemoryData: batches in turn and wrapping, both label forms, the arrays read
in place and kept alive, a solver step on them by hand, and each refusal's
message; `ps-net time` refuses it in one line naming the layer.
Python layers (a module written to a temporary folder on sys.path): the
attributes the engine sets, parameters of their own that a solver trains (by
hand), a finite-difference check of backward through the net, each error as an
exception naming the module, the class and the layer; and the same net under
`ps-net time` (the embedded interpreter) and `ps-net train`, whose snapshot is
byte-identical to the one pstrain.caffe's solver writes.

Needs the compiled extension (pstrain._core), build/bin/ps-net, and for the
ps-net train test the Fashion-MNIST LMDBs (made on first use)."""
from __future__ import annotations

import gc
import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Iterator

import numpy as np
import pytest

from pstrain_testing import find_build_dir

MODULE = "pstrain_test_pylayers"

LAYER_MODULE = '''
"""Python layers for tests/python/test_caffe_layers.py."""
import json

import numpy as np
import pstrain.caffe as caffe


class Record(caffe.Layer):
    """top = bottom; writes what the engine gave it and its call counts to the
    JSON file whose path is param_str."""

    def setup(self, bottom, top):
        self.log = {"param_str": self.param_str, "phase": self.phase, "rank": self.rank,
                    "num_workers": self.num_workers, "type": self.type,
                    "name": self.layer_param.name, "forward": 0, "backward": 0}
        self.write()

    def write(self):
        with open(self.param_str, "w") as f:
            json.dump(self.log, f)

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data
        self.log["forward"] += 1
        self.write()

    def backward(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff
        self.log["backward"] += 1
        self.write()


class PowerScale(caffe.Layer):
    """top = s * bottom**2, s a learnable blob of one sample's shape, first
    filled with float(param_str)."""

    def setup(self, bottom, top):
        if len(bottom) != 1:
            raise ValueError("PowerScale takes one bottom")
        self.blobs.add_blob(*bottom[0].data.shape[1:])
        self.blobs[0].data[...] = float(self.param_str)

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = self.blobs[0].data * bottom[0].data ** 2

    def backward(self, top, propagate_down, bottom):
        x, g = bottom[0].data, top[0].diff
        self.blobs[0].diff[...] += (g * x * x).sum(axis=0)
        if propagate_down[0]:
            bottom[0].diff[...] = 2.0 * self.blobs[0].data * x * g


class Fail(caffe.Layer):
    """top = bottom; raises in the method param_str names ("negative": in
    forward when an input is negative)."""

    def setup(self, bottom, top):
        if self.param_str == "setup":
            raise ValueError("setup refuses")

    def reshape(self, bottom, top):
        if self.param_str == "reshape":
            raise IndexError("reshape refuses")
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        if self.param_str == "forward":
            raise ZeroDivisionError("forward refuses")
        if self.param_str == "negative" and (bottom[0].data < 0).any():
            raise ValueError("negative input")
        top[0].data[...] = bottom[0].data

    def backward(self, top, propagate_down, bottom):
        if self.param_str == "backward":
            raise RuntimeError("backward refuses")
        bottom[0].diff[...] = top[0].diff
'''

BROKEN_MODULE = 'import pstrain_no_such_dependency_xyz\n'


@pytest.fixture(scope="module")
def layer_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    """A folder holding the layer modules, on sys.path while this file runs."""
    folder = tmp_path_factory.mktemp("pylayers")
    (folder / f"{MODULE}.py").write_text(LAYER_MODULE)
    (folder / "pstrain_test_broken_layer.py").write_text(BROKEN_MODULE)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    for name in (MODULE, "pstrain_test_broken_layer"):
        sys.modules.pop(name, None)


@pytest.fixture
def caffe(layer_dir: pathlib.Path) -> Iterator[Any]:
    import pstrain.caffe

    pstrain.caffe.set_mode_cpu()
    pstrain.caffe.set_engine("fast")
    pstrain.caffe.set_random_seed(99)
    pstrain.caffe.init_log(1)
    yield pstrain.caffe
    pstrain.caffe.init_log(0)


@pytest.fixture(scope="module")
def ps_net() -> pathlib.Path:
    return find_build_dir(("ps-net",)) / "bin" / "ps-net"


def write(folder: pathlib.Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def python_layer(name: str, cls: str, bottom: str, top: str, param_str: str = "",
                 module: str = MODULE) -> str:
    return (f'layer {{ name: "{name}" type: "Python" bottom: "{bottom}" top: "{top}"\n'
            f'  python_param {{ module: "{module}" layer: "{cls}" param_str: "{param_str}" }} }}\n')


def input_layer(name: str, *dims: int) -> str:
    shape = " ".join(f"dim: {d}" for d in dims)
    return (f'layer {{ name: "{name}" type: "Input" top: "{name}"\n'
            f'  input_param {{ shape {{ {shape} }} }} }}\n')


def ps_net_env(layer_dir: pathlib.Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(layer_dir)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def test_both_layers_are_registered(caffe: Any) -> None:
    types = caffe.layer_type_list()
    assert "MemoryData" in types and "Python" in types


# --- MemoryData -------------------------------------------------------------------------------

MEMORY = """name: "memory"
layer { name: "mem" type: "MemoryData" top: "data" top: "label"
  memory_data_param { batch_size: 2 channels: 3 height: 2 width: 1 } }
"""


@pytest.fixture
def memory_net(caffe: Any, tmp_path: pathlib.Path) -> Any:
    return caffe.Net(write(tmp_path, "memory.prototxt", MEMORY), caffe.TRAIN)


def arrays(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.normal(0, 1, (n, 3, 2, 1)).astype(np.float32),
            rng.integers(0, 10, n).astype(np.float32))


@pytest.mark.parametrize("label_form", ["1-d", "4-d"])
def test_memory_data_batches_in_turn_and_wraps(memory_net: Any, label_form: str) -> None:
    data, labels = arrays(6)
    memory_net.set_input_arrays(data, labels if label_form == "1-d"
                                else labels.reshape(6, 1, 1, 1).copy())
    assert memory_net.outputs == ["data", "label"]
    for batch in [0, 1, 2, 0, 1]:  # three batches of two, then round again
        out = memory_net.forward()
        np.testing.assert_array_equal(out["data"], data[2 * batch:2 * batch + 2])
        np.testing.assert_array_equal(out["label"], labels[2 * batch:2 * batch + 2])
    assert memory_net.blobs["label"].shape == [2]


def test_memory_data_restarts_at_new_arrays(memory_net: Any) -> None:
    data, labels = arrays(4, seed=1)
    memory_net.set_input_arrays(data, labels)
    memory_net.forward()
    other, other_labels = arrays(4, seed=2)
    memory_net.set_input_arrays(other, other_labels)
    np.testing.assert_array_equal(memory_net.forward()["data"], other[:2])


def test_memory_data_reads_the_arrays_in_place_and_keeps_them(memory_net: Any) -> None:
    data, labels = arrays(4, seed=3)
    memory_net.set_input_arrays(data, labels)
    data[2:4] = 5.0  # read, not copied, as in Caffe: the change is seen
    memory_net.forward()
    np.testing.assert_array_equal(memory_net.forward()["data"], np.full((2, 3, 2, 1), 5.0))
    # The net keeps arrays nobody else holds alive.
    fresh, fresh_labels = arrays(4, seed=4)
    memory_net.set_input_arrays(fresh.copy(), fresh_labels.copy())
    gc.collect()
    junk = [np.full((4, 3, 2, 1), -7.0, np.float32) for _ in range(100)]
    np.testing.assert_array_equal(memory_net.forward()["data"], fresh[:2])
    np.testing.assert_array_equal(memory_net.forward()["label"], fresh_labels[2:])
    del junk


def test_memory_data_forward_before_arrays(memory_net: Any) -> None:
    with pytest.raises(RuntimeError, match=r"memory.prototxt:2: layer 'mem' \(MemoryData\): "
                                           r"MemoryData has no arrays: call set_input_arrays"):
        memory_net.forward()


@pytest.mark.parametrize("case,match", [
    ("not contiguous", "data array must be C contiguous"),
    ("3-d", "data array must be 4-d, got 3-d"),
    ("float64", "data array must be float32, got float64"),
    ("labels float64", "labels array must be float32, got float64"),
    ("channels", "data array has wrong number of channels: 4, MemoryData 'mem' takes 3"),
    ("height", "data array has wrong height: 3, MemoryData 'mem' takes 2"),
    ("width", "data array has wrong width: 2, MemoryData 'mem' takes 1"),
    ("first dims", "data and labels must have the same first dimension"),
    ("batch multiple", "first dimensions of input arrays must be a multiple of batch size"),
    ("empty", "MemoryData 'mem' takes a multiple of its batch_size 2 samples, got 0"),
])
def test_set_input_arrays_refusals(memory_net: Any, case: str, match: str) -> None:
    data, labels = arrays(4)
    if case == "not contiguous":
        data = np.asfortranarray(data)
    elif case == "3-d":
        data = data[:, :, :, 0]
    elif case == "float64":
        data = data.astype(np.float64)
    elif case == "labels float64":
        labels = labels.astype(np.float64)
    elif case in ("channels", "height", "width"):
        shape = {"channels": (4, 4, 2, 1), "height": (4, 3, 3, 1), "width": (4, 3, 2, 2)}[case]
        data = np.zeros(shape, np.float32)
    elif case == "first dims":
        labels = labels[:2].copy()
    elif case == "batch multiple":
        data, labels = arrays(3)
    elif case == "empty":
        data, labels = arrays(0)
    with pytest.raises(ValueError) as info:
        memory_net.set_input_arrays(data, labels)
    assert match in str(info.value)
    # Nothing was taken: good arrays still work afterwards.
    good, good_labels = arrays(2, seed=5)
    memory_net.set_input_arrays(good, good_labels)
    np.testing.assert_array_equal(memory_net.forward()["data"], good)


def test_set_input_arrays_needs_memory_data_first(caffe: Any, tmp_path: pathlib.Path) -> None:
    net = caffe.Net(write(tmp_path, "input.prototxt", 'name: "plain"\n' + input_layer(
        "data", 2, 3, 2, 1)), caffe.TEST)
    with pytest.raises(ValueError, match="set_input_arrays may only be called if the first "
                                         "layer is a MemoryDataLayer .net 'plain'."):
        net.set_input_arrays(*arrays(2))


def test_solver_step_on_memory_data_by_hand(caffe: Any, tmp_path: pathlib.Path) -> None:
    """Caffe's way to train on numpy arrays: one SGD step checked with numpy."""
    net = write(tmp_path, "memory_train.prototxt", MEMORY + """
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
""")
    solver_path = write(tmp_path, "solver.prototxt", f'net: "{net}"\nbase_lr: 0.1\n'
                        'lr_policy: "fixed"\nmax_iter: 10\ndisplay: 0\n'
                        f'snapshot_prefix: "{tmp_path}/m"\n')
    solver = caffe.SGDSolver(solver_path)
    rng = np.random.default_rng(6)
    data = rng.normal(0, 1, (4, 3, 2, 1)).astype(np.float32)
    labels = np.array([0, 3, 1, 2], np.float32)
    solver.net.set_input_arrays(data, labels)
    W0, b0 = (p.data.astype(np.float64).copy() for p in solver.net.params["ip"])
    solver.step(2)  # batch 0, then batch 1 with the updated weights
    W, b = W0, b0
    for batch in (0, 1):
        x = data[2 * batch:2 * batch + 2].reshape(2, -1).astype(np.float64)
        y = labels[2 * batch:2 * batch + 2].astype(int)
        z = x @ W.T + b
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        dz = p.copy()
        dz[np.arange(2), y] -= 1
        dz /= 2  # the loss is the batch mean
        W, b = W - 0.1 * dz.T @ x, b - 0.1 * dz.sum(0)
    np.testing.assert_allclose(solver.net.params["ip"][0].data, W, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(solver.net.params["ip"][1].data, b, rtol=1e-5, atol=1e-6)


def test_ps_net_time_refuses_memory_data(ps_net: pathlib.Path, tmp_path: pathlib.Path) -> None:
    model = write(tmp_path, "memory.prototxt", MEMORY + """
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 4 } }
""")
    run = subprocess.run([str(ps_net), "time", "--model", model, "--iterations", "2"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    lines = [l for l in run.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, run.stderr
    assert "memory.prototxt:2: layer 'mem' (MemoryData)" in lines[0]
    assert "set_input_arrays" in lines[0]


# --- Python layers ------------------------------------------------------------------------------


def record_net(folder: pathlib.Path, log: pathlib.Path) -> str:
    return write(folder, "record.prototxt", 'name: "recorded"\nforce_backward: true\n'
                 + input_layer("data", 2, 3)
                 + python_layer("rec", "Record", "data", "out", str(log))
                 + python_layer("power", "PowerScale", "out", "power", "1.5"))


@pytest.mark.parametrize("phase", ["TRAIN", "TEST"])
def test_python_layer_gets_its_attributes(caffe: Any, tmp_path: pathlib.Path,
                                          phase: str) -> None:
    log = tmp_path / "record.json"
    net = caffe.Net(record_net(tmp_path, log), getattr(caffe, phase))
    seen = json.loads(log.read_text())
    assert seen["param_str"] == str(log)
    assert seen["phase"] == getattr(caffe, phase)
    assert (seen["rank"], seen["num_workers"]) == (0, 1)
    assert (seen["type"], seen["name"]) == ("Python", "rec")
    # net.layers hands back the Python object itself.
    layer = net.layer_dict["rec"]
    assert type(layer).__name__ == "Record" and isinstance(layer, caffe.Layer)
    assert layer.phase == getattr(caffe, phase)
    assert list(net.params) == ["power"]  # a parameter added in setup is a net parameter
    np.testing.assert_array_equal(net.params["power"][0].data, np.full(3, 1.5))
    x = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]], np.float32)
    np.testing.assert_allclose(net.forward(data=x)["power"], 1.5 * x ** 2, rtol=1e-6)
    net.backward(power=np.ones((2, 3), np.float32))
    assert json.loads(log.read_text())["forward"] == 1
    assert json.loads(log.read_text())["backward"] == 1


def gradient_net(folder: pathlib.Path) -> str:
    return write(folder, "gradient.prototxt", 'name: "gradient"\nforce_backward: true\n'
                 + input_layer("data", 3, 4) + input_layer("target", 3, 4)
                 + python_layer("power", "PowerScale", "data", "y", "0.8")
                 + 'layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "target" '
                   'top: "loss" }\n')


def test_python_layer_gradient_by_finite_differences(caffe: Any, tmp_path: pathlib.Path) -> None:
    net = caffe.Net(gradient_net(tmp_path), caffe.TRAIN)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1.5, 1.5, (3, 4)).astype(np.float32)
    t = rng.normal(0, 1, (3, 4)).astype(np.float32)
    scale = net.params["power"][0].data
    scale[...] = rng.uniform(0.5, 1.5, 4)

    def loss() -> float:
        return float(net.forward(data=x, target=t)["loss"])

    loss()
    net.clear_param_diffs()
    net.backward()
    analytic_x = net.blobs["data"].diff.copy()
    analytic_s = net.params["power"][0].diff.copy()
    assert np.abs(analytic_x).max() > 1e-3 and np.abs(analytic_s).max() > 1e-3
    eps = 1e-2
    for values, analytic in ((x, analytic_x), (scale, analytic_s)):
        numeric = np.zeros_like(analytic)
        for index in np.ndindex(values.shape):
            keep = values[index]
            values[index] = keep + eps
            up = loss()
            values[index] = keep - eps
            down = loss()
            values[index] = keep
            numeric[index] = (up - down) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=2e-2, atol=2e-3)


def test_solver_trains_a_python_layer_parameter(caffe: Any, tmp_path: pathlib.Path) -> None:
    """One SGD step on PowerScale's own blob, by hand: ip is frozen at weights 1."""
    net = write(tmp_path, "power_train.prototxt", """name: "power_train"
layer { name: "mem" type: "MemoryData" top: "data" top: "label"
  memory_data_param { batch_size: 4 channels: 3 height: 1 width: 1 } }
""" + python_layer("power", "PowerScale", "data", "y", "0.5") + """
layer { name: "sum" type: "InnerProduct" bottom: "y" top: "z"
  param { lr_mult: 0 } param { lr_mult: 0 }
  inner_product_param { num_output: 1 weight_filler { type: "constant" value: 1 } } }
layer { name: "flat" type: "Flatten" bottom: "z" top: "zf" flatten_param { axis: 0 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "zf" bottom: "label" top: "loss" }
""")
    solver = caffe.SGDSolver(write(tmp_path, "solver.prototxt",
                                   f'net: "{net}"\nbase_lr: 0.2\nlr_policy: "fixed"\n'
                                   f'max_iter: 5\ndisplay: 0\nsnapshot_prefix: "{tmp_path}/p"\n'))
    rng = np.random.default_rng(8)
    x = rng.normal(0, 1, (4, 3, 1, 1)).astype(np.float32)
    y = rng.normal(0, 1, 4).astype(np.float32)
    solver.net.set_input_arrays(x, y)
    solver.step(1)
    x2 = x.reshape(4, 3).astype(np.float64) ** 2
    s0 = np.full(3, 0.5)
    residual = x2 @ s0 - y
    grad = (residual[:, None] * x2).sum(0) / 4  # EuclideanLoss: sum of squares / (2 N)
    np.testing.assert_allclose(solver.net.params["power"][0].data.reshape(3), s0 - 0.2 * grad,
                               rtol=1e-5, atol=1e-6)


def fail_net(folder: pathlib.Path, where: str, name: str = "fail.prototxt") -> str:
    return write(folder, name, 'name: "failing"\nforce_backward: true\n'
                 + input_layer("data", 2, 3)
                 + python_layer("ok", "Record", "data", "a", str(folder / f"{where}.json"))
                 + python_layer("trouble", "Fail", "a", "b", where))


@pytest.mark.parametrize("where,kind,error", [
    ("setup", ValueError, "setup raised ValueError: setup refuses"),
    ("reshape", IndexError, "reshape raised IndexError: reshape refuses"),
    ("forward", ZeroDivisionError, "forward raised ZeroDivisionError: forward refuses"),
    ("backward", RuntimeError, "backward raised RuntimeError: backward refuses"),
])
def test_python_layer_exception_names_module_class_and_layer(
        caffe: Any, tmp_path: pathlib.Path, where: str, kind: type, error: str) -> None:
    """As in pycaffe, the layer's own exception comes out of the call (Caffe's
    own test_python_layer expects a RuntimeError raised in setup as such); the
    place is added to it as a note."""
    model = fail_net(tmp_path, where)
    with pytest.raises(kind) as info:
        net = caffe.Net(model, caffe.TRAIN)
        net.forward(data=np.ones((2, 3), np.float32))
        net.backward()
    assert type(info.value) is kind
    assert str(info.value) == f"{where} refuses"
    assert len(info.value.__notes__) == 1
    message = info.value.__notes__[0]
    assert "fail.prototxt:7: layer 'trouble' (Python)" in message
    assert f"python_param module '{MODULE}' layer 'Fail'" in message
    assert error in message
    assert f"{MODULE}.py:" in message and f"in {where})" in message  # where it was raised


def test_python_layer_can_run_again_after_raising(caffe: Any, tmp_path: pathlib.Path) -> None:
    """As in pycaffe, an exception ends that call only: fixed input runs."""
    net = caffe.Net(fail_net(tmp_path, "negative"), caffe.TEST)
    with pytest.raises(ValueError, match="negative input"):
        net.forward(data=-np.ones((2, 3), np.float32))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(net.forward(data=x)["b"], x)


@pytest.mark.parametrize("module,cls,kind,match", [
    ("pstrain_test_broken_layer", "Whatever", ModuleNotFoundError,
     "ModuleNotFoundError: No module named 'pstrain_no_such_dependency_xyz'"),
    ("pstrain_test_no_such_module", "Whatever", ModuleNotFoundError,
     "ModuleNotFoundError: No module named 'pstrain_test_no_such_module'"),
    (MODULE, "NoSuchClass", ValueError, "has no 'NoSuchClass'"),
])
def test_python_layer_module_that_does_not_load(caffe: Any, tmp_path: pathlib.Path, module: str,
                                                cls: str, kind: type, match: str) -> None:
    """An import that fails raises its own ImportError (as pycaffe's), with the
    place as a note; a module without the class is the net's error."""
    model = write(tmp_path, "broken.prototxt", input_layer("data", 2, 3)
                  + python_layer("odd", cls, "data", "out", module=module))
    with pytest.raises(kind) as info:
        caffe.Net(model, caffe.TEST)
    assert type(info.value) is kind
    message = "\n".join([str(info.value)] + getattr(info.value, "__notes__", []))
    assert "broken.prototxt:3: layer 'odd' (Python)" in message
    assert f"python_param module '{module}' layer '{cls}'" in message
    assert match in message


def test_python_layer_under_ps_net_time(ps_net: pathlib.Path, layer_dir: pathlib.Path,
                                        tmp_path: pathlib.Path) -> None:
    """ps-net's embedded interpreter runs the same module: param_str, phase
    TRAIN, rank 0 of 1, one forward and backward per timed iteration."""
    log = tmp_path / "record.json"
    run = subprocess.run([str(ps_net), "time", "--model", record_net(tmp_path, log),
                          "--iterations", "3", "--engine", "fast"],
                         capture_output=True, text=True, timeout=120, env=ps_net_env(layer_dir),
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Python" in run.stdout
    seen = json.loads(log.read_text())
    assert (seen["param_str"], seen["phase"], seen["rank"], seen["num_workers"]) == (
        str(log), 0, 0, 1)
    assert seen["forward"] >= 3 and seen["backward"] >= 3


@pytest.mark.parametrize("where", ["setup", "forward", "backward"])
def test_python_layer_error_under_ps_net_is_one_line(ps_net: pathlib.Path,
                                                     layer_dir: pathlib.Path,
                                                     tmp_path: pathlib.Path, where: str) -> None:
    run = subprocess.run([str(ps_net), "time", "--model", fail_net(tmp_path, where),
                          "--iterations", "2", "--engine", "fast"],
                         capture_output=True, text=True, timeout=120, env=ps_net_env(layer_dir))
    assert run.returncode == 1  # an error, not a signal
    lines = [l for l in run.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("ps-net: ")
    assert "fail.prototxt:7: layer 'trouble' (Python)" in lines[0]
    assert f"python_param module '{MODULE}' layer 'Fail'" in lines[0]
    assert f"{where} raised" in lines[0] and "Traceback" not in run.stderr


def test_python_layer_under_ps_net_train_matches_pstrain_caffe(
        caffe: Any, ps_net: pathlib.Path, layer_dir: pathlib.Path, tmp_path: pathlib.Path,
        fashion_mnist: pathlib.Path) -> None:
    """ps-net train and SGDSolver.step over a net with a learnable Python
    layer, from the same weights: the same bytes, and the layer's blob moved."""
    net = write(tmp_path, "pynet.prototxt", f"""name: "pynet"
layer {{ name: "fmnist" type: "Data" top: "data" top: "label" include {{ phase: TRAIN }}
  transform_param {{ scale: 0.00390625 }}
  data_param {{ source: "{fashion_mnist}/train_lmdb" batch_size: 8 backend: LMDB }} }}
""" + python_layer("power", "PowerScale", "data", "sq", "1.0") + """
layer { name: "ip" type: "InnerProduct" bottom: "sq" top: "ip"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
""")
    (tmp_path / "snap").mkdir()
    solver_path = write(tmp_path, "solver.prototxt",
                        f'net: "{net}"\nbase_lr: 0.05\nmomentum: 0.9\nlr_policy: "fixed"\n'
                        f'max_iter: 3\ndisplay: 1\nrandom_seed: 1\n'
                        f'snapshot_prefix: "{tmp_path}/snap/py"\n')
    weights = str(tmp_path / "start.caffemodel")
    caffe.Net(net, caffe.TRAIN).save(weights)
    run = subprocess.run([str(ps_net), "train", "--solver", solver_path, "--weights", weights,
                          "--engine", "fast"], capture_output=True, text=True, timeout=300,
                         env=ps_net_env(layer_dir))
    assert run.returncode == 0, run.stderr[-3000:]
    names = ["py_iter_3.caffemodel", "py_iter_3.solverstate"]
    cli = {name: (tmp_path / "snap" / name).read_bytes() for name in names}
    for name in names:
        (tmp_path / "snap" / name).unlink()

    solver = caffe.SGDSolver(solver_path)
    solver.net.copy_from(weights)
    solver.step(3)
    solver.snapshot()
    for name in names:
        assert (tmp_path / "snap" / name).read_bytes() == cli[name], name

    from pstrain.caffe.proto import caffe_pb2

    model = caffe_pb2.NetParameter.FromString(cli["py_iter_3.caffemodel"])
    power = next(layer for layer in model.layer if layer.name == "power")
    learned = np.array(power.blobs[0].data)
    assert learned.shape == (784,) and not np.allclose(learned, 1.0)
