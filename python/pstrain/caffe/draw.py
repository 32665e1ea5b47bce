"""pycaffe's net drawing: a NetParameter as a Graphviz graph (pydot), and rendered.

Layers are record-shaped nodes labelled with their name, type and (for convolution,
deconvolution and pooling) kernel size, stride and pad; blobs are octagons. An
in-place layer (one bottom, the same blob as its top) is drawn green, other layers
coloured by type. Edges into a layer are unlabelled; edges out of it carry the batch
size (Data) or num_output (Convolution, Deconvolution, InnerProduct).

pydot (PyPI) is imported when a graph is first made; rendering runs Graphviz's `dot`.
"""
from __future__ import annotations

from typing import Any

from .proto import caffe_pb2

__all__ = ["BLOB_STYLE", "LAYER_STYLE_DEFAULT", "NEURON_LAYER_STYLE",
           "choose_color_by_layertype", "draw_net", "draw_net_to_file", "get_edge_label",
           "get_layer_label", "get_layer_lr_mult", "get_pooling_types_dict",
           "get_pydot_graph"]

LAYER_STYLE_DEFAULT = {"shape": "record", "fillcolor": "#6495ED", "style": "filled"}
NEURON_LAYER_STYLE = {"shape": "record", "fillcolor": "#90EE90", "style": "filled"}
BLOB_STYLE = {"shape": "octagon", "fillcolor": "#E0E0E0", "style": "filled"}

_LAYER_COLORS = {"Convolution": "#FF5050", "Deconvolution": "#FF5050", "Pooling": "#FF9900",
                 "InnerProduct": "#CC33FF"}
_LEARNING_LAYERS = ("Convolution", "Deconvolution", "InnerProduct")
_SPATIAL_LAYERS = ("Convolution", "Deconvolution", "Pooling")
_NO_LABEL = '""'


def get_pooling_types_dict() -> dict[int, str]:
    """PoolingParameter.PoolMethod: number -> name (0 -> 'MAX', ...)."""
    method = caffe_pb2.PoolingParameter.DESCRIPTOR.enum_types_by_name["PoolMethod"]
    return {value.number: value.name for value in method.values}


def get_edge_label(layer: Any) -> str:
    """The label of the edges out of `layer`: 'Batch <batch_size>' for Data, num_output
    for Convolution, Deconvolution and InnerProduct, else '""' (no label)."""
    if layer.type == "Data":
        return f"Batch {layer.data_param.batch_size}"
    if layer.type in ("Convolution", "Deconvolution"):
        return str(layer.convolution_param.num_output)
    if layer.type == "InnerProduct":
        return str(layer.inner_product_param.num_output)
    return _NO_LABEL


def get_layer_lr_mult(layer: Any) -> tuple[float, float]:
    """(weights, bias) learning-rate multipliers of a Convolution, Deconvolution or
    InnerProduct layer, 1.0 for those its `param` entries do not give. Raises
    ValueError for another layer type or more than two `param` entries."""
    if layer.type not in _LEARNING_LAYERS:
        raise ValueError(f"{layer.type} layers do not have a learning rate multiplier")
    specs = list(layer.param)
    if len(specs) > 2:
        raise ValueError("Could not parse the learning rate multiplier")
    mults = [spec.lr_mult for spec in specs] + [1.0] * (2 - len(specs))
    return mults[0], mults[1]


def _spatial_descriptor(layer: Any, separator: str) -> str:
    """'kernel size: k<sep>stride: s<sep>pad: p' (the first value of each repeated
    convolution setting; its default when absent)."""
    if layer.type == "Pooling":
        pooling = layer.pooling_param
        kernel, stride, pad = pooling.kernel_size, pooling.stride, pooling.pad
    else:
        conv = layer.convolution_param
        kernel = conv.kernel_size[0] if len(conv.kernel_size) else 1
        stride = conv.stride[0] if len(conv.stride) else 1
        pad = conv.pad[0] if len(conv.pad) else 0
    return separator.join([f"kernel size: {kernel:d}", f"stride: {stride:d}",
                           f"pad: {pad:d}"])


def get_layer_label(layer: Any, rankdir: str, display_lrm: bool = False) -> str:
    """The node label of a layer, in double quotes: name, (type), the spatial settings
    of convolution/pooling layers and, with `display_lrm`, the learning-rate
    multipliers of learning layers (unless both are 0). Parts are joined by spaces
    for a vertical layout (rankdir 'TB' or 'BT'), else by line breaks."""
    separator = " " if rankdir in ("TB", "BT") else r"\n"
    if layer.type == "Pooling":
        method = get_pooling_types_dict()[layer.pooling_param.pool]
        parts = [layer.name, f"({layer.type} {method})"]
    else:
        parts = [layer.name, f"({layer.type})"]
    if layer.type in _SPATIAL_LAYERS:
        parts.append(_spatial_descriptor(layer, separator))
    if display_lrm and layer.type in _LEARNING_LAYERS:
        weights, bias = get_layer_lr_mult(layer)
        if weights or bias:
            parts.append(f"lr mult: {weights:.1f}, {bias:.1f}")
    # Quoted, so that pydot does not read a colon in the label as a node port.
    return '"' + separator.join(parts) + '"'


def choose_color_by_layertype(layertype: str) -> str:
    """The fill colour of a (not in-place) layer node."""
    return _LAYER_COLORS.get(layertype, LAYER_STYLE_DEFAULT["fillcolor"])


def _in_phase(layer: Any, phase: int | None) -> bool:
    """Whether `layer` belongs to the net of `phase` (every layer when phase is None),
    judged by the phases of its include or exclude rules. Raises ValueError for a
    layer that has both."""
    if phase is None:
        return True
    if layer.include and layer.exclude:
        raise ValueError(f"layer {layer.name} has both include and exclude specified.")
    if layer.include:
        return any(rule.phase == phase for rule in layer.include)
    return not any(rule.phase == phase for rule in layer.exclude)


def _layer_style(layer: Any) -> dict[str, str]:
    in_place = len(layer.bottom) == 1 and len(layer.top) == 1 and layer.bottom[0] == layer.top[0]
    if in_place:
        return dict(NEURON_LAYER_STYLE)
    return dict(LAYER_STYLE_DEFAULT, fillcolor=choose_color_by_layertype(layer.type))


def get_pydot_graph(caffe_net: Any, rankdir: str, label_edges: bool = True,
                    phase: int | None = None, display_lrm: bool = False) -> Any:
    """The pydot.Dot digraph of a NetParameter (named after the net, else 'Net'): one
    node per layer (keyed by its label) and per blob (keyed by its name), an edge from
    each bottom blob to its layer and from the layer to each top blob. `phase`
    (caffe_pb2.TRAIN or TEST) keeps only that phase's layers; `label_edges` False
    leaves the edges out of layers unlabelled too.

    A blob's node takes the style of its last mention: octagon when that is as a
    bottom, Graphviz's default when as a top (so a net's outputs look plain)."""
    import pydot

    graph = pydot.Dot(caffe_net.name or "Net", graph_type="digraph", rankdir=rankdir)
    nodes: dict[str, Any] = {}
    edges: list[tuple[str, str, str]] = []
    for layer in caffe_net.layer:
        if not _in_phase(layer, phase):
            continue
        layer_key = f"{layer.name}_{layer.type}"
        nodes[layer_key] = pydot.Node(get_layer_label(layer, rankdir, display_lrm=display_lrm),
                                      **_layer_style(layer))
        for blob in layer.bottom:
            nodes[blob + "_blob"] = pydot.Node(blob, **BLOB_STYLE)
            edges.append((blob + "_blob", layer_key, _NO_LABEL))
        out_label = get_edge_label(layer) if label_edges else _NO_LABEL
        for blob in layer.top:
            nodes[blob + "_blob"] = pydot.Node(blob)
            edges.append((layer_key, blob + "_blob", out_label))
    for node in nodes.values():
        graph.add_node(node)
    for source, destination, label in edges:
        graph.add_edge(pydot.Edge(nodes[source], nodes[destination], label=label))
    return graph


def draw_net(caffe_net: Any, rankdir: str, ext: str = "png", phase: int | None = None,
             display_lrm: bool = False) -> bytes:
    """The net drawn by Graphviz in format `ext` ('png', 'svg', 'pdf', ...), as bytes;
    'raw' gives the DOT source itself."""
    graph = get_pydot_graph(caffe_net, rankdir, phase=phase, display_lrm=display_lrm)
    if ext == "raw":
        return graph.to_string().encode()
    return graph.create(format=ext)


def draw_net_to_file(caffe_net: Any, filename: str, rankdir: str = "LR",
                     phase: int | None = None, display_lrm: bool = False) -> None:
    """Writes the drawing to `filename`, in the format its extension names ('.raw':
    the DOT source)."""
    ext = filename[filename.rfind(".") + 1:]
    image = draw_net(caffe_net, rankdir, ext, phase, display_lrm)
    with open(filename, "wb") as out:
        out.write(image)
