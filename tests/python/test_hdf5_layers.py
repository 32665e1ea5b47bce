"""HDF5Data and HDF5Output through pstrain.caffe, against files h5py writes and
reads: float64 and integer datasets read as float32, rows in Caffe's order
across files and wrapping around, the output file's datasets as h5py sees them
(Caffe's four axes, every batch appended), and a dataset HDF5Data cannot read
named by file and dataset.

Needs the compiled extension (pstrain._core) and h5py."""
from __future__ import annotations

import gc
import pathlib

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
caffe = pytest.importorskip("pstrain.caffe")


def write_net(folder: pathlib.Path, text: str) -> str:
    path = folder / "net.prototxt"
    path.write_text(text)
    return str(path)


def test_hdf5_data_reads_what_h5py_wrote_and_hdf5_output_writes_what_it_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the list and its files are relative, as in Caffe's examples
    x = np.arange(5 * 2 * 3, dtype=np.float64).reshape(5, 2, 3) / 8
    y = np.array([4, 0, 3, 1, 2], dtype=np.int32)
    with h5py.File("a.h5", "w") as f:
        f["data"], f["label"] = x[:3], y[:3]
    with h5py.File("b.h5", "w") as f:
        f["data"], f["label"] = x[3:], y[3:]
    (tmp_path / "train.txt").write_text("a.h5\nb.h5\n")
    net = caffe.Net(write_net(tmp_path, """
layer { name: 'h5' type: 'HDF5Data' top: 'data' top: 'label'
        hdf5_data_param { source: 'train.txt' batch_size: 2 } }
layer { name: 'out' type: 'HDF5Output' bottom: 'data' bottom: 'label'
        hdf5_output_param { file_name: 'out.h5' } }
"""), caffe.TEST)
    assert net.blobs["data"].data.shape == (2, 2, 3)
    seen_x, seen_y = [], []
    for _ in range(4):  # 8 rows: a.h5, b.h5, then around to a.h5's first three
        net.forward()
        seen_x.append(net.blobs["data"].data.copy())
        seen_y.append(net.blobs["label"].data.copy())
    order = [0, 1, 2, 3, 4, 0, 1, 2]
    np.testing.assert_array_equal(np.concatenate(seen_x), x[order].astype(np.float32))
    np.testing.assert_array_equal(np.concatenate(seen_y), y[order].astype(np.float32))
    del net
    gc.collect()  # the layer closes its file
    with h5py.File("out.h5", "r") as f:
        assert sorted(f) == ["data", "label"]
        assert f["data"].dtype == np.float32
        assert f["data"].shape == (8, 2, 3, 1)
        assert f["label"].shape == (8, 1, 1, 1)
        np.testing.assert_array_equal(f["data"][:, :, :, 0], x[order].astype(np.float32))
        np.testing.assert_array_equal(f["label"][:].ravel(), y[order].astype(np.float32))


def test_a_dataset_hdf5_data_cannot_read_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with h5py.File("s.h5", "w") as f:
        f["data"] = np.array([b"ab", b"cd"])
        f["label"] = np.array([1, 2])
    (tmp_path / "list.txt").write_text("s.h5\n")
    with pytest.raises(ValueError) as error:
        caffe.Net(write_net(tmp_path, """
layer { name: 'h5' type: 'HDF5Data' top: 'data' top: 'label'
        hdf5_data_param { source: 'list.txt' batch_size: 2 } }
"""), caffe.TEST)
    assert str(error.value) == (
        f"{tmp_path}/net.prototxt:2: layer 'h5' (HDF5Data): list.txt: s.h5: dataset 'data' holds "
        "string values; HDF5Data reads float, double and integer datasets")


def test_ps_net_checks_and_trains_a_net_of_hdf5_data_and_filter(tmp_path):
    """`ps-net check` builds the net (each file's datasets read at set-up) and
    `ps-net train` runs it: a Filter keeps the rows whose label is non-zero, so
    the layers after it see 1 or 2 rows from one batch to the next."""
    import subprocess

    from pstrain_testing import find_build_dir

    ps_net = find_build_dir(["ps-net"]) / "bin" / "ps-net"
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["data"] = np.arange(8, dtype=np.float32).reshape(4, 2)
        f["label"] = np.array([1, 0, 2, 3], dtype=np.float32)
    (tmp_path / "list.txt").write_text(f"{tmp_path}/a.h5\n")
    (tmp_path / "net.prototxt").write_text(f"""
layer {{ name: 'h5' type: 'HDF5Data' top: 'data' top: 'label'
        hdf5_data_param {{ source: '{tmp_path}/list.txt' batch_size: 2 }} }}
layer {{ name: 'f' type: 'Filter' bottom: 'data' bottom: 'label' bottom: 'label'
        top: 'kept' top: 'kept_label' }}
layer {{ name: 'ip' type: 'InnerProduct' bottom: 'kept' top: 'y'
        inner_product_param {{ num_output: 1 }} }}
layer {{ name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 'kept_label' top: 'loss' }}
""")
    solver = tmp_path / "solver.prototxt"
    solver.write_text(f'net: "{tmp_path}/net.prototxt"\nbase_lr: 0.01\nlr_policy: "fixed"\n'
                      f'max_iter: 4\nsnapshot_prefix: "{tmp_path}/s"\n')
    check = subprocess.run([str(ps_net), "check", "--solver", str(solver)], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    assert "ok: TRAIN net '' (5 layers, 3 learnable values" in check.stdout
    train = subprocess.run([str(ps_net), "train", "--solver", str(solver)], capture_output=True,
                           text=True, timeout=120)
    assert train.returncode == 0, train.stderr
    assert "Optimization Done." in train.stdout + train.stderr
