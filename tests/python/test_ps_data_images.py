"""ps-data images and ps-data mean on PNG and JPEG files written by OpenCV, held
against OpenCV's own decoding and resizing (what Caffe's convert_imageset and
compute_image_mean use): the mean file's pixels, its per-channel means, and the
errors for bad lists."""
from __future__ import annotations

import json
import pathlib
import struct
import subprocess

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")


def read_blob_proto(path: pathlib.Path) -> np.ndarray:
    """A binary caffe.BlobProto (num 1, channels 2, height 3, width 4, data 5) as an array."""
    buf = path.read_bytes()
    dims = {}
    data: list[float] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while pos < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            dims[field] = varint()
        elif wire == 2:
            length = varint()
            chunk = buf[pos:pos + length]
            pos += length
            if field == 5:
                data.extend(struct.unpack(f"<{length // 4}f", chunk))
        elif wire == 5:
            (value,) = struct.unpack("<f", buf[pos:pos + 4])
            pos += 4
            if field == 5:
                data.append(value)
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    shape = (dims.get(1, 0), dims.get(2, 0), dims.get(3, 0), dims.get(4, 0))
    return np.asarray(data, dtype=np.float64).reshape(shape)


def ps_data(build_dir: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(build_dir / "bin" / "ps-data"), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def image_folder(tmp_path: pathlib.Path) -> pathlib.Path:
    """Six colour images of 9 x 11 (four PNG, two JPEG) under root/, and list.txt."""
    rng = np.random.default_rng(7)
    root = tmp_path / "root"
    (root / "cls").mkdir(parents=True)
    lines = []
    for i in range(6):
        # Smooth gradients plus noise: JPEG keeps them close, resizing has work to do.
        yy, xx = np.mgrid[0:9, 0:11]
        image = np.stack([(yy * 20 + xx * 5 + 30 * c + 40 * i) % 256 for c in range(3)], axis=-1)
        image = np.clip(image + rng.integers(-8, 9, image.shape), 0, 255).astype(np.uint8)
        name = f"cls/img{i}." + ("jpg" if i >= 4 else "png")
        assert cv2.imwrite(str(root / name), image)
        lines.append(f"{name} {i % 3}")
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    return tmp_path


def opencv_mean(folder: pathlib.Path, size: tuple[int, int] | None, flags: int) -> np.ndarray:
    """The mean image (C x H x W) of the listed files as OpenCV reads and resizes them."""
    images = []
    for line in (folder / "list.txt").read_text().split("\n"):
        if not line:
            continue
        image = cv2.imread(str(folder / "root" / line.rsplit(" ", 1)[0]), flags)
        if size is not None:
            image = cv2.resize(image, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
        if image.ndim == 2:
            image = image[:, :, None]
        images.append(image.transpose(2, 0, 1).astype(np.float64))
    return np.mean(images, axis=0)


def test_raw_images_and_mean_match_opencv_exactly(build_dir, image_folder):
    out = image_folder / "train_lmdb"
    done = ps_data(build_dir, "images", image_folder / "root", image_folder / "list.txt", out,
                   "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["records"], summary["channels"], summary["height"], summary["width"]) == \
        (6, 3, 9, 11)
    mean = ps_data(build_dir, "mean", out, image_folder / "mean.binaryproto", "--json")
    assert mean.returncode == 0, mean.stderr
    blob = read_blob_proto(image_folder / "mean.binaryproto")
    assert blob.shape == (1, 3, 9, 11)
    expected = opencv_mean(image_folder, None, cv2.IMREAD_COLOR)
    # PNG is lossless and libjpeg-turbo's default (islow) decoder is OpenCV's too.
    np.testing.assert_allclose(blob[0], expected, atol=1e-4)
    np.testing.assert_allclose(json.loads(mean.stdout)["channel_means"],
                               expected.mean(axis=(1, 2)), atol=1e-4)


def test_caffe_flags_resize_gray_and_encoded(build_dir, image_folder):
    """Caffe's single-dash spellings; resize within 1 of OpenCV's INTER_LINEAR per pixel."""
    out = image_folder / "small_lmdb"
    done = ps_data(build_dir, "images", "-resize_height=6", "-resize_width=8", "-gray",
                   "-encoded", "-encode_type=png", "-shuffle", image_folder / "root",
                   image_folder / "list.txt", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote 6 encoded records (1x6x8) to {out}")
    mean = ps_data(build_dir, "mean", out, image_folder / "m.binaryproto")
    assert mean.returncode == 0, mean.stderr
    blob = read_blob_proto(image_folder / "m.binaryproto")
    assert blob.shape == (1, 1, 6, 8)
    expected = opencv_mean(image_folder, (6, 8), cv2.IMREAD_GRAYSCALE)
    assert np.abs(blob[0] - expected).max() <= 1.0
    assert np.abs(blob[0] - expected).mean() < 0.5


def test_bad_lists_name_the_list_file_and_line_and_leave_nothing(build_dir, image_folder):
    bad = image_folder / "bad.txt"
    bad.write_text("cls/img0.png 0\ncls/nothing.png 1\n")
    out = image_folder / "out_lmdb"
    done = ps_data(build_dir, "images", image_folder / "root", bad, out)
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"ps-data: {bad}:2: {image_folder / 'root' / 'cls/nothing.png'}: cannot open")
    assert not out.exists()
    assert not list(image_folder.glob("out_lmdb*"))
    bad.write_text("cls/img0.png zero\n")
    done = ps_data(build_dir, "images", image_folder / "root", bad, out)
    assert done.returncode == 1
    assert done.stderr == f"ps-data: {bad}:1: label 'zero' is not an integer\n"
    done = ps_data(build_dir, "images", "-resize_height=4", image_folder / "root",
                   image_folder / "list.txt", out)
    assert done.returncode == 1 and "go together" in done.stderr
    done = ps_data(build_dir, "mean", image_folder / "list.txt", image_folder / "m")
    assert done.returncode == 1 and "cannot open LMDB" in done.stderr
    done = ps_data(build_dir, "images", "-gray=perhaps", image_folder / "root", bad, out)
    assert done.returncode == 2
    assert "--gray=perhaps: expected true or false" in done.stderr


def test_caffe_convert_imageset_order_and_the_old_order_refused(build_dir, image_folder):
    """convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME, Caffe's flags before or after;
    the earlier LIST ROOT OUT order gets one message naming the new one, and writes nothing."""
    out = image_folder / "caffe_lmdb"
    done = ps_data(build_dir, "images", "--shuffle", f"{image_folder / 'root'}/",
                   image_folder / "list.txt", out, "--backend", "lmdb", "--check_size")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote 6 records (3x9x11) to {out}")
    old = image_folder / "old_lmdb"
    done = ps_data(build_dir, "images", image_folder / "list.txt", image_folder / "root", old)
    assert done.returncode == 2
    assert done.stderr == (
        f"ps-data: images takes ROOTFOLDER LIST_FILE OUT_LMDB, as Caffe's convert_imageset; "
        f"'{image_folder / 'list.txt'}' is a file and '{image_folder / 'root'}' a folder: give "
        f"the folder first (ps-data images {image_folder / 'root'} {image_folder / 'list.txt'} "
        f"{old}) (see ps-data --help)\n")
    assert not old.exists()
