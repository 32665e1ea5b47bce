"""WindowData from Python and ps-net: a window file over a PNG written by PIL
(R, G, B) gives B, G, R crops, background then foreground labels; `ps-net
check` builds a net of it and names a bad window file's line."""
from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")
caffe = pytest.importorskip("pstrain.caffe")


def write_files(folder: pathlib.Path) -> np.ndarray:
    y, x = np.mgrid[0:6, 0:6]
    rgb = np.stack([10 * y + x, 100 + 10 * y + x, 200 + 5 * y + x], axis=-1).astype(np.uint8)
    Image.fromarray(rgb, "RGB").save(folder / "img.png")
    (folder / "windows.txt").write_text(
        "# 0\nimg.png\n3 6 6\n3\n"
        "4 0.9 1 1 4 4\n"   # foreground, label 4
        "2 0.1 0 0 3 3\n"   # background (label 0)
        "5 0.4 0 0 1 1\n")  # between the thresholds: unused
    return rgb


def net_text(folder: pathlib.Path) -> str:
    return f"""
layer {{ name: 'win' type: 'WindowData' top: 'data' top: 'label'
        transform_param {{ crop_size: 4 }}
        window_data_param {{ source: '{folder}/windows.txt' root_folder: '{folder}/'
                            batch_size: 4 fg_fraction: 0.5 bg_threshold: 0.3 }} }}
"""


def test_window_data_crops_and_labels_from_python(tmp_path):
    rgb = write_files(tmp_path)
    (tmp_path / "net.prototxt").write_text(net_text(tmp_path))
    net = caffe.Net(str(tmp_path / "net.prototxt"), caffe.TEST)
    net.forward()
    data, label = net.blobs["data"].data, net.blobs["label"].data
    assert data.shape == (4, 3, 4, 4)
    np.testing.assert_array_equal(label, [0, 0, 4, 4])
    bgr = rgb[:, :, ::-1].transpose(2, 0, 1).astype(np.float32)
    for n in (0, 1):  # background window (0,0)-(3,3), warped 4 -> 4: a copy
        np.testing.assert_array_equal(data[n], bgr[:, 0:4, 0:4])
    for n in (2, 3):  # foreground window (1,1)-(4,4)
        np.testing.assert_array_equal(data[n], bgr[:, 1:5, 1:5])


def test_ps_net_check_builds_window_data_and_names_a_bad_line(tmp_path):
    from pstrain_testing import find_build_dir

    ps_net = find_build_dir(["ps-net"]) / "bin" / "ps-net"
    write_files(tmp_path)
    (tmp_path / "net.prototxt").write_text(net_text(tmp_path) + """
layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'y' inner_product_param { num_output: 6 } }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }
""")
    solver = tmp_path / "solver.prototxt"
    solver.write_text(f'net: "{tmp_path}/net.prototxt"\nbase_lr: 0.01\nlr_policy: "fixed"\n'
                      f'max_iter: 3\nsnapshot_prefix: "{tmp_path}/s"\n')
    check = subprocess.run([str(ps_net), "check", "--solver", str(solver)], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    train = subprocess.run([str(ps_net), "train", "--solver", str(solver)], capture_output=True,
                           text=True, timeout=120)
    assert train.returncode == 0, train.stdout + train.stderr
    assert "Optimization Done." in train.stdout + train.stderr
    (tmp_path / "windows.txt").write_text("# 0\nimg.png\n3 6 6\n1\n1 0.9 2 2 6 3\n")
    bad = subprocess.run([str(ps_net), "check", "--solver", str(solver)], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 1
    assert (f"{tmp_path}/windows.txt:5: window (x1 y1 x2 y2) = (2 2 6 3) is not inside the "
            f"6 x 6 (height x width) image {tmp_path}/img.png") in bad.stdout + bad.stderr
