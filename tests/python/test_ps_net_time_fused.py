"""`ps-net time` on a net with BatchNorm + Scale + ReLU in place and an Eltwise SUM with
a ReLU on its top (docs/user-guide.md: these run as one fused step; `ps-net time` shows
the layers as `fused`, `gpu-fused` on the GPU, the BatchNorm row holding the forward
time and the Scale row the backward time). Apart (PSTRAIN_FUSE_LAYERS=0) and under the
reference engine no row is fused."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from pstrain_testing import find_build_dir

NET = """name: 'fused_rows'
layer { name: 'data' type: 'Input' top: 'x' input_param { shape { dim: 8 dim: 8 dim: 24 dim: 24 } } }
layer { name: 'conv' type: 'Convolution' bottom: 'x' top: 'c'
        convolution_param { num_output: 16 kernel_size: 3 pad: 1
                            weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'bn' type: 'BatchNorm' bottom: 'c' top: 'c' }
layer { name: 'scale' type: 'Scale' bottom: 'c' top: 'c' scale_param { bias_term: true } }
layer { name: 'relu' type: 'ReLU' bottom: 'c' top: 'c' }
layer { name: 'side' type: 'Convolution' bottom: 'x' top: 'd'
        convolution_param { num_output: 16 kernel_size: 1
                            weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'sum' type: 'Eltwise' bottom: 'c' bottom: 'd' top: 's' }
layer { name: 'relu_sum' type: 'ReLU' bottom: 's' top: 's' }
layer { name: 'ip' type: 'InnerProduct' bottom: 's' top: 'y'
        inner_product_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.01 } } }
"""
FUSED_BN = ("bn", "scale", "relu")
FUSED_SUM = ("sum", "relu_sum")


@pytest.fixture(scope="module")
def ps_net() -> pathlib.Path:
    return find_build_dir(("ps-net",)) / "bin" / "ps-net"


@pytest.fixture
def model(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "fused_rows.prototxt"
    path.write_text(NET)
    return str(path)


def time_rows(ps_net: pathlib.Path, model: str, *flags: str, fuse: bool = True,
              json_lines: bool = True) -> str | dict[str, dict]:
    env = dict(os.environ)
    env.pop("PSTRAIN_FUSE_LAYERS", None)
    if not fuse:
        env["PSTRAIN_FUSE_LAYERS"] = "0"
    run = subprocess.run([str(ps_net), "time", "--model", model, "--iterations", "10",
                          "--threads", "1", *flags] + (["--json"] if json_lines else []),
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    if not json_lines:
        return run.stdout
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert rows[-1]["event"] == "time"
    return {r["layer"]: r for r in rows[:-1]}


def expect_the_fused_rows(rows: dict[str, dict], fused: str, fused_sum: bool) -> None:
    for name in FUSED_BN:
        assert rows[name]["implementation"] == fused, rows[name]
    for name in FUSED_SUM:
        assert (rows[name]["implementation"] == fused) == fused_sum, rows[name]
    for name in ("data", "conv", "side", "ip"):
        assert "fused" not in rows[name]["implementation"], rows[name]
    bn, scale, relu = (rows[n] for n in FUSED_BN)
    # The fused step's forward is in the BatchNorm row, its backward in the Scale row; the
    # other rows of the step hold calls that do nothing.
    assert bn["forward_ms"] > 0 and scale["backward_ms"] > 0
    assert bn["forward_ms"] > scale["forward_ms"] + relu["forward_ms"], (bn, scale, relu)
    assert scale["backward_ms"] > bn["backward_ms"] + relu["backward_ms"], (bn, scale, relu)
    if fused_sum:
        total, relu_sum = rows["sum"], rows["relu_sum"]
        assert total["forward_ms"] > relu_sum["forward_ms"], (total, relu_sum)
        assert total["backward_ms"] > relu_sum["backward_ms"], (total, relu_sum)


@pytest.mark.parametrize("engine", [None, "fast"])
def test_the_fused_layers_are_fused_rows(ps_net, model, engine):
    flags = () if engine is None else ("--engine", engine)
    expect_the_fused_rows(time_rows(ps_net, model, *flags), "fused", fused_sum=True)


def test_the_readable_table_names_the_fused_rows(ps_net, model):
    text = time_rows(ps_net, model, "--engine", "fast", json_lines=False)
    rows = {line.split()[0]: line for line in text.splitlines() if "forward:" in line}
    for name in FUSED_BN + FUSED_SUM:
        assert rows[name].endswith("  fused"), rows[name]
    assert rows["bn"].split()[1] == "BatchNorm" and rows["scale"].split()[1] == "Scale"
    assert not rows["conv"].endswith("fused")


@pytest.mark.parametrize("flags, fuse", [(("--engine", "fast"), False),
                                         (("--engine", "reference"), True)])
def test_apart_or_under_the_reference_engine_no_row_is_fused(ps_net, model, flags, fuse):
    rows = time_rows(ps_net, model, *flags, fuse=fuse)
    assert not [r for r in rows.values() if "fused" in r["implementation"]], rows
    # Each layer times its own work again: Scale forward, BatchNorm backward.
    assert rows["scale"]["forward_ms"] > 0 and rows["bn"]["backward_ms"] > 0


def test_on_the_gpu_the_rows_are_gpu_fused(ps_net, model):
    devices = subprocess.run([str(ps_net), "devices", "--json"], capture_output=True, text=True,
                             timeout=60)
    found = json.loads(devices.stdout.splitlines()[-1])
    if not found.get("cuda_devices"):
        pytest.skip(f"no GPU here: {found.get('summary')}")
    # On the GPU the Eltwise SUM and its ReLU stay apart (the CPU fuses them).
    expect_the_fused_rows(time_rows(ps_net, model, "--gpu", "0"), "gpu-fused", fused_sum=False)
