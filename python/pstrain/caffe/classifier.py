"""pycaffe's Classifier: a Net that classifies H x W x K images, from a whole-image
centre crop or averaged over ten crops (corners, centre and their mirrors)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import io
from .proto import caffe_pb2
from .pycaffe import Net

__all__ = ["Classifier"]


def _input_transformer(net: Any, mean: np.ndarray | None, input_scale: float | None,
                       raw_scale: float | None, channel_swap: Sequence[int] | None) -> Any:
    """An io.Transformer for the net's first input: H x W x K images transposed to
    K x H x W, then the given settings (those left None are not applied)."""
    name = net.inputs[0]
    transformer = io.Transformer({name: net.blobs[name].data.shape})
    transformer.set_transpose(name, (2, 0, 1))
    if mean is not None:
        transformer.set_mean(name, mean)
    if input_scale is not None:
        transformer.set_input_scale(name, input_scale)
    if raw_scale is not None:
        transformer.set_raw_scale(name, raw_scale)
    if channel_swap is not None:
        transformer.set_channel_swap(name, channel_swap)
    return transformer


class Classifier(Net):
    """The TEST-phase net of `model_file` with the weights of `pretrained_file`, and the
    preprocessing to feed it images.

    Images are first resized to `image_dims` (height, width; the net input's own
    size when not given), then cropped to the input's size. `mean`, `input_scale`,
    `raw_scale` and `channel_swap` are the io.Transformer settings of the input."""

    def __init__(self, model_file: str, pretrained_file: str | None,
                 image_dims: Sequence[int] | None = None, mean: np.ndarray | None = None,
                 input_scale: float | None = None, raw_scale: float | None = None,
                 channel_swap: Sequence[int] | None = None) -> None:
        Net.__init__(self, model_file, caffe_pb2.TEST, weights=pretrained_file)
        self.transformer = _input_transformer(self, mean, input_scale, raw_scale,
                                              channel_swap)
        self.crop_dims = np.array(self.blobs[self.inputs[0]].data.shape[2:])
        if image_dims is None or len(image_dims) == 0:
            image_dims = self.crop_dims
        self.image_dims = image_dims

    def _centre_crop(self, images: np.ndarray) -> np.ndarray:
        """The crop_dims-sized centre of each image of an N x H x W x K batch."""
        centre = np.array(self.image_dims) / 2.0
        half = self.crop_dims / 2.0
        y0, x0, y1, x1 = np.concatenate([centre - half, centre + half]).astype(int)
        return images[:, y0:y1, x0:x1, :]

    def predict(self, inputs: Sequence[np.ndarray], oversample: bool = True) -> np.ndarray:
        """Class probabilities (N x C, the net's first output) of N H x W x K images.

        With `oversample`, each image's prediction is the mean over its ten crops
        (io.oversample); without, the centre crop alone decides."""
        name = self.inputs[0]
        resized = np.zeros((len(inputs), self.image_dims[0], self.image_dims[1],
                            inputs[0].shape[2]), dtype=np.float32)
        for i, image in enumerate(inputs):
            resized[i] = io.resize_image(image, self.image_dims)
        crops = io.oversample(resized, self.crop_dims) if oversample else \
            self._centre_crop(resized)
        caffe_in = np.zeros((crops.shape[0], crops.shape[3], crops.shape[1], crops.shape[2]),
                            dtype=np.float32)
        for i, crop in enumerate(crops):
            caffe_in[i] = self.transformer.preprocess(name, crop)
        predictions = self.forward_all(**{name: caffe_in})[self.outputs[0]]
        if oversample:
            predictions = predictions.reshape((len(predictions) // 10, 10, -1)).mean(1)
        return predictions
