"""Caffe's net-state flags on ps-net (tools/caffe.cpp's -phase, -level, -stage):
`time` takes -phase TRAIN|TEST (and train|test), -level N and -stage a,b; `test`
takes -level and -stage (TEST phase); `train` puts -level and -stage into the
solver's train_state. Layers gated by include/exclude { stage, min_level, phase }
appear or not exactly as pycaffe's Net(file, phase, level=, stages=) builds them."""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from pstrain_testing import find_build_dir

# Every gated layer reads 'a' and writes its own top, so the rows name exactly the
# layers the state keeps (a split layer appears when 'a' has several readers).
STAGED = """name: 'staged'
layer { name: 'data' type: 'DummyData' top: 'data'
        dummy_data_param { shape { dim: 2 dim: 3 } data_filler { type: 'gaussian' std: 1 } } }
layer { name: 'always' type: 'InnerProduct' bottom: 'data' top: 'a'
        inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'deploy_only' type: 'ReLU' bottom: 'a' top: 'r' include { stage: 'deploy' } }
layer { name: 'not_deploy' type: 'Sigmoid' bottom: 'a' top: 's' exclude { stage: 'deploy' } }
layer { name: 'both' type: 'TanH' bottom: 'a' top: 't'
        include { stage: 'deploy' stage: 'extra' } }
layer { name: 'level2' type: 'AbsVal' bottom: 'a' top: 'l' include { min_level: 2 } }
layer { name: 'test_only' type: 'Power' bottom: 'a' top: 'p' include { phase: TEST } }
"""

# Output y = 3 * (1+1+1) = 9 with stage 'big', 3 without; times 10 at level >= 1.
SCALED = """name: 'scaled'
layer { name: 'data' type: 'DummyData' top: 'x' top: 'target'
        dummy_data_param { shape { dim: 2 dim: 3 }
                           data_filler { type: 'constant' value: 1 }
                           data_filler { type: 'constant' value: 0 } } }
layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'h' param { lr_mult: 0 }
        inner_product_param { num_output: 3 bias_term: false
                              weight_filler { type: 'constant' value: 1 } } }
layer { name: 'plain' type: 'Power' bottom: 'h' top: 'y' exclude { stage: 'big' } }
layer { name: 'big' type: 'Power' bottom: 'h' top: 'y' power_param { scale: 3 }
        include { stage: 'big' } }
layer { name: 'tenfold' type: 'Power' bottom: 'y' top: 'z' power_param { scale: 10 }
        include { min_level: 1 } }
layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 'target' top: 'loss' }
"""


@pytest.fixture(scope="module")
def ps_net() -> pathlib.Path:
    return find_build_dir(("ps-net",)) / "bin" / "ps-net"


def run(ps_net: pathlib.Path, *args: str, cwd: pathlib.Path | None = None):
    return subprocess.run([str(ps_net), *args, "--engine-cache", "none"], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def time_layers(ps_net: pathlib.Path, model: pathlib.Path, *flags: str) -> list[str]:
    done = run(ps_net, "time", "-model", str(model), "-iterations", "1", "--json", *flags)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows[-1]["event"] == "time"
    return [r["layer"] for r in rows if r["event"] == "layer_time"]


@pytest.fixture
def staged(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "staged.prototxt"
    path.write_text(STAGED)
    return path


def test_time_stage_selects_the_stage_gated_layers(ps_net, staged):
    assert time_layers(ps_net, staged) == ["data", "always", "not_deploy"]
    assert time_layers(ps_net, staged, "-stage", "deploy") == ["data", "always", "deploy_only"]
    # A layer that includes two stages needs both.
    assert time_layers(ps_net, staged, "-stage", "deploy,extra") == [
        "data", "always", "a_always_0_split", "deploy_only", "both"]
    assert time_layers(ps_net, staged, "--stage=extra") == ["data", "always", "not_deploy"]


def test_time_level_gates_min_level(ps_net, staged):
    assert time_layers(ps_net, staged, "-level", "1") == ["data", "always", "not_deploy"]
    assert time_layers(ps_net, staged, "-level", "2") == [
        "data", "always", "a_always_0_split", "not_deploy", "level2"]


def test_time_phase_in_caffes_capitals_and_in_lower_case(ps_net, staged):
    with_test = ["data", "always", "a_always_0_split", "not_deploy", "test_only"]
    assert time_layers(ps_net, staged, "-phase", "TEST") == with_test
    assert time_layers(ps_net, staged, "-phase=test") == with_test
    assert time_layers(ps_net, staged, "-phase", "TRAIN") == ["data", "always", "not_deploy"]
    assert time_layers(ps_net, staged, "-phase", "TEST", "-level", "3", "-stage", "extra") == [
        "data", "always", "a_always_0_split", "not_deploy", "level2", "test_only"]


def test_bad_phase_and_empty_stage_are_usage_errors(ps_net, staged):
    done = run(ps_net, "time", "-model", str(staged), "-phase", "Test")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "ps-net: --phase must be TRAIN or TEST (or train, test), got 'Test'")
    done = run(ps_net, "time", "-model", str(staged), "-stage", "a,,b")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == "ps-net: --stage 'a,,b': a stage name is empty"
    # Caffe's test command has no -phase (it is always TEST).
    done = run(ps_net, "test", "-model", str(staged), "-weights", "w", "-phase", "TEST")
    assert done.returncode == 2
    assert "unrecognised option '-phase'" in done.stderr.splitlines()[0]


def test_test_command_takes_stage_and_level(ps_net, tmp_path):
    model = tmp_path / "scaled.prototxt"
    model.write_text(SCALED)
    weights = tmp_path / "none.caffemodel"
    weights.write_bytes(b"")  # no layers: the constant fillers stay

    def outputs(*flags: str) -> dict:
        done = run(ps_net, "test", "-model", str(model), "-weights", str(weights),
                   "-iterations", "2", "--json", *flags)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    plain = outputs()
    assert "z[0]" not in plain and plain["loss"] == pytest.approx(3 * 3 * 6 / 4)
    big = outputs("-stage", "big")
    assert big["loss"] == pytest.approx(9 * 9 * 6 / 4)  # sum(y^2) / (2 * batch)
    leveled = outputs("-stage", "big", "-level", "1")
    assert leveled["z[0]"] == pytest.approx(90) and leveled["loss"] == big["loss"]


def test_train_puts_level_and_stage_into_the_train_state(ps_net, tmp_path):
    (tmp_path / "scaled.prototxt").write_text(SCALED)
    solver = tmp_path / "solver.prototxt"
    base = ("net: 'scaled.prototxt' base_lr: 0.1 lr_policy: 'fixed' max_iter: 1 display: 1 "
            "snapshot_after_train: false\n")

    def first_loss(text: str, *flags: str) -> float:
        solver.write_text(text)
        done = run(ps_net, "train", "-solver", str(solver), "--json", *flags, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[0])["loss"]

    assert first_loss(base) == pytest.approx(13.5)
    assert first_loss(base, "-stage", "big") == pytest.approx(121.5)
    # Stages are added to the solver's own; the solver's stage alone selects 'big' too.
    assert first_loss(base + "train_state { stage: 'big' }\n", "-stage", "other") == (
        pytest.approx(121.5))
    done = run(ps_net, "train", "-solver", str(solver), "-gpu", "0,1", "-stage", "big")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "ps-net: --level and --stage go with one GPU; with -gpu 0,1 set the solver's "
        "train_state { level stage } instead")
