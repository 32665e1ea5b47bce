"""bench/caffe_peers.py's Caffe side, which needs neither Caffe nor PyTorch: the
prototxt it hands `caffe time` (batch set, force_backward only where a net has
no loss) and how it reads `caffe time`'s output (per-layer averages, the
data layers left out of the total), checked with a stand-in `caffe` script."""
from __future__ import annotations

import os
import sys

import pytest

from pstrain_testing import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import caffe_peers  # noqa: E402

CAFFE_OUTPUT = """\
I1207 03:05:30.1 1 caffe.cpp:404] Average time per layer:
I1207 03:05:30.1 1 caffe.cpp:407]       data\tforward: 0.25 ms.
I1207 03:05:30.1 1 caffe.cpp:410]       data\tbackward: 0.5 ms.
I1207 03:05:30.1 1 caffe.cpp:407]      conv1\tforward: 26.0418 ms.
I1207 03:05:30.1 1 caffe.cpp:410]      conv1\tbackward: 54.7784 ms.
I1207 03:05:30.1 1 caffe.cpp:407]       prob\tforward: 0.0916 ms.
I1207 03:05:30.1 1 caffe.cpp:410]       prob\tbackward: 0.0166 ms.
I1207 03:05:30.1 1 caffe.cpp:415] Average Forward pass: 220.663 ms.
I1207 03:05:30.1 1 caffe.cpp:417] Average Backward pass: 382.603 ms.
I1207 03:05:30.1 1 caffe.cpp:419] Average Forward-Backward: 603.8 ms.
"""


def test_force_backward_only_without_a_loss_and_the_batch_set(tmp_path) -> None:
    alexnet = caffe_peers.caffe_model("configs/nets/alexnet_deploy.prototxt", 3, tmp_path)
    text = alexnet.read_text()
    assert text.startswith("force_backward: true\n")
    assert "shape { dim: 3 dim: 3 dim: 227 dim: 227 }" in text
    lenet = caffe_peers.caffe_model("configs/nets/lenet_bench.prototxt", 7, tmp_path).read_text()
    assert "force_backward" not in lenet  # SoftmaxWithLoss: Caffe's backward runs anyway
    assert "shape { dim: 7 dim: 1 dim: 28 dim: 28 }" in lenet and "shape { dim: 7 }" in lenet
    assert caffe_peers.data_layer_names("configs/nets/alexnet_deploy.prototxt") == ["data"]


def test_caffe_times_are_read_and_the_data_layer_left_out(tmp_path) -> None:
    fake = tmp_path / "caffe"
    (tmp_path / "out.txt").write_text(CAFFE_OUTPUT)
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = time ] || exit 3\ncat {tmp_path / 'out.txt'} >&2\n")
    fake.chmod(0o755)
    args = type("Args", (), {"caffe": str(fake)})()
    got = caffe_peers.time_caffe(args, dict(os.environ), tmp_path / "net.prototxt", ["data"], 5)
    assert got["ms"] == pytest.approx(603.8 - 0.75)
    assert got["layers"]["conv1"][:2] == (26.0418, 54.7784)
    assert got["layers"]["prob"][:2] == (0.0916, 0.0166)

    (tmp_path / "out.txt").write_text("F1207 caffe.cpp:1] Check failed\n")
    with pytest.raises(RuntimeError, match="caffe time printed no average"):
        caffe_peers.time_caffe(args, dict(os.environ), tmp_path / "net.prototxt", ["data"], 5)


def test_unknown_net_is_refused(capsys) -> None:
    argv = sys.argv
    sys.argv = ["caffe_peers.py", "--nets", "alexnet,resnet"]
    try:
        with pytest.raises(SystemExit) as exit_info:
            caffe_peers.main()
    finally:
        sys.argv = argv
    assert exit_info.value.code == 2
    assert "--nets takes alexnet, lenet, cifar10 (got resnet)" in capsys.readouterr().err
