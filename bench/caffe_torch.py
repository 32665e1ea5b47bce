"""Caffe net definitions (.prototxt) as PyTorch modules, layer for layer.

The one home of PSTrain's PyTorch peers: bench/torch_peer.py builds LeNet,
CIFAR-10 quick and AlexNet from configs/nets/*.prototxt with it, and
bench/torch_shapes.py checks its shapes against ps-net's. Runs under
an interpreter that has torch (Debian's python3-torch: /usr/bin/python3);
importing this module without torch works (parse_prototxt, caffe_pool_size),
building a net needs it.

What is matched, so the shapes and the arithmetic are Caffe's:
  * Convolution: kernel/stride/pad (also _h/_w forms), group, bias_term;
  * Pooling: MAX/AVE with Caffe's ceil-mode output size (a window that would
    start inside the padding only is dropped) and Caffe's AVE divisor (the
    window clipped to the padded input, which is PyTorch's count_include_pad
    with ceil_mode); global_pooling;
  * LRN ACROSS_CHANNELS: k + alpha/n * sum of squares, as nn.LocalResponseNorm;
  * InnerProduct flattens from axis 1; ReLU (negative_slope), Sigmoid, TanH,
    Dropout, Softmax, SoftmaxWithLoss (mean over the batch), Accuracy;
  * BatchNorm (batch statistics in TRAIN, eps, momentum 1 - moving_average_fraction)
    as nn.BatchNorm2d; a Scale right after it on its top (in place, bias_term)
    becomes that BatchNorm2d's affine part, as a PyTorch ResNet is written
    (torchvision's); another Scale is a per-channel multiply (+ bias);
    Eltwise SUM (coeff), PROD and MAX;
  * data layers (Input, DummyData, Data) are net inputs given by the caller.
Weights start from PyTorch's default initialisation (timing does not depend on
them); load_caffe_params copies weights read from a .caffemodel.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r'\s+|#[^\n]*|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[{}:]|[^\s{}:#"\']+')


def parse_prototxt(text: str, source: str = "<prototxt>") -> dict:
    """Protobuf text format as nested dicts: every field maps to the list of its
    values (a dict for a message, a str/int/float/bool for a scalar; enum names
    stay str). Raises ValueError naming source and line on a malformed text."""
    tokens: list[tuple[str, int]] = []
    line = 1
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"{source}:{line}: cannot read {text[pos:pos + 20]!r}")
        tok = m.group(0)
        if not tok.isspace() and not tok.startswith("#"):
            tokens.append((tok, line))
        line += tok.count("\n")
        pos = m.end()
    root: dict = {}
    stack = [root]
    i = 0
    while i < len(tokens):
        tok, ln = tokens[i]
        if tok == "}":
            if len(stack) == 1:
                raise ValueError(f"{source}:{ln}: '}}' without a matching '{{'")
            stack.pop()
            i += 1
            continue
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tok):
            raise ValueError(f"{source}:{ln}: expected a field name, got {tok!r}")
        nxt = tokens[i + 1][0] if i + 1 < len(tokens) else None
        if nxt == ":" and i + 2 < len(tokens) and tokens[i + 2][0] == "{":
            i += 1
            nxt = "{"
        if nxt == "{":
            child: dict = {}
            stack[-1].setdefault(tok, []).append(child)
            stack.append(child)
            i += 2
        elif nxt == ":" and i + 2 < len(tokens):
            stack[-1].setdefault(tok, []).append(_scalar(tokens[i + 2][0]))
            i += 3
        else:
            raise ValueError(f"{source}:{ln}: field {tok!r} has no value")
    if len(stack) != 1:
        raise ValueError(f"{source}: {len(stack) - 1} unclosed '{{' at the end")
    return root


def _scalar(tok: str):
    if tok[0] in "\"'":
        return tok[1:-1]
    if tok in ("true", "false"):
        return tok == "true"
    try:
        return int(tok)
    except ValueError:
        pass
    try:
        return float(tok)
    except ValueError:
        return tok  # an enum name


def one(msg: dict, key: str, default=None):
    """The last value of field key (protobuf's rule for a repeated scalar read
    as optional), or default."""
    values = msg.get(key)
    return values[-1] if values else default


def _hw(param: dict, name: str, default: int) -> tuple[int, int]:
    """Caffe's kernel_size/pad/stride with their _h/_w forms, as (h, w)."""
    h, w = one(param, f"{name}_h"), one(param, f"{name}_w")
    if h is not None and w is not None:
        return int(h), int(w)
    key = name if name != "kernel" else "kernel_size"
    v = one(param, key, default)
    return int(v), int(v)


def caffe_pool_size(size: int, kernel: int, pad: int, stride: int) -> int:
    """Caffe's pooled size along one axis (ceil mode, clipped when padded)."""
    pooled = int(math.ceil((size + 2 * pad - kernel) / stride)) + 1
    if pad and (pooled - 1) * stride >= size + pad:
        pooled -= 1
    return pooled


INPUT_TYPES = ("Input", "DummyData", "Data", "ImageData", "MemoryData")


@dataclass
class CaffeLayer:
    name: str
    type: str
    bottoms: list[str]
    tops: list[str]
    param: dict
    include: list = field(default_factory=list)


def net_layers(net: dict, phase: str = "TRAIN") -> list[CaffeLayer]:
    """The layers of a parsed NetParameter that run in phase (include/exclude
    by phase only)."""
    out = []
    for layer in net.get("layer", []):
        inc = [one(r, "phase") for r in layer.get("include", [])]
        exc = [one(r, "phase") for r in layer.get("exclude", [])]
        if (inc and phase not in inc) or phase in exc:
            continue
        out.append(CaffeLayer(one(layer, "name"), one(layer, "type"), layer.get("bottom", []),
                              layer.get("top", []), layer))
    return out


def input_shapes(layers: list[CaffeLayer], batch: int = 0) -> dict[str, list[int]]:
    """Shapes of the net inputs from Input/DummyData layers; batch > 0
    replaces the first dimension (as ps-net time --batch does)."""
    shapes: dict[str, list[int]] = {}
    for layer in layers:
        if layer.type == "Input":
            p = one(layer.param, "input_param", {})
        elif layer.type == "DummyData":
            p = one(layer.param, "dummy_data_param", {})
        else:
            continue
        for top, shape in zip(layer.tops, p.get("shape", [])):
            dims = [int(d) for d in shape.get("dim", [])]
            if batch > 0:
                dims[0] = batch
            shapes[top] = dims
    return shapes


def build_net(prototxt_path: str, phase: str = "TRAIN", inputs: dict | None = None):
    """A torch.nn.Module for the net in prototxt_path; see CaffeNet. inputs
    (blob -> shape) gives the shapes of inputs whose layer declares none (Data)."""
    with open(prototxt_path) as f:
        net = parse_prototxt(f.read(), prototxt_path)
    return CaffeNet(net_layers(net, phase), prototxt_path, inputs or {}, phase)


def _torch():
    import torch  # noqa: PLC0415 (only where a net is built)
    return torch


class _Unsupported(ValueError):
    pass


def _eltwise(l: CaffeLayer, xs: list, torch):
    p = one(l.param, "eltwise_param", {})
    op = one(p, "operation", "SUM")
    if op == "PROD":
        y = xs[0]
        for x in xs[1:]:
            y = y * x
        return y
    if op == "MAX":
        y = xs[0]
        for x in xs[1:]:
            y = torch.maximum(y, x)
        return y
    coeff = [float(c) for c in p.get("coeff", [])] or [1.0] * len(xs)
    y = xs[0] * coeff[0] if coeff[0] != 1.0 else xs[0]
    for c, x in zip(coeff[1:], xs[1:]):
        y = y + x * c if c != 1.0 else y + x
    return y


def CaffeNet(layers: list[CaffeLayer], source: str = "<net>",  # noqa: N802 (a class factory)
             inputs: dict | None = None, phase: str = "TRAIN"):
    """Builds the module class lazily so this file imports without torch."""
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional  # noqa: N806

    class _ChannelAffine(nn.Module):
        """Caffe's Scale along axis 1 with its own [C] scale (and bias)."""

        def __init__(self, channels: int, bias: bool) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(channels))
            self.bias = nn.Parameter(torch.zeros(channels)) if bias else None

        def forward(self, x):
            shape = [1, -1] + [1] * (x.dim() - 2)
            y = x * self.weight.view(shape)
            return y + self.bias.view(shape) if self.bias is not None else y

    class _Net(nn.Module):
        """forward(inputs: dict blob -> tensor) -> dict of every blob computed
        (in-place layers overwrite their blob, as in Caffe). `shapes(inputs)`
        gives each layer's top shapes. A loss is the mean over the batch."""

        def __init__(self) -> None:
            super().__init__()
            self.layers = layers
            self.inputs = [t for l in layers if l.type in INPUT_TYPES for t in l.tops]
            self.mods = nn.ModuleDict()
            self.phase = phase
            self.absorbed: set[str] = set()  # Scale layers folded into a BatchNorm2d
            self.affine_of: dict[str, CaffeLayer] = {}  # BatchNorm name -> that Scale
            shapes = input_shapes(layers)
            shapes.update(inputs or {})
            # Shapes are inferred once from the input shapes (the number of
            # input channels/features of each conv and ip).
            self._infer(shapes)

        def _infer(self, shapes) -> None:
            for l in self.layers:
                if l.type in INPUT_TYPES:
                    continue
                if l.type == "Convolution":
                    p = one(l.param, "convolution_param", {})
                    kh, kw = _hw(p, "kernel", 1)
                    sh, sw = _hw(p, "stride", 1)
                    ph, pw = _hw(p, "pad", 0)
                    group = int(one(p, "group", 1))
                    cin = shapes[l.bottoms[0]][1]
                    cout = int(one(p, "num_output"))
                    self.mods[l.name] = nn.Conv2d(cin, cout, (kh, kw), (sh, sw), (ph, pw),
                                                  groups=group,
                                                  bias=bool(one(p, "bias_term", True)))
                elif l.type == "InnerProduct":
                    p = one(l.param, "inner_product_param", {})
                    if int(one(p, "axis", 1)) != 1:
                        raise _Unsupported(f"{source}: layer {l.name}: InnerProduct axis != 1")
                    fin = math.prod(shapes[l.bottoms[0]][1:])
                    self.mods[l.name] = nn.Linear(fin, int(one(p, "num_output")),
                                                  bias=bool(one(p, "bias_term", True)))
                elif l.type == "LRN":
                    p = one(l.param, "lrn_param", {})
                    if one(p, "norm_region", "ACROSS_CHANNELS") != "ACROSS_CHANNELS":
                        raise _Unsupported(f"{source}: layer {l.name}: LRN WITHIN_CHANNEL")
                    self.mods[l.name] = nn.LocalResponseNorm(
                        int(one(p, "local_size", 5)), alpha=float(one(p, "alpha", 1.0)),
                        beta=float(one(p, "beta", 0.75)), k=float(one(p, "k", 1.0)))
                elif l.type == "Pooling":
                    self.mods[l.name] = self._pooling(l, shapes[l.bottoms[0]])
                elif l.type == "BatchNorm":
                    p = one(l.param, "batch_norm_param", {})
                    absorbed = self._scale_after(l)
                    if absorbed is not None:
                        self.absorbed.add(absorbed.name)
                        self.affine_of[l.name] = absorbed
                    global_stats = one(p, "use_global_stats", self.phase == "TEST")
                    bn = nn.BatchNorm2d(shapes[l.bottoms[0]][1], eps=float(one(p, "eps", 1e-5)),
                                        momentum=1.0 - float(one(p, "moving_average_fraction",
                                                                 0.999)),
                                        affine=absorbed is not None)
                    bn.train(not global_stats)
                    self.mods[l.name] = bn
                elif l.type == "Scale" and l.name not in self.absorbed:
                    p = one(l.param, "scale_param", {})
                    if len(l.bottoms) != 1 or int(one(p, "axis", 1)) != 1:
                        raise _Unsupported(f"{source}: layer {l.name}: Scale other than per channel")
                    self.mods[l.name] = _ChannelAffine(shapes[l.bottoms[0]][1],
                                                       bool(one(p, "bias_term", False)))
                elif l.type == "Dropout":
                    p = one(l.param, "dropout_param", {})
                    self.mods[l.name] = nn.Dropout(float(one(p, "dropout_ratio", 0.5)))
                elif l.type not in ("ReLU", "Sigmoid", "TanH", "Softmax", "SoftmaxWithLoss",
                                    "Accuracy", "Split", "Flatten", "Eltwise", "Scale"):
                    raise _Unsupported(f"{source}: layer {l.name}: type {l.type} is not built")
                out = self._top_shape(l, shapes)
                for top in l.tops[:1]:
                    shapes[top] = out

        def _scale_after(self, l: CaffeLayer) -> CaffeLayer | None:
            """The Scale right after BatchNorm l that works in place on its
            top with its own per-channel scale and a bias."""
            i = self.layers.index(l)
            if i + 1 >= len(self.layers):
                return None
            nxt = self.layers[i + 1]
            p = one(nxt.param, "scale_param", {})
            if (nxt.type == "Scale" and nxt.bottoms == l.tops[:1] and nxt.tops == l.tops[:1]
                    and int(one(p, "axis", 1)) == 1 and bool(one(p, "bias_term", False))):
                return nxt
            return None

        def _pooling(self, l: CaffeLayer, bottom: list[int]):
            p = one(l.param, "pooling_param", {})
            method = one(p, "pool", "MAX")
            if one(p, "global_pooling", False):
                kh, kw, sh, sw, ph, pw = bottom[2], bottom[3], 1, 1, 0, 0
            else:
                kh, kw = _hw(p, "kernel", 1)
                sh, sw = _hw(p, "stride", 1)
                ph, pw = _hw(p, "pad", 0)
            if method == "MAX":
                return nn.MaxPool2d((kh, kw), (sh, sw), (ph, pw), ceil_mode=True)
            if method == "AVE":
                return nn.AvgPool2d((kh, kw), (sh, sw), (ph, pw), ceil_mode=True,
                                    count_include_pad=True)
            raise _Unsupported(f"{source}: layer {l.name}: pool {method}")

        def _top_shape(self, l: CaffeLayer, shapes) -> list[int]:
            b = shapes[l.bottoms[0]] if l.bottoms else []
            if l.type == "Convolution":
                conv = self.mods[l.name]
                return [b[0], conv.out_channels] + [
                    (b[2 + i] + 2 * conv.padding[i] - conv.kernel_size[i]) // conv.stride[i] + 1
                    for i in range(2)]
            if l.type == "Pooling":
                pool = self.mods[l.name]
                k, s, pd = (_pair(pool.kernel_size), _pair(pool.stride), _pair(pool.padding))
                return [b[0], b[1]] + [caffe_pool_size(b[2 + i], k[i], pd[i], s[i])
                                       for i in range(2)]
            if l.type == "InnerProduct":
                return [b[0], self.mods[l.name].out_features]
            if l.type in ("SoftmaxWithLoss", "Accuracy"):
                return []
            return list(b)

        def forward(self, inputs: dict) -> dict:
            blobs = dict(inputs)
            for l in self.layers:
                if l.type not in INPUT_TYPES:
                    self._run(l, blobs)
            return blobs

        def _run(self, l: CaffeLayer, blobs: dict) -> None:
            x = blobs[l.bottoms[0]] if l.bottoms else None
            if l.name in self.mods:
                y = self.mods[l.name](x.flatten(1) if l.type == "InnerProduct" else x)
            elif l.type == "ReLU":
                slope = float(one(one(l.param, "relu_param", {}), "negative_slope", 0.0))
                y = F.leaky_relu(x, slope) if slope else F.relu(x)
            elif l.type == "Sigmoid":
                y = torch.sigmoid(x)
            elif l.type == "TanH":
                y = torch.tanh(x)
            elif l.type == "Softmax":
                y = F.softmax(x, 1)
            elif l.type == "SoftmaxWithLoss":
                y = F.cross_entropy(x, blobs[l.bottoms[1]].long().view(-1))
            elif l.type == "Accuracy":
                y = (x.argmax(1) == blobs[l.bottoms[1]].long().view(-1)).float().mean()
            elif l.type == "Flatten":
                y = x.flatten(1)
            elif l.type == "Eltwise":
                y = _eltwise(l, [blobs[b] for b in l.bottoms], torch)
            elif l.type == "Scale":  # folded into the BatchNorm2d before it
                y = x
            else:  # Split
                y = x
            for top in l.tops:
                blobs[top] = y

        def shapes(self, inputs: dict) -> dict[str, list[int]]:
            """Each layer's first top shape after a forward pass on inputs
            (layer name -> shape), for comparison with ps-net's."""
            out = {}
            blobs = dict(inputs)
            for l in self.layers:
                if l.type not in INPUT_TYPES:
                    self._run(l, blobs)
                out[l.name] = list(blobs[l.tops[0]].shape)
            return out

        def caffe_inputs(self, batch: int = 0, seed: int = 1) -> dict:
            """Random inputs of the declared shapes (labels: class 1, as the
            bench prototxts' constant fillers)."""
            gen = torch.Generator().manual_seed(seed)
            out = {}
            for blob, dims in input_shapes(self.layers, batch).items():
                if len(dims) == 1 or blob == "label":
                    out[blob] = torch.ones(dims)
                else:
                    out[blob] = torch.rand(dims, generator=gen)
            return out

    return _Net()


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def load_caffe_params(net, params: dict[str, list]) -> None:
    """Copies blobs read from a .caffemodel (layer name -> [weight, bias] as
    flat float lists or arrays) into the matching modules of net."""
    torch = _torch()
    with torch.no_grad():
        for name, blobs in params.items():
            if name not in net.mods:
                continue
            mod = net.mods[name]
            for tensor, values in zip([mod.weight, mod.bias], blobs):
                if tensor is None:
                    continue
                src = torch.as_tensor(values, dtype=torch.float32).reshape(tensor.shape)
                tensor.copy_(src)


def apply_caffe_fillers(net, seed: int = 1) -> None:
    """Initialises each Convolution/InnerProduct as its prototxt's
    weight_filler/bias_filler say (constant, gaussian, uniform, xavier and msra
    with Caffe's default FAN_IN variance), so a training run starts as Caffe's does."""
    torch = _torch()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for l in net.layers:
            # BatchNorm2d and Scale keep PyTorch's 1 and 0, Caffe's Scale defaults.
            if l.type not in ("Convolution", "InnerProduct") or l.name not in net.mods:
                continue
            p = one(l.param, "convolution_param") or one(l.param, "inner_product_param") or {}
            mod = net.mods[l.name]
            for tensor, key in ((mod.weight, "weight_filler"), (mod.bias, "bias_filler")):
                if tensor is None:
                    continue
                filler = one(p, key, {"type": ["constant"]})
                kind = one(filler, "type", "constant")
                fan_in = tensor[0].numel() if tensor.dim() > 1 else 1
                if kind == "constant":
                    tensor.fill_(float(one(filler, "value", 0.0)))
                elif kind == "gaussian":
                    tensor.normal_(float(one(filler, "mean", 0.0)), float(one(filler, "std", 1.0)),
                                   generator=gen)
                elif kind == "uniform":
                    tensor.uniform_(float(one(filler, "min", 0.0)), float(one(filler, "max", 1.0)),
                                    generator=gen)
                elif kind == "xavier":
                    bound = math.sqrt(3.0 / fan_in)
                    tensor.uniform_(-bound, bound, generator=gen)
                elif kind == "msra":  # Caffe's default variance_norm FAN_IN
                    tensor.normal_(0.0, math.sqrt(2.0 / fan_in), generator=gen)
                else:
                    raise ValueError(f"layer {l.name}: filler {kind} is not supported here")


def lr_mults(net) -> dict:
    """Parameter -> (lr_mult, decay_mult) from each layer's param { } entries
    (Caffe's defaults 1, 1)."""
    out = {}
    for l in net.layers:
        if l.name not in net.mods or not hasattr(net.mods[l.name], "weight"):
            continue
        mod = net.mods[l.name]
        if l.type == "BatchNorm":  # its specs are the statistics'; the affine part's
            l = net.affine_of.get(l.name)  # are the folded Scale's
            if l is None:
                continue
        specs = l.param.get("param", [])
        for i, tensor in enumerate((mod.weight, mod.bias)):
            if tensor is None:
                continue
            spec = specs[i] if i < len(specs) else {}
            out[tensor] = (float(one(spec, "lr_mult", 1.0)), float(one(spec, "decay_mult", 1.0)))
    return out
