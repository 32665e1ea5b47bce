"""The ImageNet nets of configs/nets build and run forward and backward (ps-net time, batch 2)."""
import json
import subprocess

import pytest

from conftest import ROOT

NETS = ["alexnet", "googlenet", "vgg16", "resnet50"]
EXPECTED_FIRST_LAST = {
    "alexnet": ("conv1", "prob"),
    "googlenet": ("conv1/7x7_s2", "prob"),
    "vgg16": ("conv1_1", "prob"),
    "resnet50": ("conv1", "prob"),
}


@pytest.mark.parametrize("net", NETS)
def test_deploy_net_times_forward_and_backward(build_dir, net):
    model = ROOT / "configs" / "nets" / f"{net}_deploy.prototxt"
    proc = subprocess.run([str(build_dir / "bin/ps-net"), "time", "--model", str(model),
                           "--batch", "2", "--iterations", "1", "--json", "--threads", "2",
                           # each layer's default: engine auto's timing of every
                           # candidate would double this test's time
                           "--engine", "fast"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    layers = [e for e in events if e["event"] == "layer_time"]
    summary = [e for e in events if e["event"] == "time"]
    assert len(summary) == 1
    first, last = EXPECTED_FIRST_LAST[net]
    names = [l["layer"] for l in layers]
    assert first in names and names[-1] == last
    convs = [l for l in layers if l["type"] == "Convolution"]
    assert convs and all(l["backward_ms"] > 0 for l in convs), "backward did not run"
    assert summary[0]["forward_ms"] > 0 and summary[0]["backward_ms"] > 0
