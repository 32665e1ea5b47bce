"""Caffe's newer layer types in real trainings through ps-train: an FCN-style
segmentation net (Deconvolution, Crop, Eltwise, Silence; images and pixel
masks in two LMDBs made by `ps-data images`), an LSTM on a generated
sequence task (Caffe's RecurrentLayer inputs: x and cont, T x N), an HDF5Data
regression and Caffe's siamese MNIST net (ContrastiveLoss on pairs made by
`ps-data`).

"Trains" means: with the solver's random_seed, the loss worker 0 reports at
iteration N (Caffe's display, average_loss 1) is at most half of its loss at
iteration 0; each test names its N. The jobs run in bsp, so every run of a
test sees the same numbers.

The nets are tests/data/catalogue/*.prototxt, written in the style of Caffe's
examples (examples/siamese, examples/hdf5_classification, FCN's and LRCN's
nets) and exercising the same layers and parameters.
"""
from __future__ import annotations

import gzip
import json
import pathlib
import struct
import subprocess
import zlib

import numpy as np
import pytest

from conftest import ROOT
from pstrain import ClusterConfig, ConsistencyConfig, Job, JobConfig, RunResult

NETS = ROOT / "tests" / "data" / "catalogue"
FASHION_MNIST = pathlib.Path("/usr/share/datasets/fashion-mnist")


# --- helpers ----------------------------------------------------------------

def write_png_gray(path: pathlib.Path, image: np.ndarray) -> None:
    """An 8-bit grayscale PNG of `image` (H x W uint8), no filter, one IDAT."""
    height, width = image.shape
    rows = b"".join(b"\0" + image[r].tobytes() for r in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data)))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def fashion_mnist_images(count: int) -> np.ndarray:
    """The first `count` Fashion-MNIST training images (count x 28 x 28 uint8), read
    from Debian's dataset-fashion-mnist IDX file."""
    path = FASHION_MNIST / "train-images-idx3-ubyte.gz"
    if not path.exists():
        pytest.fail(f"{path} not found: install Debian's dataset-fashion-mnist package")
    with gzip.open(path) as f:
        data = f.read(16 + count * 28 * 28)
    magic, n, rows, cols = struct.unpack(">IIII", data[:16])
    assert (magic, rows, cols) == (2051, 28, 28) and n >= count
    return np.frombuffer(data, np.uint8, offset=16).reshape(count, 28, 28)


def run(*cmd, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{cmd}: {done.stderr}"
    return done


def train(tmp: pathlib.Path, name: str, net: str, *, workers: int, max_iter: int,
          display: int, solver: str, timeout: float = 240) -> RunResult:
    """`net` (prototxt text) trained by ps-train with one server and `workers`
    CPU workers in bsp; snapshot at the end. Fails the test unless the run is ok."""
    folder = tmp / name
    folder.mkdir(parents=True)
    (folder / "net.prototxt").write_text(net)
    (folder / "solver.prototxt").write_text(
        f'net: "{folder}/net.prototxt"\n{solver}\nlr_policy: "fixed"\n'
        f"display: {display}\naverage_loss: 1\nmax_iter: {max_iter}\n"
        f'snapshot_prefix: "{folder}/snap"\nrandom_seed: 7\nsolver_mode: CPU\n')
    config = JobConfig(name=name, solver=folder / "solver.prototxt",
                       cluster=ClusterConfig(servers=1, workers=workers),
                       consistency=ConsistencyConfig(mode="bsp"), output=tmp / "runs",
                       engine="fast")
    result = Job(config).run(quiet=True, timeout=timeout)
    assert result.ok, result.summary
    assert result.summary["iterations"] == max_iter
    return result


def weight_diff(build_dir: pathlib.Path, a: pathlib.Path, b: pathlib.Path,
                max_rel: float) -> tuple[int, dict]:
    """`ps-net diff` of two .caffemodel files: (exit status, report); 0 when every
    value agrees within max_rel (it fails on NaN and on a blob missing from either)."""
    done = subprocess.run([str(build_dir / "bin" / "ps-net"), "diff", str(a), str(b), "--json",
                           "--max-rel", repr(max_rel)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode in (0, 1) and done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def assert_bsp_is_large_batch(build_dir, tmp, name: str, make_net, batch: int, solver: str,
                              iters: int = 20) -> None:
    """bsp with 2 workers of `batch` ends where 1 worker of 2 x `batch` does, within
    1e-5 after `iters` iterations; the control, 1 worker of `batch`, does not."""
    two = train(tmp, f"{name}-w2", make_net(batch), workers=2, max_iter=iters, display=1,
                solver=solver)
    one = train(tmp, f"{name}-w1", make_net(2 * batch), workers=1, max_iter=iters, display=1,
                solver=solver)
    half = train(tmp, f"{name}-half", make_net(batch), workers=1, max_iter=iters, display=1,
                 solver=solver)
    code, report = weight_diff(build_dir, one.snapshot, two.snapshot, 1e-5)
    print(f"{name}: 2 workers of {batch} against 1 of {2 * batch}: max_rel "
          f"{report['max_rel']:.3g}, max_abs {report['max_abs']:.3g}")
    assert code == 0 and report["equal"], report
    # The control: half the data per step ends far outside 1e-5, so the match
    # above needs worker 1 to have read the other half of each large batch.
    code, control = weight_diff(build_dir, one.snapshot, half.snapshot, 1e-5)
    print(f"{name}: control, 1 worker of {batch}: max_rel {control['max_rel']:.3g}")
    assert code == 1 and not control["mismatches"] and control["max_rel"] > 1e-3, control


def losses(result: RunResult) -> dict[int, float]:
    """Worker 0's displayed training loss by iteration."""
    return {r["iter"]: r["loss"] for r in result.metrics
            if r.get("event") == "train" and r["rank"] == 0 and "loss" in r}


def assert_trains(result: RunResult, n: int) -> dict[int, float]:
    seen = losses(result)
    assert 0 in seen and n in seen, f"no loss at iteration 0 or {n}: {sorted(seen)}"
    print(f"{result.summary['name']}: losses by iteration {seen}")
    assert np.isfinite(list(seen.values())).all(), seen
    assert seen[n] <= 0.5 * seen[0], f"loss at iteration {n} is {seen[n]:.4f}, " \
                                     f"more than half of iteration 0's {seen[0]:.4f}"
    return seen


@pytest.fixture(autouse=True)
def programs_of_this_build(build_dir, monkeypatch):
    """ps-train starts the programs of the build the tests use."""
    monkeypatch.setenv("PSTRAIN_BUILD_DIR", str(build_dir))


# --- FCN: Deconvolution + Crop ----------------------------------------------

def make_mask_lmdbs(build_dir: pathlib.Path, folder: pathlib.Path, count: int):
    """Fashion-MNIST images and their foreground masks (pixel >= 32: 1, else 0) as
    two LMDBs of 1 x 28 x 28 Datums in the same order, through `ps-data images`."""
    images = fashion_mnist_images(count)
    png = folder / "png"
    png.mkdir(parents=True)
    image_list, mask_list = [], []
    for i, image in enumerate(images):
        write_png_gray(png / f"image_{i:04d}.png", image)
        write_png_gray(png / f"mask_{i:04d}.png", (image >= 32).astype(np.uint8))
        image_list.append(f"image_{i:04d}.png 0")
        mask_list.append(f"mask_{i:04d}.png 0")
    (folder / "images.txt").write_text("\n".join(image_list) + "\n")
    (folder / "masks.txt").write_text("\n".join(mask_list) + "\n")
    ps_data = build_dir / "bin" / "ps-data"
    run(ps_data, "images", "--gray", png, folder / "images.txt", folder / "images_lmdb")
    run(ps_data, "images", "--gray", png, folder / "masks.txt", folder / "masks_lmdb")
    return folder / "images_lmdb", folder / "masks_lmdb"


def test_fcn_segmentation_net_trains(build_dir, tmp_path):
    images, masks = make_mask_lmdbs(build_dir, tmp_path / "data", 256)
    net = (NETS / "fcn_mask.prototxt").read_text()
    net = net.replace("IMAGES", str(images)).replace("MASKS", str(masks))
    result = train(tmp_path, "fcn", net.replace("BATCH", "8"), workers=2, max_iter=100,
                   display=10, solver="base_lr: 0.01\nmomentum: 0.9")
    assert_trains(result, 90)


# --- LSTM: Caffe's RecurrentLayer (x, cont) ---------------------------------

LSTM_DEPLOY = """
name: "lstm_recall_deploy"
layer { name: "input" type: "Input" top: "x" top: "cont"
  input_param { shape { dim: 10 dim: 256 dim: 3 } shape { dim: 10 dim: 256 } } }
layer { name: "lstm1" type: "LSTM" bottom: "x" bottom: "cont" top: "lstm1"
  recurrent_param { num_output: 24 } }
layer { name: "predict" type: "InnerProduct" bottom: "lstm1" top: "predict"
  inner_product_param { num_output: 3 axis: 2 } }
"""


def test_lstm_sequence_net_trains(tmp_path):
    """Recalling the input of two timesteps before needs the recurrence: a net
    without memory cannot do better than predicting 0 (the loss of iteration 0).
    The trained weights, in pstrain.caffe, then recall across timesteps and
    forget where cont starts a new sequence."""
    net = (NETS / "lstm_recall.prototxt").read_text().replace("BATCH", "16")
    result = train(tmp_path, "lstm", net, workers=2, max_iter=220, display=20,
                   solver='type: "Adam"\nbase_lr: 0.01\nmomentum: 0.9\nmomentum2: 0.999')
    assert_trains(result, 200)

    import pstrain.caffe as caffe
    (tmp_path / "deploy.prototxt").write_text(LSTM_DEPLOY)
    deploy = caffe.Net(str(tmp_path / "deploy.prototxt"), caffe.TEST,
                       weights=str(result.snapshot))
    x = np.random.default_rng(5).uniform(-1, 1, (10, 256, 3)).astype(np.float32)
    cont = np.ones((10, 256), np.float32)
    cont[0] = cont[5] = 0          # two sequences a stream: timesteps 0-4 and 5-9
    deploy.blobs["x"].data[...] = x
    deploy.blobs["cont"].data[...] = cont
    predict = deploy.forward()["predict"]
    error = ((predict[2:] - x[:-2]) ** 2).mean(axis=(1, 2))   # at timesteps 2..9
    recalled = error[[0, 1, 2, 5, 6, 7]]      # timesteps 2-4 and 7-9: in the sequence
    forgotten = error[[3, 4]]                 # timesteps 5, 6: recall before the start
    print(f"mean squared recall error by timestep 2..9: {np.round(error, 4)}")
    # Nothing known: the best guess is 0, whose error is E[x^2] = 1/3.
    assert recalled.max() < 0.1 and forgotten.min() > 0.25, error


# --- HDF5Data regression -----------------------------------------------------

def write_regression_h5(folder: pathlib.Path) -> pathlib.Path:
    """Two .h5 files (160 and 96 rows) of inputs x in [-1, 1]^4 and targets
    (sin(pi x0) x1, x2^2 - x3), and the source list naming them."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(11)
    folder.mkdir(parents=True)
    names = []
    for i, rows in enumerate((160, 96)):
        x = rng.uniform(-1, 1, (rows, 4)).astype(np.float32)
        target = np.stack([np.sin(np.pi * x[:, 0]) * x[:, 1], x[:, 2] ** 2 - x[:, 3]], axis=1)
        names.append(folder / f"part{i}.h5")
        with h5py.File(names[-1], "w") as f:
            f["data"] = x
            f["target"] = target.astype(np.float32)
    source = folder / "source.txt"
    source.write_text("".join(f"{name}\n" for name in names))
    return source


def hdf5_net(source: pathlib.Path, batch: int) -> str:
    net = (NETS / "hdf5_regression.prototxt").read_text()
    return net.replace("SOURCE", str(source)).replace("BATCH", str(batch))


HDF5_SOLVER = "base_lr: 0.1\nmomentum: 0.9\nweight_decay: 0.0005"


def test_hdf5_regression_trains(tmp_path):
    source = write_regression_h5(tmp_path / "data")
    result = train(tmp_path, "hdf5", hdf5_net(source, 16), workers=2, max_iter=200,
                   display=20, solver=HDF5_SOLVER)
    assert_trains(result, 180)


def test_hdf5_bsp_two_workers_equal_one_with_twice_the_batch(build_dir, tmp_path):
    """20 iterations of 16 rows: the stream wraps around the 256 rows and crosses
    from one file to the other, in both jobs."""
    source = write_regression_h5(tmp_path / "data")
    assert_bsp_is_large_batch(build_dir, tmp_path, "hdf5", lambda b: hdf5_net(source, b), 8,
                              HDF5_SOLVER)


# --- Siamese: ContrastiveLoss on pairs made by ps-data ------------------------
#
# Caffe's example reads LevelDB pairs. Each worker reads the database through
# its own private view (worker/data/leveldb_reader.hpp), so workers on one host
# share one LevelDB folder.

def make_pairs(build_dir: pathlib.Path, out: pathlib.Path, backend: str) -> pathlib.Path:
    """Fashion-MNIST's 60000 training images as 60000 random pairs (seed 1),
    written by `ps-data siamese` as Caffe's create_mnist_siamese.sh writes its own."""
    images = FASHION_MNIST / "train-images-idx3-ubyte.gz"
    if not images.exists():
        pytest.fail(f"{images} not found: install Debian's dataset-fashion-mnist package")
    done = run(build_dir / "bin" / "ps-data", "siamese", images,
               FASHION_MNIST / "train-labels-idx1-ubyte.gz", out, "--backend", backend,
               "--seed", 1, "--json")
    assert json.loads(done.stdout)["records"] == 60000
    return out


def siamese_net(source: pathlib.Path, backend: str, batch: int) -> str:
    """The catalogue's siamese net over `source`; an empty `backend` leaves
    data_param.backend unset, as Caffe's example net does."""
    net = (NETS / "siamese_pairs.prototxt").read_text().replace("SOURCE", str(source))
    net = net.replace("backend: BACKEND", f"backend: {backend}" if backend else "")
    return net.replace("BATCH", str(batch))


SIAMESE_SOLVER = "base_lr: 0.01\nmomentum: 0.9\nweight_decay: 0"


def test_siamese_net_trains_on_leveldb_pairs(build_dir, tmp_path):
    source = make_pairs(build_dir, tmp_path / "pairs_leveldb", "leveldb")
    result = train(tmp_path, "siamese", siamese_net(source, "LEVELDB", 32), workers=1,
                   max_iter=200, display=20, solver=SIAMESE_SOLVER)
    assert_trains(result, 180)


def test_siamese_bsp_two_workers_equal_one_with_twice_the_batch(build_dir, tmp_path):
    """2 workers on one host read one LevelDB folder at once (its backend unset, as
    in Caffe's example net: the folder's CURRENT picks LevelDB) and end where 1
    worker of twice the batch over the same LevelDB (backend LEVELDB) does; the
    folder is left as it was."""
    leveldb = make_pairs(build_dir, tmp_path / "pairs_leveldb", "leveldb")
    before = {f.name: f.stat().st_mtime_ns for f in leveldb.iterdir()}
    make_net = lambda b: siamese_net(leveldb, "" if b == 8 else "LEVELDB", b)
    assert_bsp_is_large_batch(build_dir, tmp_path, "siamese", make_net, 8, SIAMESE_SOLVER)
    assert {f.name: f.stat().st_mtime_ns for f in leveldb.iterdir()} == before
