"""A Caffe user's habits with ps-net and the dry run (issue 31): `ps-net train`'s
output read as Caffe's tools/extra/parse_log.py reads a log; `-gpu 0,1` and
`-gpu all` as a local bsp parameter-server job; `ps-train --dry-run` building the
nets in the engine (`ps-net check`), each problem named by the user's file and line."""
from __future__ import annotations

import datetime
import json
import math
import pathlib
import re
import subprocess

import pytest
import yaml

from ps_train_util import write_job
from pstrain import programs
from pstrain.cli import main

# parse_log.py's regexes (retyped).
ITERATION = re.compile(r"Iteration (\d+)")
TRAIN_OUTPUT = re.compile(r"Train net output #(\d+): (\S+) = ([\.\deE+-]+)")
TEST_OUTPUT = re.compile(r"Test net output #(\d+): (\S+) = ([\.\deE+-]+)")
LR = re.compile(r"lr = ([-+]?[0-9]*\.?[0-9]+([eE]?[-+]?[0-9]+)?)")


def log_time(line: str, year: int) -> datetime.datetime:
    """The time of glog's prefix `I1206 21:00:00.123456 ...`; ValueError for a line
    without one (parse_log.py skips those after the first iteration)."""
    words = line.split()
    if len(words) < 2 or len(words[0]) != 5 or words[0][0] not in "IWEF":
        raise ValueError(line)
    clock, _, micro = words[1].partition(".")
    hour, minute, second = (int(x) for x in clock.split(":"))
    return datetime.datetime(year, int(words[0][1:3]), int(words[0][3:5]), hour, minute, second,
                             int(micro))


def parse_log(text: str) -> tuple[list[dict], list[dict]]:
    """The train and test rows parse_log.py would write: NumIters, Seconds (from the
    `Solving` line), LearningRate (the last `lr =` seen) and each net output."""
    year = datetime.date.today().year
    lines = text.splitlines()
    start = next(log_time(line, year) for line in lines if "Solving" in line)
    tables: dict[str, list[dict]] = {"train": [], "test": []}
    rows: dict[str, dict | None] = {"train": None, "test": None}
    iteration, lr = -1, math.nan
    for line in lines:
        if m := ITERATION.search(line):
            iteration = int(m.group(1))
        if iteration == -1:
            continue
        try:
            seconds = (log_time(line, year) - start).total_seconds()
        except ValueError:
            continue
        if m := LR.search(line):
            lr = float(m.group(1))
        for kind, regex in (("train", TRAIN_OUTPUT), ("test", TEST_OUTPUT)):
            table, row = tables[kind], rows[kind]
            if m := regex.search(line):
                if row is None or row["NumIters"] != iteration:
                    if row is not None:
                        table.append(row)
                    row = {"NumIters": iteration, "Seconds": seconds, "LearningRate": lr}
                row[m.group(2)] = float(m.group(3))
            if row is not None and table and len(row) == len(table[0]):
                table.append(row)
                row = None
            rows[kind] = row
    for kind in tables:
        if rows[kind] is not None:
            tables[kind].append(rows[kind])
    return tables["train"], tables["test"]


NET = """name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 }
                           data_filler { type: "gaussian" std: 1 }
                           data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "s" bottom: "label" top: "accuracy"
        include { phase: TEST } }
"""

SOLVER = """net: "net.prototxt"
base_lr: 0.05
lr_policy: "step" gamma: 0.5 stepsize: 10
max_iter: 20
display: 5
test_iter: 2
test_interval: 10
random_seed: 7
snapshot_after_train: false
"""


@pytest.fixture
def solver(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "net.prototxt").write_text(NET)
    (tmp_path / "solver.prototxt").write_text(SOLVER)
    return tmp_path / "solver.prototxt"


def ps_net(build_dir: pathlib.Path, *args, cwd: pathlib.Path | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(build_dir / "bin" / "ps-net"), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def test_ps_net_train_output_reads_as_a_caffe_log(build_dir, solver):
    """parse_log.py's logic finds every train and test value of `--json`, at times that
    run forward from the `Solving` line."""
    text = ps_net(build_dir, "train", "-solver", solver, "-threads", "1")
    assert text.returncode == 0, text.stderr
    events = ps_net(build_dir, "train", "-solver", solver, "-threads", "1", "--json")
    assert events.returncode == 0, events.stderr
    records = [json.loads(line) for line in events.stdout.splitlines()]
    train, test = parse_log(text.stdout)

    expected = [r for r in records if r["event"] == "train"]
    assert [row["NumIters"] for row in train] == [r["iter"] for r in expected] == [0, 5, 10, 15]
    for row, r in zip(train, expected):
        assert row["loss"] == pytest.approx(r["loss"], rel=1e-5)
    # Caffe prints the rate after the outputs: a row carries the rate seen before it.
    assert [row["LearningRate"] for row in train[1:]] == pytest.approx(
        [r["lr"] for r in expected[:-1]])
    expected = [r for r in records if r["event"] == "test"]
    assert [row["NumIters"] for row in test] == [r["iter"] for r in expected] == [0, 10, 20]
    for row, r in zip(test, expected):
        assert row["accuracy"] == pytest.approx(r["accuracy"], rel=1e-5)
        assert row["loss"] == pytest.approx(r["loss"], rel=1e-5)
    seconds = [row["Seconds"] for row in sorted(train + test, key=lambda r: r["NumIters"])]
    assert seconds[0] >= 0
    assert text.stdout.splitlines()[-1].endswith("] Optimization Done.")


def generated_job(stdout: str) -> dict:
    return yaml.safe_load(stdout.split("# the job ps-net generates\n", 1)[1].split("\n\n", 1)[0])


def test_gpu_list_dry_run_shows_one_worker_per_gpu(build_dir, solver, tmp_path, capsys):
    weighted = ps_net(build_dir, "train", "-solver", "solver.prototxt", "-gpu", "0,1",
                      "-weights", "a.caffemodel,b.caffemodel", "--dry-run", cwd=tmp_path)
    assert generated_job(weighted.stdout)["solver_overrides"] == {
        "weights": [f"{tmp_path / 'a.caffemodel'},{tmp_path / 'b.caffemodel'}"]}

    dry = ps_net(build_dir, "train", "-solver", "solver.prototxt", "-gpu", "0,1", "--dry-run",
                 cwd=tmp_path)
    job = generated_job(dry.stdout)
    assert job["cluster"] == {"servers": 1, "server_device": "cpu", "workers": 2,
                              "worker_devices": [0, 1]}
    assert job["consistency"] == {"mode": "bsp"}
    assert job["solver"] == str(solver)
    assert "solver_overrides" not in job
    assert job["output"] == str(tmp_path / "runs")
    if programs.cuda_build() and programs.gpu_count() >= 2:
        assert dry.returncode == 0, dry.stderr
        assert "CUDA_VISIBLE_DEVICES=0 " in dry.stdout and "CUDA_VISIBLE_DEVICES=1 " in dry.stdout
    else:
        assert dry.returncode == 1
        assert dry.stderr.startswith("ps-net: -gpu 0,1: ")
    assert not (tmp_path / "runs").exists()

    # ps-train takes the generated job: with CPU workers in place of the GPUs, its dry
    # run has one server and two bsp workers.
    job["cluster"]["worker_devices"] = "cpu"
    code = main([str(write_job(tmp_path, job)), "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    workers = [line for line in out.splitlines() if "ps-worker " in line]
    assert len(workers) == 2 and all("--mode bsp" in w for w in workers)
    assert sum("ps-server " in line for line in out.splitlines()) == 1


@pytest.mark.skipif(programs.gpu_count() > 0, reason="a machine with a GPU trains on it")
def test_gpu_list_refused_clearly_without_cuda_or_gpus(build_dir, solver, tmp_path):
    cuda = programs.cuda_build()
    for flag in ("0,1", "all"):
        run = ps_net(build_dir, "train", "-solver", solver, "-gpu", flag, cwd=tmp_path)
        assert run.returncode == 1
        assert run.stdout == ""
        if not cuda:
            assert run.stderr == (f"ps-net: -gpu {flag}: this build has no CUDA; training on "
                                  f"GPUs needs a CUDA build (cmake -DPSTRAIN_WITH_CUDA=ON) and "
                                  f"the GPUs (ps-net devices lists them)\n")
        else:  # a CUDA build on a machine without GPUs (CI): one line naming the flag
            assert run.stderr.startswith(f"ps-net: -gpu {flag}: "), run.stderr
            assert run.stderr.count("\n") == 1, run.stderr
    assert not (tmp_path / "runs").exists()
    # One GPU keeps the single-process path and its message.
    run = ps_net(build_dir, "train", "-solver", solver, "-gpu", "0", cwd=tmp_path)
    assert run.returncode == 1
    if not cuda:
        assert run.stderr == "ps-net: --gpu 0 needs a CUDA build\n"
    else:
        assert run.stderr.startswith("ps-net: ") and "0" in run.stderr, run.stderr


# Layers added after the loss (line 9 of the net) in the dry-run cases.
BROKEN = {
    "misspelt": ('layer { name: "conv" type: "Convoluton" bottom: "data" top: "c" }',
                 "layer 'conv' (Convoluton): unknown layer type 'Convoluton'; did you mean "
                 "'Convolution'?"),
    "no_producer": ('layer { name: "r" type: "ReLU" bottom: "dta" top: "r" }',
                    "layer 'r' (ReLU): unknown bottom blob 'dta'"),
    "prior_box": ('layer { name: "p" type: "PriorBox" bottom: "data" top: "p" }',
                  "layer 'p' (PriorBox): unknown layer type 'PriorBox': not a Caffe layer type"),
    "hdf5": ('layer { name: "h5" type: "HDF5Data" top: "h" hdf5_data_param { source: '
             '"h5list.txt" batch_size: 4 } }',
             "layer 'h5' (HDF5Data): h5list.txt: cannot open the list of HDF5 files"),
}


def dry_run_job(tmp_path: pathlib.Path, net: str, solver_extra: str = "") -> pathlib.Path:
    (tmp_path / "net.prototxt").write_text(net)
    (tmp_path / "solver.prototxt").write_text(SOLVER + solver_extra)
    return write_job(tmp_path, {"name": "habits", "solver": "solver.prototxt",
                                "output": str(tmp_path / "runs"), "security": "none"})


def test_dry_run_builds_the_nets_in_the_engine(tmp_path, capsys):
    net_file, solver_file = tmp_path / "net.prototxt", tmp_path / "solver.prototxt"
    lines = NET.splitlines(keepends=True)
    good = dry_run_job(tmp_path, NET)
    assert main([str(good), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"# net check: {solver_file}: ok: TRAIN net 'tiny' (3 layers" in out

    for name, (layer, expected) in BROKEN.items():
        job = dry_run_job(tmp_path, "".join(lines[:8]) + layer + "\n" + "".join(lines[8:]))
        code = main([str(job), "--dry-run"])
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert err.startswith(f"ps-train: {job}: solver: {net_file}:9: {expected}"), (name, err)

    job = dry_run_job(tmp_path, NET, "snapshot_format: HDF5\n")
    assert main([str(job), "--dry-run"]) == 0
    capsys.readouterr()
    slash = NET.replace('name: "ip"', 'name: "fc/ip"', 1)
    job = dry_run_job(tmp_path, slash, "snapshot_format: HDF5\n")
    assert main([str(job), "--dry-run"]) == 2
    assert capsys.readouterr().err == (f"ps-train: {job}: solver: {solver_file}:10: "
                                       f"snapshot_format HDF5 cannot write layer 'fc/ip' (a '/' "
                                       f"in its name); use BINARYPROTO\n")

    data_net = NET.replace('type: "DummyData"', 'type: "Data" data_param { source: '
                           '"absent_lmdb" batch_size: 4 }', 1)
    job = dry_run_job(tmp_path, data_net)
    assert main([str(job), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{net_file}:2: layer 'data': data source 'absent_lmdb' not found" in err, err
    assert not (tmp_path / "runs").exists()


def test_ps_net_check_names_a_missing_data_source(build_dir, tmp_path):
    data_net = NET.replace('type: "DummyData"', 'type: "Data" data_param { source: '
                           '"absent_lmdb" batch_size: 4 }', 1)
    dry_run_job(tmp_path, data_net)
    run = ps_net(build_dir, "check", "-solver", "solver.prototxt", cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr.startswith("ps-net: net.prototxt:2: layer 'data' (Data): absent_lmdb: "
                                 "cannot open LMDB"), run.stderr


def test_ps_net_check_says_none_for_a_net_without_outputs(build_dir, solver, tmp_path):
    # A loss layer without a top (Caffe's finetune_pascal_detection net does
    # this): Caffe gives it an anonymous top, so the net has no outputs.
    (tmp_path / "net.prototxt").write_text(
        NET.replace(' top: "loss" }', " }").replace('top: "accuracy"', 'top: "acc"'))
    run = ps_net(build_dir, "check", "-solver", "solver.prototxt", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ("solver.prototxt: ok: TRAIN net 'tiny' (3 layers, 21 learnable values, "
                          "inputs none, outputs none), 1 TEST net\n")
