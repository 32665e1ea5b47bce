"""A .caffemodel written by ps-net loads in OpenCV's dnn module and classifies alike.

OpenCV 4 is used (OpenCV 5 dropped the Caffe importer). Trains LeNet briefly, then classifies the first 1,000 Fashion-MNIST test images
with OpenCV (readNetFromCaffe on our deploy prototxt and .caffemodel) and checks
the accuracy equals what `ps-net test` reports on the same images.
"""
import gzip
import json
import subprocess

import numpy as np
import pytest

from conftest import ROOT

cv2 = pytest.importorskip("cv2", reason="opencv-python-headless is installed by scripts/setup.sh")

DATASET = "/usr/share/datasets/fashion-mnist"


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def test_opencv_reads_our_caffemodel(build_dir, fashion_mnist, tmp_path):
    solver = (ROOT / "configs/nets/lenet_solver.prototxt").read_text()
    solver = solver.replace("max_iter: 10000", "max_iter: 300")
    solver = solver.replace('snapshot_prefix: "runs/lenet/lenet"', f'snapshot_prefix: "{tmp_path}/m"')
    assert "max_iter: 300" in solver and str(tmp_path) in solver
    (tmp_path / "solver.prototxt").write_text(solver)
    ps_net = str(build_dir / "bin/ps-net")
    subprocess.run([ps_net, "train", "--solver", str(tmp_path / "solver.prototxt"), "--json"],
                   cwd=ROOT, check=True, capture_output=True, timeout=600)
    model = tmp_path / "m_iter_300.caffemodel"
    assert model.exists()

    ours = subprocess.run([ps_net, "test", "--model", "configs/nets/lenet_train_test.prototxt",
                           "--weights", str(model), "--iterations", "10", "--json"], cwd=ROOT,
                          check=True, capture_output=True, text=True, timeout=300)
    our_accuracy = json.loads(ours.stdout.strip().splitlines()[-1])["accuracy"]

    net = cv2.dnn.readNetFromCaffe(str(ROOT / "configs/nets/lenet_deploy.prototxt"), str(model))
    images = read_idx(f"{DATASET}/t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[:1000]
    labels = read_idx(f"{DATASET}/t10k-labels-idx1-ubyte.gz", 8)[:1000]
    net.setInput(images.astype(np.float32) * 0.00390625)
    prob = net.forward()
    assert prob.shape == (1000, 10)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-5)
    cv_accuracy = float((prob.argmax(axis=1) == labels).mean())
    assert abs(cv_accuracy - our_accuracy) <= 0.002, (cv_accuracy, our_accuracy)
    assert our_accuracy > 0.6
