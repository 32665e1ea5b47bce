"""pstrain.caffe's Classifier and Detector on tiny deploy nets whose weights are set
here and saved with Net.save, against the same computation done with numpy; and
net_spec nets run by Net, as Caffe's own net_spec tests do.

These tests need the compiled extension (pstrain._core): pstrain.caffe is imported
when a test runs."""
from __future__ import annotations

import pathlib
from typing import Any

import numpy as np
import pytest

MEAN_BGR = np.array([100.0, 110.0, 120.0])
INPUT_SCALE = 0.01

CLASSIFIER_NET = """
name: "TinyClassifier"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 5 } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
"""

DETECTOR_NET = """
name: "TinyDetector"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 3 kernel_size: 4 } }
layer { name: "prob" type: "Softmax" bottom: "conv" top: "prob" }
"""


@pytest.fixture
def caffe() -> Any:
    import pstrain.caffe

    return pstrain.caffe


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max())
    return e / e.sum()


def preprocess_by_hand(crop: np.ndarray) -> np.ndarray:
    """H x W x RGB in [0, 1] -> BGR x H x W, times 255, minus the mean, times 0.01."""
    bgr = crop.transpose(2, 0, 1)[::-1].astype(np.float64)
    return (bgr * 255.0 - MEAN_BGR[:, None, None]) * INPUT_SCALE


class Model:
    """A deploy prototxt and its .caffemodel with weights W, b of the given shapes."""

    def __init__(self, caffe: Any, folder: pathlib.Path, text: str, layer: str,
                 weight_shape: tuple[int, ...], seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.deploy = folder / f"{layer}_deploy.prototxt"
        self.deploy.write_text(text)
        self.weights = folder / f"{layer}.caffemodel"
        self.W = rng.normal(0.0, 0.3, size=weight_shape).astype(np.float32)
        self.b = rng.normal(0.0, 0.3, size=weight_shape[0]).astype(np.float32)
        net = caffe.Net(str(self.deploy), caffe.TEST)
        net.params[layer][0].data[...] = self.W
        net.params[layer][1].data[...] = self.b
        net.save(str(self.weights))

    def probabilities(self, crop: np.ndarray) -> np.ndarray:
        """The net's output for one H x W x RGB crop, computed with numpy."""
        x = preprocess_by_hand(crop).ravel()
        return softmax(self.W.reshape(self.W.shape[0], -1).astype(np.float64) @ x + self.b)


@pytest.fixture
def ip_model(caffe: Any, tmp_path: pathlib.Path) -> Model:
    return Model(caffe, tmp_path, CLASSIFIER_NET, "ip", (5, 3 * 4 * 4), seed=10)


@pytest.fixture
def conv_model(caffe: Any, tmp_path: pathlib.Path) -> Model:
    return Model(caffe, tmp_path, DETECTOR_NET, "conv", (3, 3, 4, 4), seed=11)


def images(count: int, size: int = 6, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(size=(size, size, 3)).astype(np.float32) for _ in range(count)]


# --- Classifier -------------------------------------------------------------------------

def make_classifier(caffe: Any, model: Model, **kwargs: Any) -> Any:
    return caffe.Classifier(str(model.deploy), str(model.weights), mean=MEAN_BGR,
                            input_scale=INPUT_SCALE, raw_scale=255.0, channel_swap=(2, 1, 0),
                            **kwargs)


def test_classifier_setup(caffe: Any, ip_model: Model) -> None:
    classifier = make_classifier(caffe, ip_model, image_dims=(6, 6))
    assert isinstance(classifier, caffe.Net)
    assert classifier.inputs == ["data"] and classifier.outputs == ["prob"]
    assert classifier.crop_dims.tolist() == [4, 4]
    assert tuple(classifier.image_dims) == (6, 6)
    transformer = classifier.transformer
    assert tuple(transformer.transpose["data"]) == (2, 0, 1)
    assert tuple(transformer.channel_swap["data"]) == (2, 1, 0)
    assert transformer.raw_scale["data"] == 255.0
    assert transformer.input_scale["data"] == INPUT_SCALE
    np.testing.assert_array_equal(transformer.mean["data"], MEAN_BGR[:, None, None])
    np.testing.assert_array_equal(classifier.params["ip"][0].data, ip_model.W)
    np.testing.assert_array_equal(classifier.params["ip"][1].data, ip_model.b)
    assert tuple(make_classifier(caffe, ip_model).image_dims) == (4, 4)


def ten_crops(image: np.ndarray) -> list[np.ndarray]:
    """Corners, centre (rows and columns 1:5 of a 6 x 6 image) and their mirrors."""
    five = [image[0:4, 0:4], image[0:4, 2:6], image[2:6, 0:4], image[2:6, 2:6], image[1:5, 1:5]]
    return five + [crop[:, ::-1] for crop in five]


def test_classifier_oversampled_prediction(caffe: Any, ip_model: Model) -> None:
    classifier = make_classifier(caffe, ip_model, image_dims=(6, 6))
    batch = images(3)
    predictions = classifier.predict(batch)   # 30 crops through a batch of 2
    expected = [np.mean([ip_model.probabilities(c) for c in ten_crops(image)], axis=0)
                for image in batch]
    assert predictions.shape == (3, 5)
    np.testing.assert_allclose(predictions, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(predictions.sum(axis=1), 1.0, atol=1e-5)


def test_classifier_centre_crop_prediction(caffe: Any, ip_model: Model) -> None:
    classifier = make_classifier(caffe, ip_model, image_dims=(6, 6))
    batch = images(3, seed=1)
    predictions = classifier.predict(batch, oversample=False)   # last batch padded
    expected = [ip_model.probabilities(image[1:5, 1:5]) for image in batch]
    assert predictions.shape == (3, 5)
    np.testing.assert_allclose(predictions, expected, rtol=1e-4, atol=1e-5)


def test_classifier_resizes_to_the_input_by_default(caffe: Any, ip_model: Model) -> None:
    classifier = make_classifier(caffe, ip_model)
    batch = images(1, size=8, seed=2)
    predictions = classifier.predict(batch, oversample=False)
    resized = caffe.io.resize_image(batch[0], (4, 4))
    np.testing.assert_allclose(predictions[0], ip_model.probabilities(resized), rtol=1e-4,
                               atol=1e-5)


# --- Detector ---------------------------------------------------------------------------

def write_image(path: pathlib.Path, seed: int = 3) -> tuple[str, np.ndarray]:
    """An 8 x 8 RGB PNG and the image load_image gives for it (pixels / 255)."""
    import skimage.io

    pixels = np.random.default_rng(seed).integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
    skimage.io.imsave(str(path), pixels, check_contrast=False)
    return str(path), pixels.astype(np.float32) / 255.0


def make_detector(caffe: Any, model: Model, **kwargs: Any) -> Any:
    return caffe.Detector(str(model.deploy), str(model.weights), mean=MEAN_BGR,
                          input_scale=INPUT_SCALE, raw_scale=255.0, channel_swap=(2, 1, 0),
                          **kwargs)


def test_detector_windows(caffe: Any, conv_model: Model, tmp_path: pathlib.Path) -> None:
    detector = make_detector(caffe, conv_model)
    assert isinstance(detector, caffe.Net)
    assert detector.crop_dims.tolist() == [4, 4, 3] and not detector.context_pad
    first, image1 = write_image(tmp_path / "first.png", seed=3)
    second, image2 = write_image(tmp_path / "second.png", seed=4)
    windows1 = [np.array([0, 0, 4, 4]), np.array([2, 3, 6, 7])]
    windows2 = [np.array([4, 4, 8, 8]), np.array([1, 0, 6, 6])]   # the last one is 5 x 6
    # A one-pass iterator, as detect_selective_search hands over.
    detections = detector.detect_windows(iter([(first, windows1), (second, windows2)]))
    assert [d["filename"] for d in detections] == [first, first, second, second]
    assert [d["window"] is w for d, w in zip(detections, windows1 + windows2)] == [True] * 4
    crops = [image1[0:4, 0:4], image1[2:6, 3:7], image2[4:8, 4:8],
             caffe.io.resize_image(image2[1:6, 0:6], (4, 4))]
    for detection, crop in zip(detections, crops):
        assert detection["prediction"].shape == (3, 1, 1)
        np.testing.assert_allclose(detection["prediction"].ravel(),
                                   conv_model.probabilities(crop), rtol=1e-4, atol=1e-5)


def test_detector_crop_without_context(caffe: Any, conv_model: Model) -> None:
    detector = make_detector(caffe, conv_model)
    image = np.arange(8 * 8 * 3, dtype=np.float32).reshape(8, 8, 3)
    np.testing.assert_array_equal(detector.crop(image, np.array([1, 2, 5, 7])), image[1:5, 2:7])


def test_detector_context_padding(caffe: Any, conv_model: Model, tmp_path: pathlib.Path) -> None:
    detector = make_detector(caffe, conv_model, context_pad=1)
    assert detector.context_pad == 1
    # The mean before channel swap and raw scaling: RGB order, in [0, 1].
    np.testing.assert_allclose(detector.crop_mean.reshape(3), MEAN_BGR[::-1] / 255.0)
    path, image = write_image(tmp_path / "context.png", seed=5)
    # Window rows/columns 2..4 (3 pixels) grown by 4 / (4 - 2) about its centre 3.5
    # gives 0.5..6.5, rounded to 0..6: all inside the image.
    inside = detector.crop(image, np.array([2, 2, 4, 4]))
    np.testing.assert_allclose(inside, caffe.io.resize_image(image[0:6, 0:6], (4, 4)),
                               atol=1e-6)
    # Window 0..2 grows to -2..4: scaled by 4 / 7, one row and column of mean, then
    # the image's rows and columns 0..4 in the remaining 3 x 3.
    corner = detector.crop(image, np.array([0, 0, 2, 2]))
    assert corner.shape == (4, 4, 3)
    np.testing.assert_allclose(corner[0], np.tile(MEAN_BGR[::-1] / 255.0, (4, 1)), atol=1e-6)
    np.testing.assert_allclose(corner[:, 0], np.tile(MEAN_BGR[::-1] / 255.0, (4, 1)),
                               atol=1e-6)
    np.testing.assert_allclose(corner[1:, 1:], caffe.io.resize_image(image[0:4, 0:4], (3, 3)),
                               atol=1e-6)
    detection, = detector.detect_windows([(path, [np.array([0, 0, 2, 2])])])
    np.testing.assert_allclose(detection["prediction"].ravel(),
                               conv_model.probabilities(corner), rtol=1e-4, atol=1e-5)


def test_detector_context_without_mean_pads_with_zeros(caffe: Any, conv_model: Model) -> None:
    detector = caffe.Detector(str(conv_model.deploy), str(conv_model.weights), context_pad=1)
    assert detector.crop_mean.shape == (4, 4, 3) and not detector.crop_mean.any()
    image = np.ones((8, 8, 3), dtype=np.float32)
    corner = detector.crop(image, np.array([0, 0, 2, 2]))
    assert (corner[0] == 0).all() and (corner[1:, 1:] == 1).all()


# --- net_spec nets in Net (Caffe's net_spec tests) --------------------------------------

def write_net(caffe: Any, folder: pathlib.Path, proto: Any) -> Any:
    path = folder / "net.prototxt"
    path.write_text(str(proto))
    return caffe.Net(str(path), caffe.TEST)


def test_net_spec_lenet_runs(caffe: Any, tmp_path: pathlib.Path) -> None:
    L, P = caffe.layers, caffe.params
    n = caffe.NetSpec()
    n.data, n.label = L.DummyData(shape=[dict(dim=[4, 1, 28, 28]), dict(dim=[4, 1, 1, 1])],
                                  transform_param=dict(scale=1. / 255), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20,
                            weight_filler=dict(type="xavier"))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.conv2 = L.Convolution(n.pool1, kernel_size=5, num_output=50,
                            weight_filler=dict(type="xavier"))
    n.pool2 = L.Pooling(n.conv2, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.ip1 = L.InnerProduct(n.pool2, num_output=500, weight_filler=dict(type="xavier"))
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.ip2 = L.InnerProduct(n.relu1, num_output=10, weight_filler=dict(type="xavier"))
    n.loss = L.SoftmaxWithLoss(n.ip2, n.label)
    net = write_net(caffe, tmp_path, n.to_proto())
    assert len(net.layers) == 9
    assert list(net.blobs) == ["data", "label", "conv1", "pool1", "conv2", "pool2", "ip1",
                               "ip2", "loss"]
    assert net.blobs["pool2"].data.shape == (4, 50, 4, 4)
    assert np.isfinite(net.forward()["loss"]).all()

