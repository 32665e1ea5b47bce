"""pycaffe's coordinate mapping between the tops of a NetSpec net.

A map is a triple (axis, a, b): output coordinate = a * input coordinate + b along
the spatial axes from `axis` on (arrays hold one entry per spatial axis), with
axis None for layers that do not move coordinates. `coord_map_from_to(f, t)` walks
the layers back from both tops to a common blob and gives the map from f's
coordinates to t's; `crop(f, t)` uses it to make the Crop layer that cuts f to
t's extent (as fully convolutional nets do after upsampling).
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from .net_spec import Function, Top
from .net_spec import layers as L

__all__ = ["AxisMismatchException", "PASS_THROUGH_LAYERS", "UndefinedMapException",
           "compose", "conv_params", "coord_map", "coord_map_from_to", "crop",
           "crop_params", "inverse"]

# Layers whose output pixel i comes from input pixel i.
PASS_THROUGH_LAYERS = ["AbsVal", "BatchNorm", "Bias", "BNLL", "Dropout", "Eltwise", "ELU",
                       "Log", "LRN", "Exp", "MVN", "Power", "ReLU", "PReLU", "Scale",
                       "Sigmoid", "Split", "TanH", "Threshold"]

_STRIDED_LAYERS = ("Convolution", "Pooling", "Im2col")
_LEGACY_KEYS = {"pad_h", "pad_w", "kernel_h", "kernel_w", "stride_h", "stride_w"}
_IDENTITY = (None, 1, 0)

CoordMap = tuple  # (axis or None, scale a, shift b)


class UndefinedMapException(Exception):
    """The layer has no coordinate map (an InnerProduct, say)."""


class AxisMismatchException(Exception):
    """Two maps to compose start at different axes."""


def conv_params(fn: Function) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(axis, stride, effective kernel size, pad) of a Convolution, Deconvolution,
    Im2col (settings in `convolution_param` or given flat) or Pooling layer; the
    effective kernel of a dilated convolution is (kernel - 1) * dilation + 1.
    Raises AssertionError for the legacy *_h/*_w settings."""
    settings = fn.params.get("convolution_param", fn.params)
    if _LEGACY_KEYS & set(fn.params):
        raise AssertionError("cropping does not support legacy _h/_w params")
    kernel = np.array(settings["kernel_size"], ndmin=1)
    dilation = np.array(settings.get("dilation", 1), ndmin=1)
    return (settings.get("axis", 1), np.array(settings.get("stride", 1), ndmin=1),
            (kernel - 1) * dilation + 1, np.array(settings.get("pad", 0), ndmin=1))


def crop_params(fn: Function) -> tuple[int, np.ndarray]:
    """(axis, offset) of a Crop layer, with Crop's defaults (axis 2, offset 0)."""
    settings = fn.params.get("crop_param", fn.params)
    return settings.get("axis", 2), np.array(settings.get("offset", 0), ndmin=1)


def coord_map(fn: Function) -> CoordMap:
    """The map from a layer's bottom coordinates to its top's. Raises
    UndefinedMapException for a layer type without one."""
    if fn.type_name in _STRIDED_LAYERS:
        axis, stride, kernel, pad = conv_params(fn)
        return axis, 1 / stride, (pad - (kernel - 1) / 2) / stride
    if fn.type_name == "Deconvolution":
        axis, stride, kernel, pad = conv_params(fn)
        return axis, stride, (kernel - 1) / 2 - pad
    if fn.type_name in PASS_THROUGH_LAYERS:
        return _IDENTITY
    if fn.type_name == "Crop":
        axis, offset = crop_params(fn)
        return axis - 1, 1, -offset  # the map's axis is the one before the first cropped
    raise UndefinedMapException


def compose(base_map: CoordMap, next_map: CoordMap) -> CoordMap:
    """`base_map` after `next_map`: x -> a1 * (a2 * x + b2) + b1. Raises
    AxisMismatchException when both have an axis and they differ."""
    axis1, a1, b1 = base_map
    axis2, a2, b2 = next_map
    if axis1 is not None and axis2 is not None and axis1 != axis2:
        raise AxisMismatchException
    return (axis2 if axis1 is None else axis1), a1 * a2, a1 * b2 + b1


def inverse(coord_map: CoordMap) -> CoordMap:
    """The map back: x -> (x - b) / a."""
    axis, a, b = coord_map
    return axis, 1 / a, -b / a


def _mapped_bottoms(top: Top) -> tuple:
    """The bottoms whose coordinates the top's layer maps: all of them, except for Crop,
    whose second bottom only gives the size."""
    bottoms = top.fn.inputs
    return bottoms[:1] if top.fn.type_name == "Crop" else bottoms


def _step_back(top: Top) -> CoordMap | None:
    """The map of the layer that makes `top`; None when it has none."""
    try:
        return coord_map(top.fn)
    except UndefinedMapException:
        return None


def _walk_back(start: Top) -> Iterator[tuple[Top, CoordMap]]:
    """The tops reachable backwards from `start` through mappable layers, each with the
    map from its coordinates to start's. A top reached again by another path comes
    again, with the map of that path."""
    maps: dict[Top, CoordMap] = {start: _IDENTITY}
    pending: dict[Top, None] = {start: None}  # an ordered set
    while pending:
        top, _ = pending.popitem()
        yield top, maps[top]
        bottoms = _mapped_bottoms(top)
        step = _step_back(top) if bottoms else None
        if step is None:
            continue
        for bottom in bottoms:
            maps[bottom] = compose(maps[top], step)
            pending[bottom] = None


def coord_map_from_to(top_from: Top, top_to: Top) -> CoordMap:
    """The map from top_from's coordinates to top_to's, through their nearest common
    ancestor blob. Raises RuntimeError when no chain of spatial layers joins them."""
    from_maps = dict(_walk_back(top_from))
    for top, to_map in _walk_back(top_to):
        if top in from_maps:
            return compose(to_map, inverse(from_maps[top]))
    raise RuntimeError("Could not compute map between tops; are they connected by spatial "
                       "layers?")


def crop(top_from: Top, top_to: Top) -> Any:
    """A Crop layer (its top) that cuts top_from to top_to's extent, with the axis and
    offsets the coordinate map gives. Raises AssertionError when the map scales, or
    shifts by a positive or fractional amount (nothing to crop)."""
    axis, a, b = coord_map_from_to(top_from, top_to)
    a, b = np.asarray(a), np.asarray(b)
    if not (a == 1).all():
        raise AssertionError(f"scale mismatch on crop (a = {a})")
    if not (b <= 0).all():
        raise AssertionError(f"cannot crop negative offset (b = {b})")
    if not (np.round(b) == b).all():
        raise AssertionError(f"cannot crop noninteger offset (b = {b})")
    offsets = (-np.round(b).astype(int)).ravel().tolist()
    return L.Crop(top_from, top_to, crop_param=dict(axis=axis + 1, offset=offsets))
