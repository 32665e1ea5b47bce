"""logs/<role>-<rank>.caffe.log: a process's events as Caffe's solver prints them.

Each line has glog's prefix (`I1204 17:28:33.123456 <pid> solver.cpp:218] `) with
the time the event reached ps-train and the process's pid, so that Caffe's
tools/extra/parse_log.py and other readers of Caffe logs read a PSTrain run:

    I... solver.cpp:279] Solving worker-0
    I... solver.cpp:330] Iteration 30, Testing net (#0)
    I... solver.cpp:397]     Test net output #0: accuracy = 0.664
    I... solver.cpp:397]     Test net output #1: loss = 0.8847 (* 1 = 0.8847 loss)
    I... solver.cpp:218] Iteration 30 (28.8 iter/s, 0.347s/10 iters), loss = 0.98
    I... solver.cpp:237]     Train net output #0: loss = 0.98 (* 1 = 0.98 loss)
    I... sgd_solver.cpp:105] Iteration 30, lr = 0.00998

Other events become one `key=value` line each. Lines that are not JSON are
copied: a line a program already wrote in glog's format (engine auto's choices,
`I... net_autotune.cpp:...] engine auto: ...`) as it is, with its own level;
any other line (an error message) with an `E` prefix. Not thread-safe: one
writer (the process's reader thread) per file.
"""
from __future__ import annotations

import datetime
import pathlib
import re
import time
from typing import TextIO

# Keys of an event that are not values of the net.
_META = {"event", "role", "rank", "iter", "time"}
# Values of a train event that describe the step, not the net's outputs.
_TRAIN_STATS = {"lr", "iters_per_second", "images_per_second", "pull_wait_seconds", "bytes_sent",
                "bytes_received", "staleness"}


# glog's prefix: level, MMDD HH:MM:SS.ffffff, thread id, file:line]
GLOG_LINE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^ \]]+:\d+\] ")


def glog_prefix(now: float, pid: int, where: str, level: str = "I") -> str:
    """`I1204 17:28:33.123456 12345 solver.cpp:218] ` for local time `now` (unix s)."""
    t = datetime.datetime.fromtimestamp(now)
    return f"{level}{t:%m%d %H:%M:%S.%f} {pid} {where}] "


def _num(v: float) -> str:
    return f"{v:.6g}"


def _output(kind: str, k: int, name: str, value: float) -> str:
    where = "solver.cpp:237" if kind == "Train" else "solver.cpp:397"
    text = f"    {kind} net output #{k}: {name} = {_num(value)}"
    if "loss" in name:                       # Caffe's loss weight, 1 for our nets' losses
        text += f" (* 1 = {_num(value)} loss)"
    return f"{where}\t{text}"


def event_lines(event: dict, last_train_iter: int | None) -> list[str]:
    """The `where] message` parts of the Caffe lines for one event (no prefix)."""
    kind, it = event.get("event"), event.get("iter")
    if kind == "train" and isinstance(it, int):
        loss = event.get("loss")
        ips = event.get("iters_per_second")
        head = f"Iteration {it}"
        if last_train_iter is not None and it > last_train_iter and isinstance(ips, (int, float)) \
                and ips > 0:
            gap = it - last_train_iter
            head += f" ({_num(ips)} iter/s, {gap / ips:.3g}s/{gap} iters)"
        out = [f"solver.cpp:218\t{head}, loss = {_num(loss)}" if isinstance(loss, (int, float))
               else f"solver.cpp:218\t{head}"]
        outputs = [(k, v) for k, v in event.items()
                   if k not in _META and k not in _TRAIN_STATS and isinstance(v, (int, float))]
        out += [_output("Train", n, k, v) for n, (k, v) in enumerate(outputs)]
        if isinstance(event.get("lr"), (int, float)):
            out.append(f"sgd_solver.cpp:105\tIteration {it}, lr = {_num(event['lr'])}")
        return out
    if kind == "test" and isinstance(it, int):
        nets: dict[str, list[tuple[str, float]]] = {}
        for k, v in event.items():
            if k in _META or k == "iterations" or not isinstance(v, (int, float)):
                continue
            net, _, name = k.rpartition("/")   # "test1/accuracy": test net 1
            nets.setdefault(net, []).append((name, v))
        out = []
        for j, (net, values) in enumerate(sorted(nets.items())):
            number = int(net[4:]) if net.startswith("test") and net[4:].isdigit() else j
            out.append(f"solver.cpp:330\tIteration {it}, Testing net (#{number})")
            out += [_output("Test", n, name, v) for n, (name, v) in enumerate(values)]
        return out
    if kind == "snapshot":
        path = str(event.get("path"))
        if path.endswith(".h5"):       # Caffe's SnapshotToHDF5 (snapshot_format: HDF5)
            return [f"solver.cpp:474\tSnapshotting to HDF5 file {path}"]
        return [f"solver.cpp:464\tSnapshotting to binary proto file {path}"]
    if kind == "done" and event.get("role") == "worker":
        return ["solver.cpp:310\tOptimization Done."]
    if kind == "log":
        return [f"ps-train\t{event.get('message', '')}"]
    rest = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("event", "role", "rank"))
    return [f"ps-train\t{kind}: {rest}"]


class CaffeLog:
    """Appends Caffe-format lines for one process to `path`; starts with the
    `Solving <name>` line that Caffe's parse_log.py takes as the start time."""

    def __init__(self, path: pathlib.Path, pid: int, name: str):
        self.path, self.pid = path, pid
        self._file: TextIO = open(path, "a", buffering=1)
        self._last_train_iter: int | None = None
        self._write(time.time(), "solver.cpp:279\tSolving " + name)

    def _write(self, now: float, line: str, level: str = "I") -> None:
        where, _, message = line.partition("\t")
        if not self._file.closed:
            self._file.write(glog_prefix(now, self.pid, where, level) + message + "\n")

    def event(self, event: dict, now: float | None = None) -> None:
        now = time.time() if now is None else now
        for line in event_lines(event, self._last_train_iter):
            self._write(now, line)
        if event.get("event") == "train" and isinstance(event.get("iter"), int):
            self._last_train_iter = event["iter"]

    def text(self, line: str, now: float | None = None) -> None:
        """A line that is not an event: a glog line as it is, else an error message (E)."""
        if GLOG_LINE.match(line):
            if not self._file.closed:
                self._file.write(line + "\n")
            return
        self._write(time.time() if now is None else now, "ps-train\t" + line, "E")

    def close(self) -> None:
        self._file.close()
