"""Python asks the engine (python/pstrain/engine.py over pstrain._core): the cost
model's parameters and shapes equal the engine's own net (pstrain.caffe's Net,
built in full) for LeNet, CIFAR-10 quick and ResNet-50; the shapes come without
allocating activations (ResNet-50 at batch 256); the placement is the servers';
the solver type and lr policy names are the engine's."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from pstrain import costmodel, engine, solver
from pstrain._native import core

ROOT = pathlib.Path(__file__).resolve().parents[2]
NETS = ROOT / "configs" / "nets"
DEPLOY = {"lenet": NETS / "lenet_deploy.prototxt",
          "cifar10_quick": NETS / "cifar10_quick_deploy.prototxt",
          "resnet50": NETS / "resnet50_deploy.prototxt"}


@pytest.fixture(scope="module")
def caffe():
    import pstrain.caffe as caffe
    caffe.set_mode_cpu()
    return caffe


@pytest.mark.parametrize("net", sorted(DEPLOY))
def test_shapes_and_parameters_equal_the_engines_net(net, caffe):
    path = DEPLOY[net]
    shapes = engine.net_shapes(path)
    full = caffe.Net(str(path), caffe.TEST)
    # every blob's shape, as the engine's own net (allocated, run once) has it
    tops = {name: tuple(shape) for layer in shapes["layers"]
            for name, shape in zip(layer["tops"], layer["top_shapes"])}
    assert tops == {name: tuple(blob.shape) for name, blob in full.blobs.items()}
    # every learnable blob, layer by layer
    mine = {}
    for layer in shapes["layers"]:
        if layer["param_shapes"]:
            mine[layer["name"]] = [tuple(s) for s in layer["param_shapes"]]
    assert mine == {name: [tuple(b.data.shape) for b in blobs]
                    for name, blobs in full.params.items()}
    # the cost model's parameters: the learnable ones the servers hold, in the engine's order
    params = costmodel.net_params(path)
    held = [p for p in shapes["params"] if p["lr_mult"] != 0 and p["learns"]]
    assert [(p.layer, p.values) for p in params] == [(p["layer"], p["count"]) for p in held]
    assert all(p.values == int(__import__("math").prod(q["shape"]))
               for p, q in zip(params, held))


def test_published_parameter_totals():
    """Counted by hand: LeNet 20·25+20 + 50·20·25+50 + 500·800+500 + 10·500+10;
    CIFAR-10 quick 3·32·25+32 + 32·32·25+32 + 32·64·25+64 + 64·1024+64 + 64·10+10;
    ResNet-50 25 557 032 (He et al.'s count: convolutions without bias, BatchNorm's
    scale and shift as Scale layers, fc1000; BatchNorm's statistics stay local)."""
    totals = {net: sum(p.values for p in costmodel.net_params(path))
              for net, path in DEPLOY.items()}
    assert totals == {"lenet": 431080, "cifar10_quick": 145578, "resnet50": 25557032}
    resnet = costmodel.net_params(DEPLOY["resnet50"])
    assert not any(p.layer.startswith("bn") for p in resnet)
    names = {p.name: p.values for p in resnet}
    assert names["fc1000/weight"] == 1000 * 2048 and names["fc1000/bias"] == 1000
    assert names["scale_conv1/weight"] == 64 and names["scale_conv1/bias"] == 64


def test_a_train_net_reads_one_record_for_its_shapes(fashion_mnist):
    shapes = engine.net_shapes(NETS / "lenet_train_test.prototxt", "TRAIN")
    data = next(l for l in shapes["layers"] if l["name"] == "fmnist")
    assert data["type"] == "Input" and data["top_shapes"] == [[64, 1, 28, 28], [64]]
    assert shapes["layers"][-1]["top_shapes"] == [[]]          # the loss
    test = engine.net_shapes(NETS / "lenet_train_test.prototxt", "TEST")
    assert [l["name"] for l in test["layers"] if l["type"] == "Accuracy"] == ["accuracy"]


def test_resnet50_at_batch_256_allocates_no_activations(tmp_path):
    """Its activations would take tens of GB; the weights take about 100 MB."""
    text = DEPLOY["resnet50"].read_text().replace("dim: 10 ", "dim: 256 ", 1)
    net = tmp_path / "resnet50_256.prototxt"
    net.write_text(text)
    probe = ("import json, resource, sys\n"
             "from pstrain import engine\n"
             "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "s = engine.net_shapes(sys.argv[1])\n"
             "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "values = sum(__import__('math').prod(t) for l in s['layers'] "
             "for t in l['top_shapes'])\n"
             "print(json.dumps({'grew_kb': after - before, 'top_values': values, "
             "'data': s['layers'][0]['top_shapes'][0], 'prob': s['layers'][-1]['top_shapes']}))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(net)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert r["data"] == [256, 3, 224, 224] and r["prob"] == [[256, 1000]]
    assert r["top_values"] * 4 > 20e9                  # what allocating the tops would take
    assert r["grew_kb"] < 600 * 1024, r                # weights (102 MB) and their fill


def test_a_bad_net_is_named_with_file_and_line(tmp_path):
    net = tmp_path / "bad.prototxt"
    net.write_text('layer { name: "data" type: "Input" top: "data"\n'
                   '  input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }\n'
                   'layer { name: "conv" type: "Convolution" bottom: "nope" top: "c"\n'
                   '  convolution_param { num_output: 2 kernel_size: 3 } }\n')
    with pytest.raises(costmodel.CostModelError) as e:
        costmodel.net_params(net)
    assert str(e.value).startswith(f"{net}:3: layer 'conv' (Convolution): "), str(e.value)
    assert "'nope'" in str(e.value)


def test_placement_is_the_servers_and_balanced_within_a_chunk():
    sizes = [p.values for p in costmodel.net_params(DEPLOY["resnet50"])]
    for servers, chunk in ((1, 1 << 20), (3, 1 << 20), (4, 1 << 18)):
        chunks = costmodel.place(sizes, servers, chunk)
        assert [(c.param, c.values, c.shard) for c in chunks] == [
            (param, length, shard)
            for _, param, _, length, shard in core().key_placement(sizes, servers, chunk)]
        assert sum(c.values for c in chunks) == sum(sizes)
        load = [sum(c.values for c in chunks if c.shard == k) for k in range(servers)]
        assert max(load) - min(load) <= chunk // 4
    with pytest.raises(costmodel.CostModelError, match="key placement: .*chunk"):
        costmodel.place([10], 2, 2)


def test_solver_names_are_the_engines(caffe):
    types = engine.solver_types()
    assert types == ("SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam")
    assert engine.lr_policies() == ("fixed", "step", "exp", "inv", "multistep", "poly",
                                    "sigmoid")
    assert all(hasattr(caffe, f"{t}Solver") for t in types)     # pycaffe's classes
    assert solver.check_override("type", "Adamax") == (
        "must be one of SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam, got 'Adamax'")
    assert solver.check_override("type", "RMSProp") is None
    # Caffe's legacy enum: the same solvers, upper-cased, as caffe.proto numbers them
    from google.protobuf import descriptor_pb2
    proto = descriptor_pb2.FileDescriptorProto.FromString(core().caffe_proto_descriptor())
    solver_param = next(m for m in proto.message_type if m.name == "SolverParameter")
    enum = next(e for e in solver_param.enum_type if e.name == "SolverType")
    assert solver.ENGINE_NAMES["solver_type"]() == tuple(v.name for v in enum.value)
    assert solver.check_override("solver_type", "ADAM") is None
    assert "Convolution" in engine.layer_types() and "Frobnicate" not in engine.layer_types()
