"""pstrain.caffe.io: blob/datum conversions, image resizing and loading, oversampling
and the Transformer, against values computed here with numpy."""
from __future__ import annotations

import numpy as np
import pytest

from pstrain.caffe import io
from pstrain.caffe.proto import caffe_pb2


# --- BlobProto -------------------------------------------------------------------------

def test_blobproto_legacy_shape_is_4d() -> None:
    blob = caffe_pb2.BlobProto()
    blob.data.extend([0.0] * 100)
    blob.num, blob.channels, blob.height, blob.width = 1, 1, 10, 10
    assert io.blobproto_to_array(blob).shape == (1, 1, 10, 10)


def test_blobproto_legacy_shape_counts_unset_fields_as_zero() -> None:
    blob = caffe_pb2.BlobProto(height=0)
    assert io.blobproto_to_array(blob).shape == (0, 0, 0, 0)


def test_blobproto_shape_dims() -> None:
    blob = caffe_pb2.BlobProto()
    blob.data.extend(np.arange(6.0).tolist())
    blob.shape.dim.extend([2, 3])
    array = io.blobproto_to_array(blob)
    assert array.dtype == np.float64
    np.testing.assert_array_equal(array, [[0, 1, 2], [3, 4, 5]])


def test_blobproto_without_shape_raises_value_error() -> None:
    blob = caffe_pb2.BlobProto()
    blob.data.extend([0.0] * 100)
    with pytest.raises(ValueError):
        io.blobproto_to_array(blob)


def test_blobproto_single_value_without_shape_is_a_scalar() -> None:
    blob = caffe_pb2.BlobProto()
    blob.data.append(123.0)
    array = io.blobproto_to_array(blob)
    assert array.shape == () and array == 123


def test_array_to_blobproto_round_trip_with_diff() -> None:
    data = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 8
    diff = -data
    blob = io.array_to_blobproto(data, diff)
    assert list(blob.shape.dim) == [2, 3, 4]
    assert not blob.HasField("num")
    assert list(blob.data) == data.ravel().tolist()   # k/8 is exact in float32
    np.testing.assert_array_equal(io.blobproto_to_array(blob), data)
    np.testing.assert_array_equal(io.blobproto_to_array(blob, return_diff=True), diff)


def test_array_to_blobproto_without_diff_leaves_diff_empty() -> None:
    blob = io.array_to_blobproto(np.ones((3,), dtype=np.int32))
    assert list(blob.data) == [1.0, 1.0, 1.0] and len(blob.diff) == 0


def test_array_to_blobproto_stores_float32() -> None:
    blob = io.array_to_blobproto(np.array([0.1]))
    assert blob.data[0] == pytest.approx(float(np.float32(0.1)), abs=0)


def test_blobprotovector_round_trip() -> None:
    arrays = [np.arange(6.0).reshape(2, 3), np.array([[[5.0]]]), np.zeros((0, 2))]
    serialized = io.arraylist_to_blobprotovector_str(arrays)
    assert isinstance(serialized, bytes)
    vector = caffe_pb2.BlobProtoVector.FromString(serialized)
    assert [list(b.shape.dim) for b in vector.blobs] == [[2, 3], [1, 1, 1], [0, 2]]
    back = io.blobprotovector_str_to_arraylist(serialized)
    assert len(back) == 3
    for original, restored in zip(arrays, back):
        assert restored.shape == original.shape
        np.testing.assert_array_equal(restored, original)


# --- Datum -----------------------------------------------------------------------------

def test_uint8_datum_holds_bytes() -> None:
    image = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    datum = io.array_to_datum(image, label=7)
    assert (datum.channels, datum.height, datum.width) == (2, 3, 4)
    assert datum.data == bytes(range(24)) and len(datum.float_data) == 0
    assert datum.label == 7
    back = io.datum_to_array(datum)
    assert back.dtype == np.uint8 and back.flags.writeable
    np.testing.assert_array_equal(back, image)


def test_float_datum_holds_float_data() -> None:
    image = (np.arange(12, dtype=np.float32).reshape(3, 2, 2) - 6) / 4
    datum = io.array_to_datum(image)
    assert datum.data == b"" and list(datum.float_data) == image.ravel().tolist()
    assert not datum.HasField("label")
    back = io.datum_to_array(datum)
    assert back.dtype == np.float64
    np.testing.assert_array_equal(back, image)


def test_datum_without_label_is_smaller() -> None:
    with_label = io.array_to_datum(np.ones((10, 10, 3)), label=1)
    without = io.array_to_datum(np.ones((10, 10, 3)))
    assert len(with_label.SerializeToString()) > len(without.SerializeToString())


@pytest.mark.parametrize("shape", [(4, 4), (1, 2, 3, 4)])
def test_datum_needs_a_3d_array(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="Incorrect array shape"):
        io.array_to_datum(np.zeros(shape))


# --- resize_image ----------------------------------------------------------------------

def bilinear_edge_aligned(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resampling of an H x W x K image in [0, 1], pixel edges aligned
    (output pixel i samples input coordinate (i + 0.5) * in / out - 0.5), zeros beyond
    the border, result clipped to [0, 1]: what resize_image does to a normalised
    image."""
    in_h, in_w = image.shape[:2]
    padded = np.zeros((in_h + 2, in_w + 2, image.shape[2]))
    padded[1:-1, 1:-1] = image
    out = np.empty((height, width, image.shape[2]))
    for i in range(height):
        y = (i + 0.5) * in_h / height - 0.5 + 1   # +1: the zero border
        y0 = int(np.floor(y))
        dy = y - y0
        for j in range(width):
            x = (j + 0.5) * in_w / width - 0.5 + 1
            x0 = int(np.floor(x))
            dx = x - x0
            out[i, j] = ((1 - dy) * (1 - dx) * padded[y0, x0] + (1 - dy) * dx * padded[y0, x0 + 1]
                         + dy * (1 - dx) * padded[y0 + 1, x0] + dy * dx * padded[y0 + 1, x0 + 1])
    return np.clip(out, 0.0, 1.0)


def test_resize_two_by_two_to_four_by_four_by_hand() -> None:
    image = np.array([[0.0, 1.0], [1.0, 1.0]])[:, :, np.newaxis]
    # Output (0, 3) samples (-0.25, 1.25): 0.75 * 0.75 of input (0, 1), the rest is border.
    expected = np.array([[0.0, 0.1875, 0.5625, 0.5625],
                         [0.1875, 0.4375, 0.8125, 0.75],
                         [0.5625, 0.8125, 0.9375, 0.75],
                         [0.5625, 0.75, 0.75, 0.5625]])
    resized = io.resize_image(image, (4, 4))
    assert resized.shape == (4, 4, 1) and resized.dtype == np.float32
    np.testing.assert_allclose(resized[:, :, 0], expected, atol=1e-6)


@pytest.mark.parametrize("new_dims", [(9, 4), (3, 11), (5, 7), (2, 2)])
def test_resize_three_channels_scales_to_unit_range_and_back(new_dims: tuple[int, int]) -> None:
    rng = np.random.default_rng(1)
    image = rng.uniform(-40, 200, size=(5, 7, 3)).astype(np.float32)
    low, high = image.min(), image.max()
    expected = bilinear_edge_aligned((image - low) / (high - low), *new_dims) * (high - low) + low
    resized = io.resize_image(image, new_dims)
    assert resized.shape == (*new_dims, 3) and resized.dtype == np.float32
    np.testing.assert_allclose(resized, expected, rtol=1e-5, atol=1e-3)


def test_resize_constant_image_stays_constant() -> None:
    resized = io.resize_image(np.full((3, 5, 3), 7.5), (4, 2))
    assert resized.shape == (4, 2, 3) and resized.dtype == np.float32
    assert (resized == 7.5).all()


def test_resize_other_channel_counts_align_corner_pixels() -> None:
    # Two channels: spline zoom with the corner pixel centres aligned, so 2 -> 3 puts
    # the average of the neighbours in the middle.
    image = np.stack([np.array([[0.0, 2.0], [4.0, 6.0]]), np.array([[1.0, 1.0], [1.0, 3.0]])],
                     axis=2)
    resized = io.resize_image(image, (3, 3))
    assert resized.shape == (3, 3, 2) and resized.dtype == np.float32
    np.testing.assert_allclose(resized[:, :, 0], [[0, 1, 2], [2, 3, 4], [4, 5, 6]], atol=1e-6)
    np.testing.assert_allclose(resized[:, :, 1], [[1, 1, 1], [1, 1.5, 2], [1, 2, 3]], atol=1e-6)


# --- oversample ------------------------------------------------------------------------

def test_oversample_corners_centre_and_mirrors() -> None:
    first = np.arange(20, dtype=np.float64).reshape(4, 5, 1)
    second = 100 + first
    crops = io.oversample([first, second], (2, 3))
    assert crops.shape == (20, 2, 3, 1) and crops.dtype == np.float32
    for k, image in enumerate((first, second)):
        # Centre (2, 2.5) +- (1, 1.5) -> rows 1:3, columns 1:4.
        five = [image[0:2, 0:3], image[0:2, 2:5], image[2:4, 0:3], image[2:4, 2:5],
                image[1:3, 1:4]]
        for i, crop in enumerate(five):
            np.testing.assert_array_equal(crops[10 * k + i], crop)
            np.testing.assert_array_equal(crops[10 * k + 5 + i], crop[:, ::-1])


# --- Transformer -----------------------------------------------------------------------

SHAPE = (1, 3, 4, 5)   # N, K, H, W


def full_transformer() -> io.Transformer:
    transformer = io.Transformer({"data": SHAPE})
    transformer.set_transpose("data", (2, 0, 1))
    transformer.set_channel_swap("data", (2, 1, 0))
    transformer.set_raw_scale("data", 255.0)
    transformer.set_mean("data", np.array([10.0, 20.0, 30.0]))
    transformer.set_input_scale("data", 0.5)
    return transformer


def test_preprocess_by_hand() -> None:
    image = np.random.default_rng(2).uniform(size=(4, 5, 3))
    original = image.copy()
    out = full_transformer().preprocess("data", image)
    expected = (image.transpose(2, 0, 1)[[2, 1, 0]] * 255.0
                - np.array([10.0, 20.0, 30.0])[:, None, None]) * 0.5
    assert out.shape == (3, 4, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(image, original)   # the caller's image is untouched


def test_preprocess_leaves_a_float32_image_untouched() -> None:
    transformer = io.Transformer({"data": SHAPE})
    transformer.set_transpose("data", (2, 0, 1))
    transformer.set_raw_scale("data", 2.0)
    image = np.ones((4, 5, 3), dtype=np.float32)
    out = transformer.preprocess("data", image)
    assert (out == 2.0).all() and (image == 1.0).all()


def test_preprocess_without_settings_only_converts() -> None:
    image = np.arange(60).reshape(4, 5, 3)
    out = io.Transformer({"data": [1, 3, 4, 5]}).preprocess("data", image)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, image)


def test_preprocess_resizes_to_the_input_size() -> None:
    transformer = io.Transformer({"data": SHAPE})
    transformer.set_transpose("data", (2, 0, 1))
    image = np.random.default_rng(3).uniform(size=(8, 10, 3)).astype(np.float32)
    out = transformer.preprocess("data", image)
    np.testing.assert_allclose(out, io.resize_image(image, (4, 5)).transpose(2, 0, 1))


def test_deprocess_inverts_preprocess() -> None:
    transformer = full_transformer()
    image = np.random.default_rng(4).uniform(size=(4, 5, 3))
    batch = transformer.preprocess("data", image)[np.newaxis]   # 1 x K x H x W
    restored = transformer.deprocess("data", batch)
    assert restored.shape == (4, 5, 3)
    np.testing.assert_allclose(restored, image, atol=1e-5)
    assert batch.shape == (1, 3, 4, 5)   # deprocess works on a copy


def test_deprocess_by_hand() -> None:
    transformer = full_transformer()
    data = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    expected = ((data / 0.5 + np.array([10.0, 20.0, 30.0])[:, None, None]) / 255.0)
    expected = expected[[2, 1, 0]].transpose(1, 2, 0)
    np.testing.assert_allclose(transformer.deprocess("data", data), expected)


def test_unknown_input_raises() -> None:
    transformer = io.Transformer({"data": SHAPE})
    for call in (lambda: transformer.preprocess("label", np.zeros((4, 5, 3))),
                 lambda: transformer.deprocess("label", np.zeros((3, 4, 5))),
                 lambda: transformer.set_transpose("label", (2, 0, 1)),
                 lambda: transformer.set_channel_swap("label", (2, 1, 0)),
                 lambda: transformer.set_raw_scale("label", 255),
                 lambda: transformer.set_mean("label", np.zeros(3)),
                 lambda: transformer.set_input_scale("label", 2)):
        with pytest.raises(Exception, match="label is not one of the net inputs"):
            call()


def test_setting_checks() -> None:
    transformer = io.Transformer({"data": SHAPE})
    with pytest.raises(Exception, match="Transpose order needs to have the same number"):
        transformer.set_transpose("data", (1, 0))
    with pytest.raises(Exception, match="Channel swap needs to have the same number"):
        transformer.set_channel_swap("data", (1, 0))
    with pytest.raises(ValueError, match="Mean channels incompatible with input"):
        transformer.set_mean("data", np.zeros(4))
    with pytest.raises(ValueError, match="Mean shape invalid"):
        transformer.set_mean("data", np.zeros((1, 3, 4, 5)))
    assert transformer.transpose == {} and transformer.channel_swap == {}
    assert transformer.mean == {}


def test_mean_per_channel_broadcasts() -> None:
    transformer = io.Transformer({"data": SHAPE})
    transformer.set_mean("data", np.array([1.0, 2.0, 3.0]))
    assert transformer.mean["data"].shape == (3, 1, 1)


def test_mean_image_of_the_input_size_is_kept() -> None:
    transformer = io.Transformer({"data": SHAPE})
    mean = np.arange(60.0).reshape(3, 4, 5)
    transformer.set_mean("data", mean)
    assert transformer.mean["data"] is mean
    flat = np.arange(20.0).reshape(4, 5)
    single = io.Transformer({"data": (1, 1, 4, 5)})
    single.set_transpose("data", (2, 0, 1))
    single.set_mean("data", flat)
    assert single.mean["data"] is flat
    out = single.preprocess("data", np.full((4, 5, 1), 100.0))
    np.testing.assert_array_equal(out, 100.0 - flat[np.newaxis])


def test_mean_image_of_another_size_is_resized_in_its_range() -> None:
    transformer = io.Transformer({"data": SHAPE})
    rng = np.random.default_rng(5)
    mean = rng.uniform(90, 130, size=(3, 8, 10))
    transformer.set_mean("data", mean)
    low, high = mean.min(), mean.max()
    unit = ((mean - low) / (high - low)).transpose(1, 2, 0)
    expected = bilinear_edge_aligned(unit, 4, 5).transpose(2, 0, 1) * (high - low) + low
    assert transformer.mean["data"].shape == (3, 4, 5)
    np.testing.assert_allclose(transformer.mean["data"], expected, rtol=1e-5)


# --- load_image ------------------------------------------------------------------------

@pytest.fixture
def rgb_pixels() -> np.ndarray:
    return np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255]],
                     [[10, 20, 30], [255, 255, 255], [0, 0, 0]]], dtype=np.uint8)


def write_png(path: str, pixels: np.ndarray) -> str:
    import skimage.io

    skimage.io.imsave(path, pixels, check_contrast=False)
    return path


def test_load_rgb_image(tmp_path, rgb_pixels: np.ndarray) -> None:
    image = io.load_image(write_png(str(tmp_path / "rgb.png"), rgb_pixels))
    assert image.shape == (2, 3, 3) and image.dtype == np.float32
    np.testing.assert_allclose(image, rgb_pixels / 255.0, atol=1e-7)


def test_load_rgb_image_as_gray_is_luminance(tmp_path, rgb_pixels: np.ndarray) -> None:
    image = io.load_image(write_png(str(tmp_path / "rgb.png"), rgb_pixels), color=False)
    # ITU-R 709 luma weights (scikit-image's rgb2gray).
    luma = rgb_pixels @ np.array([0.2125, 0.7154, 0.0721]) / 255.0
    assert image.shape == (2, 3, 1) and image.dtype == np.float32
    np.testing.assert_allclose(image[:, :, 0], luma, atol=1e-6)


def test_load_gray_image(tmp_path) -> None:
    pixels = np.array([[0, 51], [204, 255]], dtype=np.uint8)
    path = write_png(str(tmp_path / "gray.png"), pixels)
    gray = io.load_image(path, color=False)
    assert gray.shape == (2, 2, 1)
    np.testing.assert_allclose(gray[:, :, 0], pixels / 255.0, atol=1e-7)
    color = io.load_image(path)
    assert color.shape == (2, 2, 3)
    for channel in range(3):
        np.testing.assert_array_equal(color[:, :, channel], gray[:, :, 0])


def test_load_rgba_image_drops_alpha(tmp_path, rgb_pixels: np.ndarray) -> None:
    alpha = np.full(rgb_pixels.shape[:2] + (1,), 255, dtype=np.uint8)
    path = write_png(str(tmp_path / "rgba.png"), np.concatenate([rgb_pixels, alpha], axis=2))
    image = io.load_image(path)
    assert image.shape == (2, 3, 3)
    np.testing.assert_allclose(image, rgb_pixels / 255.0, atol=1e-7)
