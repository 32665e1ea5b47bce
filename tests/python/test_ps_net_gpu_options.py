"""`ps-net time`'s GPU speed options (issue 28; docs/gpu.md): --nondeterministic,
--cudnn-api legacy|graph and --cuda-graphs reach the engine and come back in the
`time` event (cudnn_deterministic, cudnn_api, cuda_graphs, graph_launches,
whole_passes); bad values are usage errors naming the flag. Deterministic cuDNN
algorithms stay the default. The run on a GPU skips here without one."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from pstrain_testing import find_build_dir

NET = """name: 'small'
layer { name: 'x' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: 'conv' type: 'Convolution' bottom: 'x' top: 'c'
        convolution_param { num_output: 4 kernel_size: 3
                            weight_filler { type: 'gaussian' std: 0.1 } } }
layer { name: 'relu' type: 'ReLU' bottom: 'c' top: 'c' }
layer { name: 'ip' type: 'InnerProduct' bottom: 'c' top: 'y'
        inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.1 } } }
"""


@pytest.fixture(scope="module")
def ps_net() -> pathlib.Path:
    return find_build_dir(("ps-net",)) / "bin" / "ps-net"


@pytest.fixture
def model(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "small.prototxt"
    path.write_text(NET)
    return str(path)


def run_time(ps_net: pathlib.Path, model: str, *flags: str, env_extra: dict | None = None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PSTRAIN_CUDNN_NONDETERMINISTIC", "PSTRAIN_CUDNN_API")}
    env.update(env_extra or {})
    return subprocess.run([str(ps_net), "time", "--model", model, "--iterations", "3",
                           "--engine-cache", "none", *flags], capture_output=True, text=True,
                          timeout=120, env=env)


def time_event(ps_net: pathlib.Path, model: str, *flags: str, **kw) -> dict:
    done = run_time(ps_net, model, "--json", *flags, **kw)
    assert done.returncode == 0, done.stderr
    event = json.loads(done.stdout.splitlines()[-1])
    assert event["event"] == "time"
    return event


def test_deterministic_legacy_and_no_graphs_by_default(ps_net, model):
    event = time_event(ps_net, model)
    assert event["cudnn_deterministic"] is True
    assert event["cudnn_api"] == "legacy"
    assert event["cuda_graphs"] == "off"
    assert event["graph_launches"] == 0
    assert event["whole_passes"] is False  # on the CPU the layer passes give the total


def test_the_flags_reach_the_engine(ps_net, model):
    event = time_event(ps_net, model, "--nondeterministic", "--cudnn-api", "graph")
    assert event["cudnn_deterministic"] is False
    assert event["cudnn_api"] == "graph"
    assert event["cuda_graphs"] == "off"


def test_the_environment_sets_the_starting_values_and_a_flag_wins(ps_net, model):
    event = time_event(ps_net, model, env_extra={"PSTRAIN_CUDNN_NONDETERMINISTIC": "1",
                                                 "PSTRAIN_CUDNN_API": "graph"})
    assert event["cudnn_deterministic"] is False and event["cudnn_api"] == "graph"
    event = time_event(ps_net, model, "--cudnn-api", "legacy",
                       env_extra={"PSTRAIN_CUDNN_API": "graph"})
    assert event["cudnn_api"] == "legacy"


@pytest.mark.parametrize("flags, message", [
    (("--cudnn-api", "Graph"), "ps-net: --cudnn-api: 'Graph' is not legacy or graph"),
    (("--cudnn-api", ""), "ps-net: --cudnn-api: '' is not legacy or graph"),
    (("--cuda-graphs",), "ps-net: --cuda-graphs goes with --gpu N (a CUDA graph replays GPU work)"),
])
def test_bad_values_are_usage_errors_naming_the_flag(ps_net, model, flags, message):
    done = run_time(ps_net, model, *flags)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[0] == message


def test_the_readable_output_says_nothing_of_the_gpu_on_the_cpu(ps_net, model):
    done = run_time(ps_net, model, "--nondeterministic")
    assert done.returncode == 0, done.stderr
    assert "Average Forward-Backward" in done.stdout
    assert "CUDA graphs" not in done.stdout


def test_on_the_gpu_whole_passes_run_as_one_captured_graph(ps_net, model):
    devices = subprocess.run([str(ps_net), "devices", "--json"], capture_output=True, text=True,
                             timeout=60)
    found = json.loads(devices.stdout.splitlines()[-1])
    if not found.get("cuda_devices"):
        pytest.skip(f"no GPU here: {found.get('summary')}")
    eager = time_event(ps_net, model, "--gpu", "0")
    assert eager["whole_passes"] is True and eager["cuda_graphs"] == "off"
    event = time_event(ps_net, model, "--gpu", "0", "--cuda-graphs", "--nondeterministic")
    assert event["whole_passes"] is True
    assert event["cuda_graphs"] == "on"
    assert event["graph_launches"] == 3 + 1  # the untimed first pass, then the timed ones
    assert event["cudnn_deterministic"] is False


def test_train_takes_the_cudnn_flags_and_checks_them(ps_net, tmp_path):
    net = tmp_path / "net.prototxt"
    net.write_text(NET.replace("'x' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 "
                               "dim: 8 dim: 8 } }",
                               "'x' type: 'DummyData' top: 'x' top: 't' dummy_data_param { "
                               "shape { dim: 2 dim: 3 dim: 8 dim: 8 } shape { dim: 2 dim: 2 } "
                               "data_filler { type: 'gaussian' } }")
                   + "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 't' }\n")
    solver = tmp_path / "solver.prototxt"
    solver.write_text(f'net: "{net}"\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 2\n'
                      'display: 1\nsnapshot_after_train: false\n')
    base = [str(ps_net), "train", "--solver", str(solver), "--engine-cache", "none"]
    ok = subprocess.run(base + ["--nondeterministic", "--cudnn-api", "graph"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(base + ["--cudnn-api", "nope"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.splitlines()[0] == "ps-net: --cudnn-api: 'nope' is not legacy or graph"
    several = subprocess.run(base + ["--gpu", "0,1", "--nondeterministic"], capture_output=True,
                             text=True, timeout=120)
    assert several.returncode == 2
    assert several.stderr.splitlines()[0] == (
        "ps-net: --nondeterministic and --cudnn-api go with one GPU; with -gpu 0,1 the workers "
        "take PSTRAIN_CUDNN_NONDETERMINISTIC and PSTRAIN_CUDNN_API from the environment")
