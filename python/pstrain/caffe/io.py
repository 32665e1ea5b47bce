"""pycaffe's `caffe.io`: numpy arrays to and from Caffe's BlobProto and Datum messages,
image loading and resizing, and the Transformer that lays an image out as a net input.

Importing this module needs numpy and protobuf only; `load_image` and `resize_image`
import scikit-image (and scipy, which it depends on) when first called.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .proto import caffe_pb2

__all__ = ["Transformer", "array_to_blobproto", "array_to_datum",
           "arraylist_to_blobprotovector_str", "blobproto_to_array",
           "blobprotovector_str_to_arraylist", "datum_to_array", "load_image", "oversample",
           "resize_image"]

# ---------------------------------------------------------------------------------------
# Messages <-> arrays


def _has_legacy_shape(blob: Any) -> bool:
    """Whether the blob states its shape by the old num/channels/height/width fields."""
    return any(blob.HasField(f) for f in ("num", "channels", "height", "width"))


def blobproto_to_array(blob: Any, return_diff: bool = False) -> np.ndarray:
    """The values of a BlobProto (its `diff` when `return_diff`, else its `data`) as a
    float64 array of the blob's shape.

    A blob that sets any of num/channels/height/width is read as 4-D (unset ones count
    as 0); otherwise `shape.dim` gives the shape. Raises ValueError when the number of
    values does not fit the shape."""
    values = np.array(blob.diff if return_diff else blob.data, dtype=np.float64)
    if _has_legacy_shape(blob):
        return values.reshape(blob.num, blob.channels, blob.height, blob.width)
    return values.reshape(tuple(blob.shape.dim))


def array_to_blobproto(arr: np.ndarray, diff: np.ndarray | None = None) -> Any:
    """A BlobProto holding `arr` (shape in `shape.dim`) and, when given, `diff` as its
    gradient. REQUIRES: diff has arr's shape (not checked)."""
    blob = caffe_pb2.BlobProto()
    blob.shape.dim.extend(arr.shape)
    blob.data.extend(np.asarray(arr, dtype=float).ravel().tolist())
    if diff is not None:
        blob.diff.extend(np.asarray(diff, dtype=float).ravel().tolist())
    return blob


def arraylist_to_blobprotovector_str(arraylist: Iterable[np.ndarray]) -> bytes:
    """The arrays as a serialized BlobProtoVector (data only)."""
    vector = caffe_pb2.BlobProtoVector()
    vector.blobs.extend(array_to_blobproto(a) for a in arraylist)
    return vector.SerializeToString()


def blobprotovector_str_to_arraylist(str: bytes) -> list[np.ndarray]:  # noqa: A002
    """The data arrays of a serialized BlobProtoVector (the argument keeps pycaffe's
    name, `str`, for callers that pass it by keyword)."""
    vector = caffe_pb2.BlobProtoVector()
    vector.ParseFromString(str)
    return [blobproto_to_array(b) for b in vector.blobs]


def array_to_datum(arr: np.ndarray, label: int | None = None) -> Any:
    """A Datum holding a C x H x W array: uint8 arrays go into the `data` bytes, any
    other dtype into `float_data`; `label` is set only when given. Raises ValueError
    for an array that is not 3-D."""
    if arr.ndim != 3:
        raise ValueError("Incorrect array shape.")
    datum = caffe_pb2.Datum()
    datum.channels, datum.height, datum.width = arr.shape
    if arr.dtype == np.uint8:
        datum.data = arr.tobytes()
    else:
        datum.float_data.extend(arr.astype(float).ravel().tolist())
    if label is not None:
        datum.label = label
    return datum


def datum_to_array(datum: Any) -> np.ndarray:
    """The C x H x W array of a Datum: uint8 from `data` when it holds bytes, else
    float64 from `float_data`. The label stays in `datum.label`."""
    shape = (datum.channels, datum.height, datum.width)
    if len(datum.data):
        return np.frombuffer(datum.data, dtype=np.uint8).reshape(shape).copy()
    return np.array(datum.float_data, dtype=float).reshape(shape)


# ---------------------------------------------------------------------------------------
# Images


def load_image(filename: str, color: bool = True) -> np.ndarray:
    """An image file as float32 in [0, 1], H x W x 3 (RGB) when `color`, else H x W x 1.

    A grayscale file is repeated over three channels when `color`; with `color` False
    a colour file is converted to luminance. An alpha channel is dropped."""
    import skimage
    import skimage.io

    image = skimage.img_as_float(skimage.io.imread(filename, as_gray=not color))
    image = image.astype(np.float32)
    if image.ndim == 2:
        image = image[:, :, np.newaxis]
        if color:
            image = np.tile(image, (1, 1, 3))
    elif image.shape[2] == 4:
        image = image[:, :, :3]
    return image


def resize_image(im: np.ndarray, new_dims: Sequence[int], interp_order: int = 1) -> np.ndarray:
    """`im` (H x W x K) resized to new_dims (height, width) with spline interpolation of
    order `interp_order` (1: bilinear), as float32.

    Images of 1 or 3 channels go through scikit-image's resize on a copy scaled to
    [0, 1] (pixel edges aligned, zeros beyond the border, no anti-aliasing filter);
    a constant image comes back constant. Other channel counts go through
    scipy.ndimage.zoom (pixel centres of the corners aligned)."""
    height, width = int(new_dims[0]), int(new_dims[1])
    if im.shape[-1] not in (1, 3):
        from scipy.ndimage import zoom

        factors = np.array((height, width), dtype=float) / np.array(im.shape[:2])
        return zoom(im, tuple(factors) + (1,), order=interp_order).astype(np.float32)
    low, high = im.min(), im.max()
    if not high > low:
        return np.full((height, width, im.shape[-1]), low, dtype=np.float32)
    from skimage.transform import resize

    unit = (im - low) / (high - low)
    resized = resize(unit, (height, width), order=interp_order, mode="constant",
                     anti_aliasing=False)
    return (resized * (high - low) + low).astype(np.float32)


def _crop_boxes(image_hw: np.ndarray, crop_hw: np.ndarray) -> np.ndarray:
    """(y0, x0, y1, x1) of the four corner crops and the centre crop, as ints."""
    boxes = np.empty((5, 4), dtype=int)
    for k, (y, x) in enumerate((y, x) for y in (0, image_hw[0] - crop_hw[0])
                               for x in (0, image_hw[1] - crop_hw[1])):
        boxes[k] = (y, x, y + crop_hw[0], x + crop_hw[1])
    centre = image_hw / 2.0
    boxes[4] = np.concatenate([centre - crop_hw / 2.0, centre + crop_hw / 2.0])
    return boxes


def oversample(images: Sequence[np.ndarray], crop_dims: Sequence[int]) -> np.ndarray:
    """Ten crops of each H x W x K image, float32, 10*N x h x w x K: the top-left,
    top-right, bottom-left, bottom-right and centre crops, then the same five
    mirrored left to right. REQUIRES: all images have the first one's shape."""
    image_shape = np.array(images[0].shape)
    crop_hw = np.array(crop_dims)
    boxes = _crop_boxes(image_shape[:2], crop_hw)
    crops = np.empty((10 * len(images), crop_hw[0], crop_hw[1], image_shape[-1]),
                     dtype=np.float32)
    for i, image in enumerate(images):
        five = np.stack([image[y0:y1, x0:x1, :] for y0, x0, y1, x1 in boxes])
        crops[10 * i:10 * i + 5] = five
        crops[10 * i + 5:10 * i + 10] = five[:, :, ::-1, :]
    return crops


# ---------------------------------------------------------------------------------------
# Transformer


class Transformer:
    """Turns H x W x K images into a net's K x H x W input and back.

    `inputs` maps each input blob's name to its shape (N, K, H, W). For each input,
    preprocess applies, in this order: conversion to float32, resizing to H x W,
    `transpose`, `channel_swap`, multiplication by `raw_scale`, subtraction of `mean`,
    multiplication by `input_scale`; deprocess undoes them in reverse. The settings
    live in the dicts of those names, keyed by input name. Naming an input that is
    not in `inputs` raises Exception."""

    def __init__(self, inputs: Mapping[str, Sequence[int]]) -> None:
        self.inputs = inputs
        self.transpose: dict[str, Sequence[int]] = {}
        self.channel_swap: dict[str, Sequence[int]] = {}
        self.raw_scale: dict[str, float] = {}
        self.mean: dict[str, np.ndarray] = {}
        self.input_scale: dict[str, float] = {}

    def _shape_of(self, in_: str) -> tuple[int, ...]:
        if in_ not in self.inputs:
            raise Exception(f"{in_} is not one of the net inputs: {self.inputs}")
        return tuple(self.inputs[in_])

    def preprocess(self, in_: str, data: np.ndarray) -> np.ndarray:
        """`data` (H' x W' x K) as input `in_` takes it (K x H x W, float32). The
        caller's array is never modified."""
        height_width = self._shape_of(in_)[2:]
        caffe_in = np.array(data, dtype=np.float32)
        if caffe_in.shape[:2] != height_width:
            caffe_in = resize_image(caffe_in, height_width)
        if (order := self.transpose.get(in_)) is not None:
            caffe_in = caffe_in.transpose(order)
        if (swap := self.channel_swap.get(in_)) is not None:
            caffe_in = caffe_in[swap, :, :]
        if (raw_scale := self.raw_scale.get(in_)) is not None:
            caffe_in *= raw_scale
        if (mean := self.mean.get(in_)) is not None:
            caffe_in -= mean
        if (input_scale := self.input_scale.get(in_)) is not None:
            caffe_in *= input_scale
        return caffe_in

    def deprocess(self, in_: str, data: np.ndarray) -> np.ndarray:
        """The image preprocess made `data` from (without the resizing); `data` is
        squeezed first, so a 1 x K x H x W batch gives an H x W x K image."""
        self._shape_of(in_)
        image = data.copy().squeeze()
        if (input_scale := self.input_scale.get(in_)) is not None:
            image /= input_scale
        if (mean := self.mean.get(in_)) is not None:
            image += mean
        if (raw_scale := self.raw_scale.get(in_)) is not None:
            image /= raw_scale
        if (swap := self.channel_swap.get(in_)) is not None:
            image = image[np.argsort(swap), :, :]
        if (order := self.transpose.get(in_)) is not None:
            image = image.transpose(np.argsort(order))
        return image

    def set_transpose(self, in_: str, order: Sequence[int]) -> None:
        """Axis order taking the image to K x H x W, e.g. (2, 0, 1) for H x W x K.
        Raises Exception unless `order` has one entry per axis of an image."""
        if len(order) != len(self._shape_of(in_)) - 1:
            raise Exception("Transpose order needs to have the same number of dimensions "
                            "as the input.")
        self.transpose[in_] = order

    def set_channel_swap(self, in_: str, order: Sequence[int]) -> None:
        """Channel order applied after the transpose, e.g. (2, 1, 0) for RGB to BGR.
        Raises Exception unless `order` has one entry per input channel."""
        if len(order) != self._shape_of(in_)[1]:
            raise Exception("Channel swap needs to have the same number of dimensions as "
                            "the input channels.")
        self.channel_swap[in_] = order

    def set_raw_scale(self, in_: str, scale: float) -> None:
        """Factor applied before the mean is subtracted (255 for models trained on
        [0, 255] pixels fed [0, 1] images)."""
        self._shape_of(in_)
        self.raw_scale[in_] = scale

    def set_mean(self, in_: str, mean: np.ndarray) -> None:
        """Mean subtracted after raw scaling: one value per channel (shape (K,)), or a
        K x H' x W' (or H' x W') image, resized to the input's H x W when it differs.
        Raises ValueError for a channel count or a shape that does not fit."""
        shape = self._shape_of(in_)
        if mean.ndim == 1:
            if mean.shape[0] != shape[1]:
                raise ValueError("Mean channels incompatible with input.")
            mean = mean[:, np.newaxis, np.newaxis]
        else:
            # An H' x W' mean counts as one channel; it is kept 2-D when it fits.
            as_image = mean.reshape((1, *mean.shape)) if mean.ndim == 2 else mean
            if as_image.ndim != 3:
                raise ValueError("Mean shape invalid")
            if as_image.shape != shape[1:]:
                mean = _resized_mean(as_image, shape[2:])
        self.mean[in_] = mean

    def set_input_scale(self, in_: str, scale: float) -> None:
        """Factor applied last, after the mean is subtracted."""
        self._shape_of(in_)
        self.input_scale[in_] = scale


def _resized_mean(mean: np.ndarray, height_width: Sequence[int]) -> np.ndarray:
    """A K x H' x W' mean image resized to K x H x W, its value range kept."""
    low, high = mean.min(), mean.max()
    if not high > low:
        return np.full((mean.shape[0], *height_width), low, dtype=mean.dtype)
    unit = (mean - low) / (high - low)
    resized = resize_image(unit.transpose(1, 2, 0), height_width).transpose(2, 0, 1)
    return resized * (high - low) + low
