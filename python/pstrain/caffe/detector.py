"""pycaffe's Detector: a Net that classifies windows of images (R-CNN style), each
window warped to the net's input size, optionally with a border of surrounding
context."""
from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

import numpy as np

from . import io
from .classifier import _input_transformer
from .proto import caffe_pb2
from .pycaffe import Net

__all__ = ["Detector"]


class Detector(Net):
    """The TEST-phase net of `model_file` with the weights of `pretrained_file`.

    `mean`, `input_scale`, `raw_scale` and `channel_swap` are the io.Transformer
    settings of the input. With `context_pad` p, a window is grown so that, once
    warped to the input's (square) size, a p-pixel border around it shows the
    image around the window; what falls outside the image is filled with the mean."""

    def __init__(self, model_file: str, pretrained_file: str | None,
                 mean: np.ndarray | None = None, input_scale: float | None = None,
                 raw_scale: float | None = None, channel_swap: Sequence[int] | None = None,
                 context_pad: int | None = None) -> None:
        Net.__init__(self, model_file, caffe_pb2.TEST, weights=pretrained_file)
        self.transformer = _input_transformer(self, mean, input_scale, raw_scale,
                                              channel_swap)
        self.configure_crop(context_pad)

    def detect_windows(self, images_windows: Iterable[tuple[str, Sequence[Any]]]
                       ) -> list[dict[str, Any]]:
        """Classifies windows (ymin, xmin, ymax, xmax) of image files: `images_windows`
        pairs each file name with its windows. Returns one dict per window, in
        order: {'window', 'prediction' (the net's first output), 'filename'}."""
        images_windows = [(name, list(windows)) for name, windows in images_windows]
        crops = []
        for filename, windows in images_windows:
            image = io.load_image(filename).astype(np.float32)
            crops.extend(self.crop(image, window) for window in windows)
        name = self.inputs[0]
        caffe_in = np.zeros((len(crops), crops[0].shape[2]) + self.blobs[name].data.shape[2:],
                            dtype=np.float32)
        for i, crop in enumerate(crops):
            caffe_in[i] = self.transformer.preprocess(name, crop)
        predictions = self.forward_all(**{name: caffe_in})[self.outputs[0]]
        pairs = ((filename, window) for filename, windows in images_windows
                 for window in windows)
        return [{"window": window, "prediction": prediction, "filename": filename}
                for (filename, window), prediction in zip(pairs, predictions)]

    def detect_selective_search(self, image_fnames: Sequence[str]) -> list[dict[str, Any]]:
        """detect_windows over the Selective Search proposals of each image (needs the
        selective_search_ijcv_with_python package and its MATLAB code)."""
        import selective_search_ijcv_with_python as selective_search

        paths = [os.path.abspath(f) for f in image_fnames]
        windows = selective_search.get_windows(paths, cmd="selective_search_rcnn")
        return self.detect_windows(zip(paths, windows))

    def crop(self, im: np.ndarray, window: Sequence[float]) -> np.ndarray:
        """The window (ymin, xmin, ymax, xmax; ymax and xmax exclusive) of an H x W x K
        image; with context padding, the grown window already warped to the input
        size, mean-filled where it leaves the image."""
        if not self.context_pad:
            y0, x0, y1, x1 = (int(v) for v in window[:4])
            return im[y0:y1, x0:x1]
        return self._crop_with_context(im, np.array(window, dtype=float))

    def _crop_with_context(self, im: np.ndarray, box: np.ndarray) -> np.ndarray:
        crop_size = self.blobs[self.inputs[0]].data.shape[3]  # a square input is assumed
        scale = crop_size / (1.0 * crop_size - self.context_pad * 2)
        half_h = (box[2] - box[0] + 1) / 2.0
        half_w = (box[3] - box[1] + 1) / 2.0
        centre = np.array((box[0] + half_h, box[1] + half_w))
        box = np.round(np.tile(centre, 2) + scale * np.array((-half_h, -half_w, half_h,
                                                               half_w)))
        scale_h = crop_size / (box[2] - box[0] + 1)
        scale_w = crop_size / (box[3] - box[1] + 1)
        pad_y = round(max(0, -box[0]) * scale_h)  # rows above the image
        pad_x = round(max(0, -box[1]) * scale_w)  # columns left of it
        im_h, im_w = im.shape[:2]
        box = np.clip(box, 0.0, [im_h, im_w, im_h, im_w])
        clip_h = box[2] - box[0] + 1
        clip_w = box[3] - box[1] + 1
        if not (clip_h > 0 and clip_w > 0):
            raise AssertionError(f"window {box} leaves no part of the image")
        crop_h = min(int(round(clip_h * scale_h)), crop_size - pad_y)
        crop_w = min(int(round(clip_w * scale_w)), crop_size - pad_x)
        y0, x0, y1, x1 = box.astype(int)
        inside = io.resize_image(im[y0:y1, x0:x1], (crop_h, crop_w))
        crop = np.ones(self.crop_dims, dtype=np.float32) * self.crop_mean
        crop[pad_y:pad_y + crop_h, pad_x:pad_x + crop_w] = inside
        return crop

    def configure_crop(self, context_pad: int | None) -> None:
        """Sets crop_dims (the input's H x W x K) and context_pad; with context, also
        crop_mean, the mean in image layout and scale (before channel swap and raw
        scaling) that fills context outside the image (zeros without a mean)."""
        name = self.inputs[0]
        to_image = np.argsort(self.transformer.transpose[name])
        self.crop_dims = np.array(self.blobs[name].data.shape[1:])[to_image]
        self.context_pad = context_pad
        if not self.context_pad:
            return
        mean = self.transformer.mean.get(name)
        if mean is None:
            self.crop_mean = np.zeros(self.crop_dims, dtype=np.float32)
            return
        crop_mean = mean.copy().transpose(to_image)
        channel_swap = self.transformer.channel_swap.get(name)
        if channel_swap is not None:
            crop_mean = crop_mean[:, :, np.argsort(channel_swap)]
        raw_scale = self.transformer.raw_scale.get(name)
        if raw_scale is not None:
            crop_mean /= raw_scale
        self.crop_mean = crop_mean
