"""pstrain.caffe.Net and Blob against numpy: a small multilayer perceptron
(InnerProduct, ReLU, InnerProduct, then Softmax or a weighted EuclideanLoss)
whose outputs and gradients are computed here by hand from the net's own
parameters; pycaffe's constructors, attributes, batching, reshape, weight files
(.caffemodel and HDF5), weight sharing, hooks, and the numpy views of blob
memory (writeable, not copied, alive after the net is gone). Bad input raises
an exception that names the file:line, the blob or the layer.

Needs the compiled extension (pstrain._core) and h5py for save_hdf5/load_hdf5."""
from __future__ import annotations

import gc
import pathlib
import subprocess
import sys
import textwrap
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest

BATCH = 4
SHAPE = (2, 2, 3)  # one sample: channels, height, width
HIDDEN = 5
CLASSES = 3

LAYERS = f"""
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param {{ num_output: {HIDDEN}
    weight_filler {{ type: "gaussian" std: 0.7 }} bias_filler {{ type: "gaussian" std: 0.5 }} }} }}
layer {{ name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param {{ num_output: {CLASSES}
    weight_filler {{ type: "gaussian" std: 0.7 }} bias_filler {{ type: "gaussian" std: 0.5 }} }} }}
"""

# A deploy net: data -> ip1 -> relu1 -> ip2 -> prob. force_backward so the
# gradient reaches the input, as Caffe's own net tests ask for it.
DEPLOY = f"""name: "mlp"
force_backward: true
layer {{ name: "data" type: "Input" top: "data"
  input_param {{ shape {{ dim: {BATCH} dim: 2 dim: 2 dim: 3 }} }} }}
{LAYERS}
layer {{ name: "prob" type: "Softmax" bottom: "ip2" top: "prob" }}
"""

# The same layers trained against a target with a Euclidean loss of weight 2.
TRAIN = f"""name: "mlp_train"
layer {{ name: "data" type: "Input" top: "data"
  input_param {{ shape {{ dim: {BATCH} dim: 2 dim: 2 dim: 3 }} }} }}
layer {{ name: "target" type: "Input" top: "target"
  input_param {{ shape {{ dim: {BATCH} dim: {CLASSES} }} }} }}
{LAYERS}
layer {{ name: "loss" type: "EuclideanLoss" bottom: "ip2" bottom: "target" top: "loss"
  loss_weight: 2 }}
"""

# Caffe's python/caffe/test/test_net.py TestLevels, TestStages and
# TestAllInOne nets (with Input layers for the data).
LEVELS = """
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 10 } } }
layer { name: "NoLevel" type: "InnerProduct" bottom: "data" top: "NoLevel"
        inner_product_param { num_output: 1 } }
layer { name: "Level0Only" type: "InnerProduct" bottom: "data" top: "Level0Only"
        include { min_level: 0 max_level: 0 } inner_product_param { num_output: 1 } }
layer { name: "Level1Only" type: "InnerProduct" bottom: "data" top: "Level1Only"
        include { min_level: 1 max_level: 1 } inner_product_param { num_output: 1 } }
layer { name: "Level>=0" type: "InnerProduct" bottom: "data" top: "Level>=0"
        include { min_level: 0 } inner_product_param { num_output: 1 } }
layer { name: "Level>=1" type: "InnerProduct" bottom: "data" top: "Level>=1"
        include { min_level: 1 } inner_product_param { num_output: 1 } }
"""

STAGES = """
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 10 } } }
layer { name: "A" type: "InnerProduct" bottom: "data" top: "A"
        include { stage: "A" } inner_product_param { num_output: 1 } }
layer { name: "B" type: "InnerProduct" bottom: "data" top: "B"
        include { stage: "B" } inner_product_param { num_output: 1 } }
layer { name: "AorB" type: "InnerProduct" bottom: "data" top: "AorB"
        include { stage: "A" } include { stage: "B" } inner_product_param { num_output: 1 } }
layer { name: "AandB" type: "InnerProduct" bottom: "data" top: "AandB"
        include { stage: "A" stage: "B" } inner_product_param { num_output: 1 } }
"""

# One layer only in the TEST phase: tells which phase a constructor chose.
PHASED = """
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "test_only" type: "ReLU" bottom: "ip" top: "test_relu" include { phase: TEST } }
"""


@pytest.fixture
def caffe() -> Any:
    import pstrain.caffe

    pstrain.caffe.set_mode_cpu()
    pstrain.caffe.set_engine("fast")
    pstrain.caffe.set_random_seed(1234)
    return pstrain.caffe


def write(folder: pathlib.Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def deploy(caffe: Any, tmp_path: pathlib.Path) -> Any:
    return caffe.Net(write(tmp_path, "deploy.prototxt", DEPLOY), caffe.TEST)


def samples(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (n,) + SHAPE).astype(np.float32)


class Mlp:
    """The net's computation in float64 numpy, from a copy of its parameters."""

    def __init__(self, net: Any) -> None:
        self.W1 = net.params["ip1"][0].data.astype(np.float64).copy()
        self.b1 = net.params["ip1"][1].data.astype(np.float64).copy()
        self.W2 = net.params["ip2"][0].data.astype(np.float64).copy()
        self.b2 = net.params["ip2"][1].data.astype(np.float64).copy()

    def hidden(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x.reshape(len(x), -1) @ self.W1.T + self.b1, 0.0)

    def logits(self, x: np.ndarray) -> np.ndarray:
        return self.hidden(x) @ self.W2.T + self.b2

    def prob(self, x: np.ndarray) -> np.ndarray:
        z = self.logits(x)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def backward_from_logits(self, x: np.ndarray, dz: np.ndarray) -> dict:
        """Gradients of the parameters and of the input, given d(loss)/d(logits)."""
        x2 = x.reshape(len(x), -1).astype(np.float64)
        h = self.hidden(x)
        dh = (dz @ self.W2) * (h > 0)
        return {"W2": dz.T @ h, "b2": dz.sum(0), "W1": dh.T @ x2, "b1": dh.sum(0),
                "data": (dh @ self.W1).reshape(x.shape)}

    def backward_from_prob(self, x: np.ndarray, dprob: np.ndarray) -> dict:
        p = self.prob(x)
        dz = p * (dprob - (dprob * p).sum(axis=1, keepdims=True))
        return self.backward_from_logits(x, dz)


def close(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(actual, expected, rtol=2e-5, atol=2e-6)


# --- constructors -----------------------------------------------------------------------------


def saved_weights(caffe: Any, tmp_path: pathlib.Path, text: str) -> tuple[str, str, Any]:
    """A net file and a .caffemodel of fresh random weights; the net that saved it."""
    model = write(tmp_path, "net.prototxt", text)
    net = caffe.Net(model, caffe.TRAIN)
    weights = str(tmp_path / "net.caffemodel")
    net.save(weights)
    return model, weights, net


def assert_same_params(a: Any, b: Any) -> None:
    assert list(a.params) == list(b.params)
    for name in a.params:
        for pa, pb in zip(a.params[name], b.params[name]):
            np.testing.assert_array_equal(pa.data, pb.data)


def test_constructor_forms_choose_phase_and_weights(caffe: Any, tmp_path: pathlib.Path) -> None:
    model, weights, source = saved_weights(caffe, tmp_path, PHASED)
    caffe.set_random_seed(999)  # fresh nets would get other weights
    fresh = caffe.Net(model, caffe.TEST)
    assert not np.array_equal(fresh.params["ip"][0].data, source.params["ip"][0].data)

    train = caffe.Net(model, caffe.TRAIN)
    assert "test_relu" not in train.blobs
    named = caffe.Net(model, caffe.TEST, weights=weights)
    legacy = caffe.Net(model, weights, caffe.TRAIN)
    blog = caffe.Net(model, weights)
    assert "test_relu" in named.blobs
    assert "test_relu" not in legacy.blobs
    assert "test_relu" in blog.blobs  # the blog form is the TEST phase
    for net in (named, legacy, blog):
        assert_same_params(net, source)
    # Keywords as pycaffe names them.
    keywords = caffe.Net(network_file=model, phase=caffe.TRAIN, weights=weights)
    assert_same_params(keywords, source)
    assert caffe.TRAIN == 0 and caffe.TEST == 1


def non_data_blobs(net: Any) -> list[str]:
    return [b for b in net.blobs.keys() if "data" not in b]


def test_levels_and_stages_select_layers_as_caffe(caffe: Any, tmp_path: pathlib.Path) -> None:
    levels = write(tmp_path, "levels.prototxt", LEVELS)
    assert non_data_blobs(caffe.Net(levels, caffe.TEST)) == ["NoLevel", "Level0Only", "Level>=0"]
    assert non_data_blobs(caffe.Net(levels, caffe.TEST, level=1)) == [
        "NoLevel", "Level1Only", "Level>=0", "Level>=1"]
    stages = write(tmp_path, "stages.prototxt", STAGES)
    assert non_data_blobs(caffe.Net(stages, caffe.TEST, stages=["A"])) == ["A", "AorB"]
    assert non_data_blobs(caffe.Net(stages, caffe.TEST, stages=["B"])) == ["B", "AorB"]
    assert non_data_blobs(caffe.Net(stages, caffe.TEST, stages=["A", "B"])) == [
        "A", "B", "AorB", "AandB"]


# --- attributes -------------------------------------------------------------------------------


def test_attributes_name_blobs_layers_and_losses(caffe: Any, tmp_path: pathlib.Path) -> None:
    net = caffe.Net(write(tmp_path, "train.prototxt", TRAIN), caffe.TRAIN)
    assert net._layer_names == ["data", "target", "ip1", "relu1", "ip2", "loss"]
    assert list(net.blobs) == ["data", "target", "ip1", "ip2", "loss"]
    assert isinstance(net.blobs, OrderedDict)
    assert net.inputs == ["data", "target"]
    assert net.outputs == ["loss"]
    assert net.top_names == OrderedDict([
        ("data", ["data"]), ("target", ["target"]), ("ip1", ["ip1"]), ("relu1", ["ip1"]),
        ("ip2", ["ip2"]), ("loss", ["loss"])])
    assert net.bottom_names == OrderedDict([
        ("data", []), ("target", []), ("ip1", ["data"]), ("relu1", ["ip1"]), ("ip2", ["ip1"]),
        ("loss", ["ip2", "target"])])
    assert net.blob_loss_weights == OrderedDict([
        ("data", 0.0), ("target", 0.0), ("ip1", 0.0), ("ip2", 0.0), ("loss", 2.0)])
    assert list(net.params) == ["ip1", "ip2"]
    assert [tuple(p.shape) for p in net.params["ip1"]] == [(HIDDEN, 12), (HIDDEN,)]
    assert [tuple(p.shape) for p in net.params["ip2"]] == [(CLASSES, HIDDEN), (CLASSES,)]
    assert list(net.layer_dict) == net._layer_names
    assert [layer.type for layer in net.layers] == [
        "Input", "Input", "InnerProduct", "ReLU", "InnerProduct", "EuclideanLoss"]
    for name, layer in net.layer_dict.items():
        assert layer.type == net.layers[net._layer_names.index(name)].type
    assert len(net.layer_dict["ip2"].blobs) == 2 and len(net.layer_dict["relu1"].blobs) == 0
    # A layer's blobs are the params' blobs: the same memory.
    assert np.shares_memory(net.layer_dict["ip1"].blobs[0].data, net.params["ip1"][0].data)


def test_split_layers_appear_as_in_caffe(caffe: Any, tmp_path: pathlib.Path) -> None:
    """A blob read by two layers gets Caffe's split layer and its names."""
    text = TRAIN + 'layer { name: "prob" type: "Softmax" bottom: "ip2" top: "prob" }\n'
    net = caffe.Net(write(tmp_path, "split.prototxt", text), caffe.TRAIN)
    assert "ip2_ip2_0_split" in net._layer_names
    assert net.top_names["ip2_ip2_0_split"] == ["ip2_ip2_0_split_0", "ip2_ip2_0_split_1"]
    assert sorted(net.outputs) == ["loss", "prob"]


# --- forward and backward against numpy -------------------------------------------------------


def test_forward_matches_numpy(deploy: Any) -> None:
    x = samples(BATCH, 1)
    out = deploy.forward(data=x)
    assert list(out) == ["prob"]
    assert out["prob"].dtype == np.float32 and out["prob"].shape == (BATCH, CLASSES)
    close(out["prob"], Mlp(deploy).prob(x))
    # The data written by forward(**kwargs) is in the input blob.
    np.testing.assert_array_equal(deploy.blobs["data"].data, x)


def test_forward_returns_asked_blobs(deploy: Any) -> None:
    x = samples(BATCH, 2)
    out = deploy.forward(blobs=["ip1"], data=x)
    assert set(out) == {"prob", "ip1"}
    close(out["ip1"], Mlp(deploy).hidden(x))  # after the in-place ReLU


def test_forward_without_kwargs_reads_the_blobs(deploy: Any) -> None:
    x = samples(BATCH, 3)
    deploy.blobs["data"].data[...] = x
    close(deploy.forward()["prob"], Mlp(deploy).prob(x))


def test_forward_start_end_runs_only_those_layers(deploy: Any) -> None:
    mlp = Mlp(deploy)
    h = np.random.default_rng(4).normal(0, 1, (BATCH, HIDDEN)).astype(np.float32)
    deploy.blobs["ip1"].data[...] = h
    out = deploy.forward(start="ip2", end="ip2")
    assert list(out) == ["ip2"]
    # relu1 did not run: the negative values of h went through.
    close(out["ip2"], h @ mlp.W2.T + mlp.b2)
    np.testing.assert_array_equal(deploy.blobs["ip1"].data, h)
    deploy.blobs["ip1"].data[...] = h
    out = deploy.forward(start="relu1")
    z = np.maximum(h, 0) @ mlp.W2.T + mlp.b2
    e = np.exp(z - z.max(1, keepdims=True))
    close(out["prob"], e / e.sum(1, keepdims=True))
    # end= alone: forward stops after that layer and returns its tops.
    x = samples(BATCH, 5)
    out = deploy.forward(end="relu1", data=x)
    assert list(out) == ["ip1"]
    close(out["ip1"], mlp.hidden(x))


def test_backward_matches_numpy(deploy: Any) -> None:
    x = samples(BATCH, 6)
    dprob = np.random.default_rng(7).normal(0, 1, (BATCH, CLASSES)).astype(np.float32)
    deploy.forward(data=x)
    deploy.clear_param_diffs()
    grads = deploy.backward(prob=dprob)
    assert list(grads) == ["data"]
    expected = Mlp(deploy).backward_from_prob(x, dprob.astype(np.float64))
    close(grads["data"], expected["data"])
    close(deploy.params["ip1"][0].diff, expected["W1"])
    close(deploy.params["ip1"][1].diff, expected["b1"])
    close(deploy.params["ip2"][0].diff, expected["W2"])
    close(deploy.params["ip2"][1].diff, expected["b2"])
    np.testing.assert_array_equal(deploy.blobs["prob"].diff, dprob)


def test_backward_start_end_and_asked_diffs(deploy: Any) -> None:
    mlp = Mlp(deploy)
    deploy.forward(data=samples(BATCH, 8))
    g = np.random.default_rng(9).normal(0, 1, (BATCH, CLASSES)).astype(np.float32)
    deploy.blobs["ip2"].diff[...] = g
    grads = deploy.backward(start="ip2", end="ip2", diffs=["ip2"])
    assert set(grads) == {"ip1", "ip2"}
    close(grads["ip1"], g @ mlp.W2)
    np.testing.assert_array_equal(grads["ip2"], g)


def test_loss_and_its_gradient_match_numpy(caffe: Any, tmp_path: pathlib.Path) -> None:
    net = caffe.Net(write(tmp_path, "train.prototxt", TRAIN), caffe.TRAIN)
    mlp = Mlp(net)
    x = samples(BATCH, 10)
    t = np.random.default_rng(11).normal(0, 1, (BATCH, CLASSES)).astype(np.float32)
    out = net.forward(data=x, target=t)
    z = mlp.logits(x)
    # Caffe's EuclideanLoss: sum of squares / (2 N); the blob holds it unweighted.
    close(out["loss"], ((z - t) ** 2).sum() / (2 * BATCH))
    net.clear_param_diffs()
    net.backward()
    expected = mlp.backward_from_logits(x, 2.0 * (z - t) / BATCH)  # loss_weight 2
    close(net.params["ip1"][0].diff, expected["W1"])
    close(net.params["ip2"][0].diff, expected["W2"])
    close(net.params["ip2"][1].diff, expected["b2"])
    # Parameter diffs accumulate over backward passes, until cleared.
    net.backward()
    close(net.params["ip2"][0].diff, 2 * expected["W2"])
    net.clear_param_diffs()
    for blobs in net.params.values():
        for p in blobs:
            assert not p.diff.any()


# --- batching ---------------------------------------------------------------------------------


def test_forward_all_pads_the_last_batch(deploy: Any) -> None:
    x = samples(10, 12)  # 2 full batches of 4 and 2 rows padded with zeros
    out = deploy.forward_all(data=x, blobs=["ip1"])
    assert set(out) == {"prob", "ip1"}
    assert out["prob"].shape == (10, CLASSES)
    mlp = Mlp(deploy)
    close(out["prob"], mlp.prob(x))
    close(out["ip1"], mlp.hidden(x))


def test_forward_backward_all_pads_both_ways(deploy: Any) -> None:
    x = samples(6, 13)
    dprob = np.random.default_rng(14).normal(0, 1, (6, CLASSES)).astype(np.float32)
    outs, diffs = deploy.forward_backward_all(data=x, prob=dprob)
    mlp = Mlp(deploy)
    assert outs["prob"].shape == (6, CLASSES) and diffs["data"].shape == (6,) + SHAPE
    close(outs["prob"], mlp.prob(x))
    # Each row's input gradient depends on its own row only.
    close(diffs["data"], mlp.backward_from_prob(x, dprob.astype(np.float64))["data"])


# --- reshape ----------------------------------------------------------------------------------


@pytest.mark.parametrize("explicit", [True, False], ids=["net.reshape", "forward-reshapes"])
def test_input_reshape_then_forward(deploy: Any, explicit: bool) -> None:
    deploy.blobs["data"].reshape(7, *SHAPE)
    if explicit:
        deploy.reshape()
        assert deploy.blobs["prob"].shape == [7, CLASSES]
    x = samples(7, 15)
    out = deploy.forward(data=x)
    assert out["prob"].shape == (7, CLASSES)
    close(out["prob"], Mlp(deploy).prob(x))
    # And back to a smaller batch.
    deploy.blobs["data"].reshape(2, *SHAPE)
    close(deploy.forward(data=x[:2])["prob"], Mlp(deploy).prob(x[:2]))


# --- weights: files, HDF5, sharing ------------------------------------------------------------


def test_save_and_copy_from_round_trip(caffe: Any, tmp_path: pathlib.Path) -> None:
    model, weights, source = saved_weights(caffe, tmp_path, DEPLOY)
    caffe.set_random_seed(77)
    other = caffe.Net(model, caffe.TEST)
    assert not np.array_equal(other.params["ip1"][0].data, source.params["ip1"][0].data)
    other.copy_from(weights)
    assert_same_params(other, source)
    x = samples(BATCH, 16)
    close(other.forward(data=x)["prob"], Mlp(source).prob(x))


def test_copy_from_matches_layers_by_name(caffe: Any, tmp_path: pathlib.Path) -> None:
    """A layer absent from the weights keeps its own values, as in Caffe."""
    model, weights, source = saved_weights(caffe, tmp_path, DEPLOY)
    renamed = write(tmp_path, "renamed.prototxt", DEPLOY.replace('"ip2"', '"fc_new"'))
    caffe.set_random_seed(78)
    net = caffe.Net(renamed, caffe.TEST)
    own = net.params["fc_new"][0].data.copy()
    net.copy_from(weights)
    np.testing.assert_array_equal(net.params["ip1"][0].data, source.params["ip1"][0].data)
    np.testing.assert_array_equal(net.params["fc_new"][0].data, own)


def test_save_hdf5_layout_and_load(caffe: Any, tmp_path: pathlib.Path) -> None:
    h5py = pytest.importorskip("h5py")
    model, _, source = saved_weights(caffe, tmp_path, DEPLOY)
    path = str(tmp_path / "net.h5")
    source.save_hdf5(path)
    with h5py.File(path, "r") as f:  # Caffe's Net::ToHDF5 layout, read without pstrain
        assert sorted(f["data"].keys()) == ["ip1", "ip2"]
        np.testing.assert_array_equal(f["data/ip1/0"][()], source.params["ip1"][0].data)
        np.testing.assert_array_equal(f["data/ip2/1"][()], source.params["ip2"][1].data)
    caffe.set_random_seed(79)
    other = caffe.Net(model, caffe.TEST)
    assert not np.array_equal(other.params["ip2"][0].data, source.params["ip2"][0].data)
    other.load_hdf5(path)
    assert_same_params(other, source)


def test_share_with_uses_the_same_memory(caffe: Any, tmp_path: pathlib.Path) -> None:
    model, _, source = saved_weights(caffe, tmp_path, DEPLOY)
    caffe.set_random_seed(80)
    other = caffe.Net(model, caffe.TEST)
    other.share_with(source)
    for name in source.params:
        for a, b in zip(source.params[name], other.params[name]):
            assert np.shares_memory(a.data, b.data)
    source.params["ip2"][1].data[...] = [1.0, -2.0, 3.0]
    x = samples(BATCH, 17)
    close(other.forward(data=x)["prob"], Mlp(source).prob(x))


# --- hooks ------------------------------------------------------------------------------------


def test_hooks_run_around_each_layer_in_order(caffe: Any, tmp_path: pathlib.Path) -> None:
    net = caffe.Net(write(tmp_path, "train.prototxt", TRAIN), caffe.TRAIN)
    calls: list[tuple[str, int]] = []
    net.before_forward(lambda i: calls.append(("before_forward", i)))
    net.after_forward(lambda i: calls.append(("after_forward", i)))
    net.before_backward(lambda i: calls.append(("before_backward", i)))
    net.after_backward(lambda i: calls.append(("after_backward", i)))
    n = len(net.layers)
    net.forward()
    assert calls == [(w, i) for i in range(n) for w in ("before_forward", "after_forward")]
    calls.clear()
    net.backward()
    assert calls == [(w, i) for i in reversed(range(n))
                     for w in ("before_backward", "after_backward")]
    calls.clear()
    net.forward(start="ip2")
    assert [i for w, i in calls if w == "before_forward"] == [4, 5]


def test_hook_sees_the_layer_output(deploy: Any) -> None:
    """after_forward(i) runs once layer i's top is computed, before layer i+1."""
    seen = {}
    ip1 = deploy._layer_names.index("ip1")
    view = deploy.blobs["ip1"].data  # a hook that held the net would keep it alive for good
    deploy.after_forward(lambda i: seen.setdefault(i, view.copy()))
    x = samples(BATCH, 18)
    deploy.forward(data=x)
    mlp = Mlp(deploy)
    pre_relu = x.reshape(BATCH, -1) @ mlp.W1.T + mlp.b1
    assert (pre_relu < 0).any() and (pre_relu > 0).any()  # the ReLU has work to do
    close(seen[ip1], pre_relu)  # before relu1 ran in place
    close(seen[ip1 + 1], np.maximum(pre_relu, 0))


def test_hook_exception_reaches_the_caller(deploy: Any) -> None:
    def hook(i: int) -> None:
        if i == 2:
            raise RuntimeError("hook says no at layer 2")

    deploy.before_forward(hook)
    with pytest.raises(RuntimeError, match="hook says no at layer 2"):
        deploy.forward()
    with pytest.raises(TypeError):
        deploy.before_forward(42)


# --- blob views -------------------------------------------------------------------------------


def test_blob_views_are_writeable_float32_without_copy(deploy: Any) -> None:
    blob = deploy.params["ip1"][0]
    for attribute in ("data", "diff"):
        a, b = getattr(blob, attribute), getattr(blob, attribute)
        assert a.dtype == np.float32 and a.flags.writeable and a.flags.c_contiguous
        assert np.shares_memory(a, b)
        a[0, 0] = 123.5
        assert b[0, 0] == 123.5
    assert not np.shares_memory(blob.data, blob.diff)


def test_write_through_a_view_is_seen_by_the_next_forward(deploy: Any) -> None:
    W1 = deploy.params["ip1"][0].data  # a view kept from before
    x = samples(BATCH, 19)
    first = deploy.forward(data=x)["prob"].copy()
    W1[...] = np.random.default_rng(20).normal(0, 1, W1.shape)
    second = deploy.forward(data=x)["prob"]
    assert not np.allclose(first, second)
    close(second, Mlp(deploy).prob(x))  # Mlp reads the new W1 back through a fresh view
    # Writing into the input blob's view and running forward() without arguments.
    data = deploy.blobs["data"].data
    data[...] = samples(BATCH, 21)
    close(deploy.forward()["prob"], Mlp(deploy).prob(samples(BATCH, 21)))


def test_view_outlives_the_net(caffe: Any, tmp_path: pathlib.Path) -> None:
    model = write(tmp_path, "deploy.prototxt", DEPLOY)
    net = caffe.Net(model, caffe.TEST)
    x = samples(BATCH, 22)
    prob = net.forward(data=x)["prob"]
    W1, dW1 = net.params["ip1"][0].data, net.params["ip1"][0].diff
    expected_prob, expected_W1 = prob.copy(), W1.copy()
    gc.collect()
    assert sys.getrefcount(net) == 2  # nothing but `net` holds it: the views do not
    del net
    gc.collect()
    junk = [caffe.Net(model, caffe.TEST) for _ in range(3)]  # reuse the freed memory
    junk += [np.full((BATCH, 64), 7.0, np.float32) for _ in range(200)]
    np.testing.assert_array_equal(prob, expected_prob)
    np.testing.assert_array_equal(W1, expected_W1)
    assert not dW1.any()
    W1[...] = 1.0  # still writeable, into memory no net uses any more
    del junk
    # A Blob handle, unlike a view, keeps its net.
    net = caffe.Net(model, caffe.TEST)
    net.forward(data=x)
    blobs = list(net.blobs.values())
    del net
    gc.collect()
    np.testing.assert_array_equal(blobs[0].data, x)


def test_blob_shape_counts_and_reshape(deploy: Any) -> None:
    blob = deploy.blobs["data"]
    assert list(blob.shape) == [BATCH, 2, 2, 3]
    assert (blob.num, blob.channels, blob.height, blob.width, blob.count) == (BATCH, 2, 2, 3, 48)
    prob = deploy.blobs["prob"]  # 2 axes: height and width read 1, as Caffe's legacy shape
    assert (prob.num, prob.channels, prob.height, prob.width, prob.count) == (BATCH, 3, 1, 1, 12)
    blob.reshape(3, 5)
    assert list(blob.shape) == [3, 5] and blob.count == 15 and blob.data.shape == (3, 5)
    blob.reshape((1, 2, 3, 4, 5))
    assert list(blob.shape) == [1, 2, 3, 4, 5] and blob.diff.shape == (1, 2, 3, 4, 5)
    with pytest.raises(ValueError, match="out of range"):
        blob.reshape(-1, 3)


# --- bad input --------------------------------------------------------------------------------


def test_missing_prototxt_names_the_file(caffe: Any, tmp_path: pathlib.Path) -> None:
    missing = str(tmp_path / "nowhere.prototxt")
    with pytest.raises(FileNotFoundError, match="nowhere.prototxt"):
        caffe.Net(missing, caffe.TEST)


def test_malformed_prototxt_names_file_and_line(caffe: Any, tmp_path: pathlib.Path) -> None:
    bad = write(tmp_path, "bad.prototxt",
                'name: "x"\nlayer { name: "data" type: "Input" top: "data"\n'
                '  input_param { shape { dim: 2 dim: oops } } }\n')
    with pytest.raises(Exception, match=r"bad\.prototxt:3"):
        caffe.Net(bad, caffe.TEST)
    unknown = write(tmp_path, "unknown.prototxt",
                    DEPLOY.replace('type: "ReLU"', 'type: "NoSuchLayer"'))
    line = DEPLOY.splitlines().index(
        next(l for l in DEPLOY.splitlines() if 'type: "ReLU"' in l)) + 1
    with pytest.raises(Exception, match=rf"unknown\.prototxt:{line}.*NoSuchLayer"):
        caffe.Net(unknown, caffe.TEST)


def test_missing_and_malformed_caffemodel(caffe: Any, tmp_path: pathlib.Path) -> None:
    model = write(tmp_path, "deploy.prototxt", DEPLOY)
    with pytest.raises(FileNotFoundError, match="absent.caffemodel"):
        caffe.Net(model, caffe.TEST, weights=str(tmp_path / "absent.caffemodel"))
    garbage = tmp_path / "garbage.caffemodel"
    garbage.write_bytes(b"\xff\xfe not a protobuf \x00\x01" * 10)
    with pytest.raises(Exception, match="garbage.caffemodel"):
        caffe.Net(model, str(garbage), caffe.TEST)
    net = caffe.Net(model, caffe.TEST)
    with pytest.raises(Exception, match="garbage.caffemodel"):
        net.copy_from(str(garbage))
    # Right file, wrong shapes: names the layer.
    (tmp_path / "wider").mkdir()
    _, weights, _ = saved_weights(caffe, tmp_path / "wider", DEPLOY.replace(
        f"num_output: {HIDDEN}", "num_output: 6"))
    before = {name: [p.data.copy() for p in blobs] for name, blobs in net.params.items()}
    with pytest.raises(Exception, match="ip1"):
        net.copy_from(weights)
    for name, blobs in net.params.items():  # a refused file changes no weight
        for p, old in zip(blobs, before[name]):
            np.testing.assert_array_equal(p.data, old)


def test_unknown_names_raise_key_error(deploy: Any) -> None:
    with pytest.raises(KeyError):
        deploy.blobs["nope"]
    with pytest.raises(KeyError, match="nope"):
        deploy.forward(blobs=["nope"])
    with pytest.raises(KeyError, match="nope"):
        deploy.forward(start="nope")
    with pytest.raises(KeyError, match="nope"):
        deploy.backward(end="nope")
    with pytest.raises(KeyError, match="nope"):
        deploy.backward(diffs=["nope"])
    with pytest.raises(KeyError):
        deploy.params["relu1"]  # no parameters


def test_wrong_inputs_name_the_blob(deploy: Any) -> None:
    with pytest.raises(ValueError, match="'data'"):
        deploy.forward(data=np.zeros((BATCH, 2, 2, 4), np.float32))
    with pytest.raises(Exception, match="batch"):
        deploy.forward(data=np.zeros((BATCH + 1,) + SHAPE, np.float32))
    with pytest.raises(Exception, match="data"):
        deploy.forward(image=np.zeros((BATCH,) + SHAPE, np.float32))
    with pytest.raises(ValueError, match="'data'"):
        deploy.forward(data=np.full((BATCH,) + SHAPE, "x"))
    with pytest.raises(ValueError, match="'prob'"):
        deploy.backward(prob=np.zeros((BATCH, CLASSES + 1), np.float32))
    # The net still works after each refusal.
    x = samples(BATCH, 23)
    close(deploy.forward(data=x)["prob"], Mlp(deploy).prob(x))


BAD_INPUT_SCRIPT = r"""
import sys
import numpy as np
import pstrain.caffe as caffe
caffe.set_engine("fast")
folder, model = sys.argv[1], sys.argv[2]
attempts = [
    lambda: caffe.Net(folder + "/missing.prototxt", caffe.TEST),
    lambda: caffe.Net(model, 7),
    lambda: caffe.Net(model, caffe.TEST, weights=folder + "/missing.caffemodel"),
    lambda: caffe.Net(model, caffe.TEST).forward(start="prob", end="nope"),
    lambda: caffe.Net(model, caffe.TEST)._forward(0, 99),
    lambda: caffe.Net(model, caffe.TEST)._backward(-1, 0),
    lambda: caffe.Net(model, caffe.TEST).forward(data=np.zeros((1, 1), np.float32)),
    lambda: caffe.Net(model, caffe.TEST).blobs["data"].reshape(1 << 40),
    lambda: caffe.Net(model, caffe.TEST).set_input_arrays(np.zeros((4, 2, 2, 3), np.float32),
                                                          np.zeros(4, np.float32)),
]
for attempt in attempts:
    try:
        attempt()
    except Exception as e:
        print(type(e).__name__, str(e).splitlines()[0][:200])
    else:
        print("no exception")
print("ALIVE")
"""


def test_bad_input_never_aborts_the_interpreter(caffe: Any, tmp_path: pathlib.Path) -> None:
    model = write(tmp_path, "deploy.prototxt", DEPLOY)
    run = subprocess.run([sys.executable, "-c", BAD_INPUT_SCRIPT, str(tmp_path), model],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == "ALIVE"
    assert "no exception" not in lines, run.stdout
    assert "Check failed" not in run.stdout + run.stderr
    assert lines[0].startswith("FileNotFoundError") and "missing.prototxt" in lines[0]
    assert "phase" in lines[1]
    assert "missing.caffemodel" in lines[2]
    assert lines[3].startswith("KeyError") and "nope" in lines[3]
    assert lines[4].startswith("IndexError") and lines[5].startswith("IndexError")
    assert "'data'" in lines[6]
    assert "MemoryData" in lines[8]


def test_doc_example_of_the_blog_workflow(caffe: Any, tmp_path: pathlib.Path) -> None:
    """Issue 25's blog lines, one changed import: load, fill a blob, forward."""
    model, weights, source = saved_weights(caffe, tmp_path, DEPLOY)
    script = textwrap.dedent(f"""
        import numpy as np
        import pstrain.caffe as caffe
        caffe.set_mode_cpu()
        caffe.set_engine('fast')
        net = caffe.Net({model!r}, {weights!r})
        batch = np.load({str(tmp_path / 'x.npy')!r})
        net.blobs['data'].data[...] = batch
        prob = net.forward()['prob']
        np.save({str(tmp_path / 'prob.npy')!r}, prob)
    """)
    x = samples(BATCH, 24)
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    close(np.load(tmp_path / "prob.npy"), Mlp(source).prob(x))
