"""pstrain.caffe.draw: the pydot graph of a small net node by node and edge by edge,
labels, phase filtering, and rendering through Graphviz's dot."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest
from google.protobuf import text_format

from pstrain.caffe import draw
from pstrain.caffe.proto import caffe_pb2

ROOT = pathlib.Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

TINY_NET = """
name: "TinyNet"
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
        data_param { source: "train_lmdb" batch_size: 8 } }
layer { name: "input" type: "Input" top: "data" top: "label" include { phase: TEST }
        input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } shape { dim: 1 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        param { lr_mult: 1 } param { lr_mult: 2 }
        convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
        inner_product_param { num_output: 10 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss"
        exclude { phase: TEST } }
"""

# Layer node names are their quoted labels; "\\n" is Graphviz's line break.
DATA = '"data\\n(Data)"'
INPUT = '"input\\n(Input)"'
CONV = '"conv1\\n(Convolution)\\nkernel size: 3\\nstride: 2\\npad: 1"'
RELU = '"relu1\\n(ReLU)"'
POOL = '"pool1\\n(Pooling AVE)\\nkernel size: 2\\nstride: 2\\npad: 0"'
IP = '"ip1\\n(InnerProduct)"'
LOSS = '"loss\\n(SoftmaxWithLoss)"'


def parse_net(text: str) -> caffe_pb2.NetParameter:
    return text_format.Parse(text, caffe_pb2.NetParameter())


def tiny_net() -> caffe_pb2.NetParameter:
    return parse_net(TINY_NET)


def attribute(node, name: str) -> str | None:
    value = node.get_attributes().get(name)
    return value.strip('"') if isinstance(value, str) else value


def nodes_of(graph) -> dict[str, object]:
    return {node.get_name(): node for node in graph.get_nodes()}


def edges_of(graph) -> list[tuple[str, str, str]]:
    return [(e.get_source(), e.get_destination(), e.get_label()) for e in graph.get_edges()]


def test_graph_nodes_and_edges() -> None:
    graph = draw.get_pydot_graph(tiny_net(), "LR")
    assert graph.get_name() == "TinyNet"
    assert graph.get_graph_type() == "digraph"
    assert attribute(graph, "rankdir") == "LR"
    nodes = nodes_of(graph)
    assert set(nodes) == {DATA, INPUT, CONV, RELU, POOL, IP, LOSS,
                          "data", "label", "conv1", "pool1", "ip1", "loss"}
    assert edges_of(graph) == [
        (DATA, "data", "Batch 8"), (DATA, "label", "Batch 8"),
        (INPUT, "data", '""'), (INPUT, "label", '""'),
        ("data", CONV, '""'), (CONV, "conv1", "4"),
        ("conv1", RELU, '""'), (RELU, "conv1", '""'),
        ("conv1", POOL, '""'), (POOL, "pool1", '""'),
        ("pool1", IP, '""'), (IP, "ip1", "10"),
        ("ip1", LOSS, '""'), ("label", LOSS, '""'), (LOSS, "loss", '""'),
    ]


def test_node_styles() -> None:
    nodes = nodes_of(draw.get_pydot_graph(tiny_net(), "LR"))
    colors = {name: attribute(nodes[name], "fillcolor")
              for name in (DATA, INPUT, CONV, RELU, POOL, IP, LOSS)}
    assert colors == {DATA: "#6495ED", INPUT: "#6495ED", CONV: "#FF5050", RELU: "#90EE90",
                      POOL: "#FF9900", IP: "#CC33FF", LOSS: "#6495ED"}
    for name in (DATA, CONV, RELU, POOL, IP, LOSS):
        assert attribute(nodes[name], "shape") == "record"
        assert attribute(nodes[name], "style") == "filled"
    # A blob takes the style of its last mention: octagon as a bottom, plain as a top.
    for blob in ("data", "label", "conv1", "pool1", "ip1"):
        assert attribute(nodes[blob], "shape") == "octagon"
        assert attribute(nodes[blob], "fillcolor") == "#E0E0E0"
    assert nodes["loss"].get_attributes() == {}
    assert draw.LAYER_STYLE_DEFAULT["fillcolor"] == "#6495ED"   # not changed by drawing


def test_unlabelled_edges() -> None:
    graph = draw.get_pydot_graph(tiny_net(), "LR", label_edges=False)
    assert {label for _, _, label in edges_of(graph)} == {'""'}


def test_phase_filter() -> None:
    train = nodes_of(draw.get_pydot_graph(tiny_net(), "LR", phase=caffe_pb2.TRAIN))
    assert DATA in train and LOSS in train and INPUT not in train
    test = nodes_of(draw.get_pydot_graph(tiny_net(), "LR", phase=caffe_pb2.TEST))
    assert INPUT in test and DATA not in test and LOSS not in test and "loss" not in test
    every = nodes_of(draw.get_pydot_graph(tiny_net(), "LR", phase=None))
    assert {DATA, INPUT, LOSS} <= set(every)


def test_include_and_exclude_together_is_an_error() -> None:
    net = parse_net('layer { name: "both" type: "ReLU" bottom: "x" top: "x" '
                    'include { phase: TRAIN } exclude { phase: TEST } }')
    with pytest.raises(ValueError, match="layer both has both include and exclude specified"):
        draw.get_pydot_graph(net, "LR", phase=caffe_pb2.TRAIN)
    draw.get_pydot_graph(net, "LR")   # without a phase nothing is filtered


def test_unnamed_net_is_called_net() -> None:
    assert draw.get_pydot_graph(caffe_pb2.NetParameter(), "TB").get_name() == "Net"


def test_layer_labels() -> None:
    net = tiny_net()
    conv, pool, ip = net.layer[2], net.layer[4], net.layer[5]
    assert draw.get_layer_label(conv, "LR") == CONV
    for vertical in ("TB", "BT"):
        assert draw.get_layer_label(conv, vertical) == \
            '"conv1 (Convolution) kernel size: 3 stride: 2 pad: 1"'
    assert draw.get_layer_label(pool, "TB") == \
        '"pool1 (Pooling AVE) kernel size: 2 stride: 2 pad: 0"'
    assert draw.get_layer_label(conv, "LR", display_lrm=True) == \
        CONV[:-1] + '\\nlr mult: 1.0, 2.0"'
    assert draw.get_layer_label(ip, "TB", display_lrm=True) == \
        '"ip1 (InnerProduct) lr mult: 1.0, 1.0"'
    assert draw.get_layer_label(pool, "LR", display_lrm=True) == POOL
    frozen = parse_net('layer { name: "f" type: "InnerProduct" param { lr_mult: 0 } '
                       'param { lr_mult: 0 } }').layer[0]
    assert draw.get_layer_label(frozen, "TB", display_lrm=True) == '"f (InnerProduct)"'
    bare = parse_net('layer { name: "c" type: "Deconvolution" }').layer[0]
    assert draw.get_layer_label(bare, "TB") == '"c (Deconvolution) kernel size: 1 stride: 1 pad: 0"'


def test_lr_mult() -> None:
    layers = parse_net("""
        layer { name: "a" type: "Convolution" }
        layer { name: "b" type: "InnerProduct" param { lr_mult: 0.5 } }
        layer { name: "c" type: "Deconvolution" param { lr_mult: 3 } param { decay_mult: 0 } }
        layer { name: "d" type: "InnerProduct" param { } param { } param { } }
        layer { name: "e" type: "ReLU" }
    """).layer
    assert draw.get_layer_lr_mult(layers[0]) == (1.0, 1.0)
    assert draw.get_layer_lr_mult(layers[1]) == (0.5, 1.0)
    assert draw.get_layer_lr_mult(layers[2]) == (3.0, 1.0)
    with pytest.raises(ValueError, match="Could not parse the learning rate multiplier"):
        draw.get_layer_lr_mult(layers[3])
    with pytest.raises(ValueError, match="ReLU layers do not have a learning rate multiplier"):
        draw.get_layer_lr_mult(layers[4])


def test_edge_labels_colors_and_pooling_names() -> None:
    layers = parse_net("""
        layer { name: "d" type: "Data" data_param { batch_size: 64 } }
        layer { name: "c" type: "Deconvolution" convolution_param { num_output: 7 } }
        layer { name: "i" type: "InnerProduct" inner_product_param { num_output: 3 } }
        layer { name: "r" type: "ReLU" }
    """).layer
    assert [draw.get_edge_label(l) for l in layers] == ["Batch 64", "7", "3", '""']
    assert draw.get_pooling_types_dict() == {0: "MAX", 1: "AVE", 2: "STOCHASTIC"}
    assert [draw.choose_color_by_layertype(t) for t in
            ("Convolution", "Deconvolution", "Pooling", "InnerProduct", "Eltwise")] == \
        ["#FF5050", "#FF5050", "#FF9900", "#CC33FF", "#6495ED"]


def test_draw_net_renders_png_and_svg() -> None:
    png = draw.draw_net(tiny_net(), "LR")
    assert png.startswith(PNG_MAGIC)
    svg = draw.draw_net(tiny_net(), "TB", ext="svg", phase=caffe_pb2.TEST).decode()
    assert "<svg" in svg and "input (Input)" in svg and "SoftmaxWithLoss" not in svg


def test_draw_net_to_file(tmp_path: pathlib.Path) -> None:
    png = tmp_path / "tiny.png"
    draw.draw_net_to_file(tiny_net(), str(png), display_lrm=True)
    assert png.read_bytes().startswith(PNG_MAGIC)
    raw = tmp_path / "tiny.raw"
    draw.draw_net_to_file(tiny_net(), str(raw), rankdir="BT", phase=caffe_pb2.TRAIN)
    source = raw.read_text()
    assert source.startswith("digraph TinyNet {") and "rankdir=BT" in source
    # The raw text is DOT that Graphviz renders itself.
    dot = shutil.which("dot")
    assert dot is not None, "Graphviz's dot is needed (Debian: graphviz)"
    rendered = subprocess.run([dot, "-Tpng", str(raw)], capture_output=True, check=True)
    assert rendered.stdout.startswith(PNG_MAGIC)


def net_files() -> list[pathlib.Path]:
    return sorted(p for p in (ROOT / "configs" / "nets").glob("*.prototxt")
                  if "solver" not in p.name)


@pytest.mark.parametrize("path", net_files(), ids=lambda p: p.name)
def test_draw_every_configured_net(path: pathlib.Path) -> None:
    net = parse_net(path.read_text())
    graph = draw.get_pydot_graph(net, "LR")
    layer_nodes = {draw.get_layer_label(l, "LR") for l in net.layer}
    assert layer_nodes <= set(nodes_of(graph))
    assert len(edges_of(graph)) == sum(len(l.bottom) + len(l.top) for l in net.layer)
    # Graphviz takes seconds on GoogLeNet and ResNet-50: those are drawn as DOT only.
    ext = "png" if len(net.layer) <= 60 else "raw"
    image = draw.draw_net(net, "LR", ext=ext)
    assert image.startswith(PNG_MAGIC if ext == "png" else b"digraph ")
