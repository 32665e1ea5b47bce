"""bench/caffe_torch.py's prototxt reader and Caffe's pooling arithmetic, which
need no PyTorch (the checks that build the nets in PyTorch are
bench/torch_shapes.py, run by hand where Debian's python3-torch is installed)."""
from __future__ import annotations

import math
import sys

import pytest

from pstrain_testing import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import caffe_torch  # noqa: E402  (parses prototxt without torch)


def test_caffe_pool_size_rounds_up_and_clips() -> None:
    assert caffe_torch.caffe_pool_size(32, 3, 0, 2) == 16       # ceil((32-3)/2) + 1
    assert caffe_torch.caffe_pool_size(55, 3, 0, 2) == 27       # AlexNet pool1
    assert caffe_torch.caffe_pool_size(5, 2, 1, 2) == 3         # a window in the padding only
    #                                                             is dropped
    assert math.floor((32 - 3) / 2) + 1 == 15


def test_parse_prototxt_reports_the_line() -> None:
    net = caffe_torch.parse_prototxt('name: "x"\nlayer { name: "a" top: "a" }\n')
    assert caffe_torch.one(net, "name") == "x" and net["layer"][0]["top"] == ["a"]
    with pytest.raises(ValueError, match=r"<prototxt>:3"):
        caffe_torch.parse_prototxt('layer {\n name: "a"\n }}\n')
