"""logs/<role>-<rank>.caffe.log: the events in Caffe's glog format, read with the
regexes of Caffe's tools/extra/parse_log.py; ranks and times in metrics.jsonl."""
from __future__ import annotations

import datetime
import json
import re

import pytest

from pstrain.caffelog import event_lines, glog_prefix

from test_run import tiny_run  # noqa: F401  (the module's 60-iteration run)

# The regexes parse_log.py uses (re-typed here).
ITERATION = re.compile(r"Iteration (\d+)")
LR = re.compile(r", lr = ([-+]?[0-9]*\.?[0-9]+([eE]?[-+]?[0-9]+)?)")
TRAIN_OUTPUT = re.compile(r"Train net output #(\d+): (\S+) = ([\.\deE+-]+)")
TEST_OUTPUT = re.compile(r"Test net output #(\d+): (\S+) = ([\.\deE+-]+)")
PREFIX_TIME = re.compile(r"[IWEF](\d\d\d\d) (\d\d:\d\d:\d\d\.\d+)")


def parse(text: str) -> dict:
    """What parse_log.py would gather: {(kind, iteration): {name: value}}, lrs, times."""
    lines = text.splitlines()
    assert "Solving" in lines[0]
    found: dict = {"train": {}, "test": {}, "lr": {}, "times": []}
    iteration = -1
    for line in lines:
        m = ITERATION.search(line)
        if m:
            iteration = int(m.group(1))
        t = PREFIX_TIME.search(line)
        assert t, line
        found["times"].append(datetime.datetime.strptime(
            f"{t.group(1)} {t.group(2)}", "%m%d %H:%M:%S.%f"))
        if iteration < 0:
            continue
        if m := LR.search(line):
            found["lr"][iteration] = float(m.group(1))
        if m := TRAIN_OUTPUT.search(line):
            found["train"].setdefault(iteration, {})[m.group(2)] = float(m.group(3))
        if m := TEST_OUTPUT.search(line):
            found["test"].setdefault(iteration, {})[m.group(2)] = float(m.group(3))
    return found


def metrics(run_dir, role: str, rank: int, event: str) -> list[dict]:
    recs = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in recs if r["role"] == role and r["rank"] == rank and r["event"] == event]


@pytest.mark.parametrize("rank", [0, 1])
def test_caffe_log_holds_the_workers_metrics(tiny_run, rank):  # noqa: F811
    run_dir = tiny_run.run_dir
    found = parse((run_dir / "logs" / f"worker-{rank}.caffe.log").read_text())
    train = metrics(run_dir, "worker", rank, "train")
    assert train
    assert sorted(found["train"]) == [r["iter"] for r in train]
    for r in train:
        assert found["train"][r["iter"]]["loss"] == pytest.approx(r["loss"], rel=1e-5)
        assert found["lr"][r["iter"]] == pytest.approx(r["lr"], rel=1e-5)
    tests = metrics(run_dir, "worker", rank, "test")
    if rank == 0:
        assert [r["iter"] for r in tests] == [0, 30, 60]
    assert sorted(found["test"]) == [r["iter"] for r in tests]
    for r in tests:
        assert found["test"][r["iter"]]["accuracy"] == pytest.approx(r["accuracy"], rel=1e-5)
        assert found["test"][r["iter"]]["loss"] == pytest.approx(r["loss"], rel=1e-5)
    assert found["times"] == sorted(found["times"])


def test_server_caffe_log(tiny_run):  # noqa: F811
    text = (tiny_run.run_dir / "logs" / "server-0.caffe.log").read_text()
    assert text.startswith("I") and "Solving server-0" in text.splitlines()[0]
    assert "initialized by worker 0" in text and "done:" in text
    times = parse(text)["times"]
    assert times == sorted(times)


def test_metrics_have_times_and_int_ranks(tiny_run):  # noqa: F811
    recs = [json.loads(l) for l in
            (tiny_run.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert {r["role"] for r in recs} == {"worker", "server"}
    for r in recs:
        assert isinstance(r["rank"], int) and not isinstance(r["rank"], bool), r
        assert isinstance(r["time"], float) and r["time"] > 1.6e9, r
    for role, rank in (("worker", 0), ("worker", 1), ("server", 0)):
        times = [r["time"] for r in recs if r["role"] == role and r["rank"] == rank]
        assert times and times == sorted(times)


def test_event_lines_format():
    lines = event_lines({"event": "train", "iter": 20, "loss": 0.5, "lr": 0.01,
                         "iters_per_second": 10.0}, 10)
    assert lines == ["solver.cpp:218\tIteration 20 (10 iter/s, 1s/10 iters), loss = 0.5",
                     "solver.cpp:237\t    Train net output #0: loss = 0.5 (* 1 = 0.5 loss)",
                     "sgd_solver.cpp:105\tIteration 20, lr = 0.01"]
    lines = event_lines({"event": "test", "iter": 30, "test0/accuracy": 0.5,
                         "test1/accuracy": 0.25}, None)
    assert lines == ["solver.cpp:330\tIteration 30, Testing net (#0)",
                     "solver.cpp:397\t    Test net output #0: accuracy = 0.5",
                     "solver.cpp:330\tIteration 30, Testing net (#1)",
                     "solver.cpp:397\t    Test net output #0: accuracy = 0.25"]
    assert PREFIX_TIME.match(glog_prefix(1.7e9, 42, "solver.cpp:218"))
    # Caffe's two snapshot lines (Solver::SnapshotToBinaryProto, SnapshotToHDF5)
    assert event_lines({"event": "snapshot", "iter": 5, "path": "s/x_iter_5.caffemodel"},
                       None) == ["solver.cpp:464\tSnapshotting to binary proto file "
                                 "s/x_iter_5.caffemodel"]
    assert event_lines({"event": "snapshot", "iter": 5, "path": "s/x_iter_5.caffemodel.h5"},
                       None) == ["solver.cpp:474\tSnapshotting to HDF5 file s/x_iter_5.caffemodel.h5"]


CONV_NET = """name: "conv"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "c"
        convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "ip" type: "InnerProduct" bottom: "c" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


def test_engine_lines_keep_their_level_and_errors_are_e(build_dir, tmp_path):
    """ps-worker writes engine auto's choices as glog lines (I): the Caffe log copies them
    with their level, while a line that is not glog's (the error at the end) is E."""
    import subprocess

    from pstrain.caffelog import CaffeLog

    (tmp_path / "net.prototxt").write_text(CONV_NET)
    (tmp_path / "solver.prototxt").write_text(
        f'net: "{tmp_path / "net.prototxt"}"\nbase_lr: 0.1\nlr_policy: "fixed"\nmax_iter: 1\n')
    # No server listens on port 1: the worker sets its net up, then gives up after 1 s.
    run = subprocess.run([str(build_dir / "bin" / "ps-worker"), "--solver",
                          str(tmp_path / "solver.prototxt"), "--servers", "tcp://127.0.0.1:1",
                          "--timeout-s", "1", "--engine", "auto", "--engine-cache", "none",
                          "--threads", "1"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 75, run.stderr
    log = CaffeLog(tmp_path / "worker-0.caffe.log", run.returncode, "worker-0")
    for line in run.stderr.splitlines():
        log.text(line)
    log.close()
    lines = (tmp_path / "worker-0.caffe.log").read_text().splitlines()
    engine = [line for line in lines if "engine auto: layer 'conv1' (Convolution)" in line]
    assert engine and all(line.startswith("I") and PREFIX_TIME.match(line) for line in engine), \
        lines
    assert lines[-1].startswith("E") and "ps-worker 0: " in lines[-1], lines
