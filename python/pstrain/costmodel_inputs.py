"""The cost model's inputs (costmodel_iteration.py, docs/scaling.md): per-layer compute
times from `ps-net time --json` and the learnable parameters of a net, as the
engine builds it (engine.py)."""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib

from . import engine
from .errors import JobError


class CostModelError(JobError):
    """Unusable input to the cost model; the message names the file and line or layer."""


# ---------------------------------------------------------------- inputs

@dataclasses.dataclass(frozen=True)
class LayerTime:
    name: str
    forward_ms: float
    backward_ms: float


def load_layer_times(path: str | pathlib.Path) -> list[LayerTime]:
    """The layer_time events of a `ps-net time --json` output, in forward order."""
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise CostModelError(f"{path}: cannot read the layer times: {e.strerror}") from None
    layers = []
    median = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as e:
            raise CostModelError(f"{path}:{number}: not a JSON line ({e.msg})") from None
        if isinstance(event, dict) and event.get("event") == "time":
            median = event.get("median_total_ms")
            continue
        if not isinstance(event, dict) or event.get("event") != "layer_time":
            continue
        try:
            f, b = float(event["forward_ms"]), float(event["backward_ms"])
            name = str(event["layer"])
        except (KeyError, TypeError, ValueError):
            raise CostModelError(f"{path}:{number}: a layer_time event needs layer, forward_ms "
                                 "and backward_ms (numbers)") from None
        if not (math.isfinite(f) and math.isfinite(b)) or f < 0 or b < 0:
            raise CostModelError(f"{path}:{number}: layer \"{name}\": times must be finite and "
                                 ">= 0")
        layers.append(LayerTime(name, f, b))
    if not layers:
        raise CostModelError(f"{path}: no layer_time events (the output of `ps-net time --json`)")
    # The per-layer figures are means; the time event's median of whole iterations resists
    # the outliers a shared machine adds (a preempted layer). Keep the layers' proportions,
    # scale them to the median.
    total = sum(l.forward_ms + l.backward_ms for l in layers)
    if isinstance(median, (int, float)) and math.isfinite(median) and median > 0 and total > 0:
        k = median / total
        layers = [LayerTime(l.name, l.forward_ms * k, l.backward_ms * k) for l in layers]
    return layers


@dataclasses.dataclass(frozen=True)
class Param:
    layer: str
    name: str
    values: int
    # an InnerProduct weight (blob 0, 2-D): (rows, cols) = (num_output, inputs), whose
    # gradient over a batch is the product of its sufficient factors (E1b); None otherwise
    fc_shape: tuple[int, int] | None = None


# pycaffe's convention for a layer's blobs: params[name][0] the weights, [1] the biases.
_BLOB_ROLES = ("weight", "bias")


def net_params(path: str | pathlib.Path) -> list[Param]:
    """The parameters that learn in the TRAIN-phase net, as the engine builds it
    (engine.net_shapes: no activations allocated), in the order ps-worker registers
    them, a shared one once: lr_mult != 0 and a gradient computed (`learns`). So
    BatchNorm's statistics (no gradient; Caffe's solver never updates them) and
    parameters with `param { lr_mult: 0 }` stay out. A parameter is named
    "<layer>/weight", "<layer>/bias" (its blob 0, 1; "<layer>/<i>" after) or by its
    ParamSpec name."""
    path = pathlib.Path(path)
    try:
        net = engine.net_shapes(path)
    except (ValueError, RuntimeError, OSError) as e:   # the engine's message, file:line
        raise CostModelError(f"{path}: {e}" if str(path) not in str(e) else str(e)) from None
    types = {l["name"]: l["type"] for l in net["layers"]}
    params = []
    for p in net["params"]:
        if p["lr_mult"] == 0 or not p["learns"]:
            continue
        name = p["name"]
        if name == f"{p['layer']}/{p['index']}" and p["index"] < len(_BLOB_ROLES):
            name = f"{p['layer']}/{_BLOB_ROLES[p['index']]}"
        fc = (tuple(p["shape"]) if types.get(p["layer"]) == "InnerProduct" and p["index"] == 0
              and len(p["shape"]) == 2 else None)
        params.append(Param(p["layer"], name, p["count"], fc))
    return params
