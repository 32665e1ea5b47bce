"""`ps-data siamese`: the pair records of Caffe's convert_mnist_siamese_data,
read back through a Data layer (pstrain.caffe) from an LMDB and a LevelDB:
record k holds images i and j drawn by std::mt19937_64(seed) (i = draw % N,
then j = draw % N) as channels 0 and 1, label 1 exactly when their labels
agree. The draws are recomputed here by MT19937-64 in Python."""
from __future__ import annotations

import json
import struct
import subprocess

import numpy as np
import pytest

LABELS = [0, 1, 0, 2, 1, 0]


def mt19937_64(seed: int):
    """The outputs of C++'s std::mt19937_64 seeded with `seed` (Matsumoto and
    Nishimura's 64-bit Mersenne Twister, the standard's parameters)."""
    n, m, mask = 312, 156, (1 << 64) - 1
    state = [seed & mask]
    for i in range(1, n):
        prev = state[-1]
        state.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & mask)
    index = n
    while True:
        if index >= n:
            for i in range(n):
                x = (state[i] & 0xFFFFFFFF80000000) | (state[(i + 1) % n] & 0x7FFFFFFF)
                state[i] = state[(i + m) % n] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            index = 0
        x = state[index]
        index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        yield x


def test_mt19937_64_is_the_standard_generator():
    """The C++ standard's check: the 10000th output of a default-seeded
    (5489) mt19937_64 is 9981545732273789042."""
    draws = mt19937_64(5489)
    for _ in range(9999):
        next(draws)
    assert next(draws) == 9981545732273789042


@pytest.fixture()
def idx_files(tmp_path):
    """Six 3 x 2 images (image n holds 10 n + 0..5) and their labels, as IDX files."""
    images = (np.arange(6)[:, None, None] * 10 + np.arange(6).reshape(1, 3, 2)).astype(np.uint8)
    (tmp_path / "images.idx").write_bytes(struct.pack(">IIII", 2051, 6, 3, 2) + images.tobytes())
    (tmp_path / "labels.idx").write_bytes(struct.pack(">II", 2049, 6) + bytes(LABELS))
    return images, tmp_path / "images.idx", tmp_path / "labels.idx"


def ps_data(build_dir, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(build_dir / "bin" / "ps-data"), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("backend", ["lmdb", "leveldb"])
def test_pairs_read_back_through_a_data_layer(build_dir, idx_files, tmp_path, backend):
    images, image_file, label_file = idx_files
    out = tmp_path / f"pairs_{backend}"
    done = ps_data(build_dir, "siamese", image_file, label_file, out, "--backend", backend,
                   "--seed", 3, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"event": "ps-data", "command": "siamese", "records": 6,
                                       "rows": 3, "cols": 2, "backend": backend,
                                       "output": str(out)}

    import pstrain.caffe as caffe
    net_file = tmp_path / "read.prototxt"
    net_file.write_text(
        'layer { name: "pairs" type: "Data" top: "pair_data" top: "sim"\n'
        f'  data_param {{ source: "{out}" batch_size: 6 backend: {backend.upper()} }} }}\n')
    net = caffe.Net(str(net_file), caffe.TEST)
    net.forward()
    pairs, sim = net.blobs["pair_data"].data, net.blobs["sim"].data
    assert pairs.shape == (6, 2, 3, 2) and sim.shape == (6,)

    draws = mt19937_64(3)
    for k in range(6):
        i, j = next(draws) % 6, next(draws) % 6
        np.testing.assert_array_equal(pairs[k, 0], images[i], err_msg=f"record {k}: image {i}")
        np.testing.assert_array_equal(pairs[k, 1], images[j], err_msg=f"record {k}: image {j}")
        assert sim[k] == (1.0 if LABELS[i] == LABELS[j] else 0.0), (k, i, j)


def test_bad_input_is_refused_with_one_message(build_dir, idx_files, tmp_path):
    _, image_file, label_file = idx_files
    five = tmp_path / "five.idx"
    five.write_bytes(struct.pack(">II", 2049, 5) + bytes(LABELS[:5]))
    cases = [
        (("siamese", image_file, five, tmp_path / "a"), 1,
         f"ps-data: {image_file} holds 6 images but {five} holds 5 labels\n"),
        (("siamese", image_file, label_file, tmp_path / "b", "--backend", "hdf5"), 2,
         "ps-data: --backend hdf5: expected lmdb or leveldb (see ps-data --help)\n"),
        (("siamese", image_file, label_file, image_file), 1,
         f"ps-data: {image_file}: already exists (remove it first or choose another path)\n"),
        (("siamese", image_file, label_file), 2,
         "ps-data: siamese takes IMAGES LABELS OUT_DB, got 2 arguments (see ps-data --help)\n"),
        (("mean", tmp_path / "x", tmp_path / "y", "--seed", "2"), 2,
         "ps-data: --seed is an option of 'ps-data images' and 'ps-data siamese', not of "
         "'mean' (see ps-data --help)\n"),
    ]
    for args, code, message in cases:
        done = ps_data(build_dir, *args)
        assert (done.returncode, done.stderr) == (code, message), args
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
