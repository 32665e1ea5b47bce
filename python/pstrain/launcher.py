"""Starting and stopping the C++ processes.

Every process runs in its own session (process group), with stdout and stderr
merged into one pipe. A reader thread copies each line into the process's log
file, writes the Caffe-format human log next to it (caffelog.py) and hands the
JSON event lines to a sink, with `rank` made a number (workers print a string). `start_server` / `start_worker`
start one process by hand (experiments, tests); the runner uses the same handles.

Every child gets PR_SET_PDEATHSIG (SIGTERM): when ps-train dies, even by
SIGKILL, its children are told to stop. A process on another host is an ssh
session (remote.py) whose stdin stays open as long as ps-train lives
(keep_stdin): the host ends the program when the session ends.
"""
from __future__ import annotations

import ctypes
import json
import os
import pathlib
import signal
import subprocess
import threading
import time
from collections import deque
from typing import Any, Callable, Sequence

from . import exitcodes, programs
from .caffelog import CaffeLog
from .errors import JobError

EventSink = Callable[["ProcessHandle", dict], None]


class ProcessHandle:
    """A started ps-server or ps-worker: the Popen, its events, its endpoint (servers)."""

    def __init__(self, cmd: Sequence[str], *, role: str, rank: int,
                 log_path: pathlib.Path | None = None, sink: EventSink | None = None,
                 cwd: pathlib.Path | None = None, env: dict[str, str] | None = None,
                 keep_stdin: bool = False, host: str | None = None):
        self.cmd = list(cmd)
        self.role, self.rank = role, rank
        self.log_path = log_path
        self.events: list[dict] = []
        self.tail: deque[str] = deque(maxlen=20)   # the last non-JSON lines (errors)
        self.endpoint: str | None = None
        self.host = host                            # None: this machine
        self._sink = sink
        self._listening = threading.Event()
        self._log = open(log_path, "a", buffering=1) if log_path else None
        self.started_at = time.time()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL,
                                     text=True, bufsize=1, cwd=cwd, env=env,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        self._caffe_log = (CaffeLog(caffe_log_path(log_path), self.proc.pid, self.name)
                           if log_path else None)
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name=f"{role}-{rank}-reader")
        self._reader.start()

    @property
    def name(self) -> str:
        return f"{self.role}-{self.rank}"

    @property
    def where(self) -> str:
        """'worker-1 on 10.0.0.2' (or just the name on this machine)."""
        return f"{self.name} on {self.host}" if self.host else self.name

    @property
    def remote(self) -> bool:
        """Whether the process runs beyond this machine's reach (an ssh session):
        then a lost session reads as exit 255, retryable (exitcodes.is_retryable)."""
        return self.host is not None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.take_line(line)
        self.take_end()

    def take_line(self, line: str) -> None:
        """One line of the process's output (from the reader thread)."""
        if self._log:
            self._log.write(line)
        line = line.rstrip("\n")
        event = _parse_event(line)
        if event is None:
            if line.strip():
                self.tail.append(line)
                if self._caffe_log:
                    self._caffe_log.text(line)
            return
        self.events.append(event)
        if self._caffe_log:
            self._caffe_log.event(event)
        if event.get("event") == "listening":
            self.endpoint = event.get("endpoint")
            self._listening.set()
        if self._sink:
            self._sink(self, event)

    def take_end(self) -> None:
        """The end of the process's output."""
        self._listening.set()
        if self._log:
            self._log.close()
        if self._caffe_log:
            self._caffe_log.close()

    def wait_listening(self, timeout: float) -> str:
        """The endpoint the server reports; raises RuntimeError if it exits or is silent."""
        if not self._listening.wait(timeout) or self.endpoint is None:
            self.kill()
            why = "; ".join(self.tail) or f"no endpoint within {timeout:.0f} s"
            raise RuntimeError(f"{self.name} did not start: {why}")
        return self.endpoint

    def poll(self) -> int | None:
        """The exit status (None: running). On another host, a program killed by
        signal N reads -N, as here; 255 means the ssh session failed or was lost."""
        return self._status(self.proc.poll())

    def _status(self, rc: int | None) -> int | None:
        if rc is None:
            return None
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        if self.host and 128 < rc < 160:   # the remote wrapper's 128+N
            return -(rc - 128)
        return rc

    def wait(self, timeout: float) -> int | None:
        """The exit status, or None if still running after `timeout` seconds."""
        try:
            return self._status(self.proc.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            return None

    def signal(self, sig: int) -> None:
        """Sends `sig` to the process's whole group (it and anything it started)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait(10)

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds; the exit status."""
        self.terminate()
        rc = self.wait(grace)
        if rc is None:
            self.kill()
            rc = self.poll()
        return rc

    def join_output(self, timeout: float = 5.0) -> None:
        """Waits (bounded) until every line the process wrote has been read."""
        self._reader.join(timeout)

    def describe_exit(self) -> str:
        """'worker-1 exited with 1 (a permanent failure): <its last error line>'."""
        rc = self.poll()
        how = "is still running" if rc is None else exitcodes.describe(rc)
        if self.host and rc == exitcodes.LOST:
            how = "lost its ssh session (the host stopped answering, or ssh failed)"
        tail = f": {self.tail[-1]}" if self.tail else ""
        return f"{self.where} {how}{tail}"

    def __enter__(self) -> "ProcessHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc.poll() is None:
            self.kill()
        self.join_output()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent (ps-train) dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):   # not Linux: the process groups still get stopped
        pass


def _parse_event(line: str) -> dict | None:
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(event, dict) or "event" not in event:
        return None
    rank = event.get("rank")
    if isinstance(rank, str) and rank.isdigit():
        event["rank"] = int(rank)
    return event


def caffe_log_path(log_path: pathlib.Path) -> pathlib.Path:
    """logs/worker-0.log -> logs/worker-0.caffe.log."""
    return log_path.with_suffix(".caffe.log")


def start_server(solver: str | os.PathLike, *, shard: int = 0, num_servers: int = 1,
                 workers: int = 1, bind: str = "tcp://127.0.0.1:0", mode: str = "bsp",
                 staleness: int = 0, coordinator: str | None = None,
                 resume: str | os.PathLike | None = None, chunk_bytes: int = 1 << 20,
                 job_key: int = 0, log_path: pathlib.Path | None = None,
                 sink: EventSink | None = None, extra_args: Sequence[str] = (),
                 cwd: pathlib.Path | None = None, timeout: float = 30.0) -> ProcessHandle:
    """Starts one ps-server shard and waits until it reports its endpoint (handle.endpoint)."""
    cmd = [str(programs.find_program("ps-server")), "--shard", str(shard), "--num-servers",
           str(num_servers), "--workers", str(workers), "--bind", bind, "--solver", str(solver),
           "--mode", mode, "--staleness", str(staleness), "--chunk-bytes", str(chunk_bytes),
           "--job-key", str(job_key), "--json"]
    if coordinator:
        cmd += ["--coordinator", coordinator]
    if resume:
        cmd += ["--resume", str(resume)]
    handle = ProcessHandle(cmd + list(extra_args), role="server", rank=shard, log_path=log_path,
                           sink=sink, cwd=cwd)
    handle.wait_listening(timeout)
    return handle


def start_worker(solver: str | os.PathLike, servers: Sequence[str], *, rank: int = 0,
                 workers: int = 1, mode: str = "bsp", staleness: int = 0,
                 chunk_bytes: int = 1 << 20, job_key: int = 0, threads: int = 1,
                 straggle_ms: int = 0, straggle_jitter_ms: int = 0,
                 log_path: pathlib.Path | None = None, sink: EventSink | None = None,
                 extra_args: Sequence[str] = (), cwd: pathlib.Path | None = None
                 ) -> ProcessHandle:
    """Starts one ps-worker against the given server endpoints (shard order)."""
    if not servers:
        raise JobError("start_worker: servers: give at least one server endpoint")
    cmd = [str(programs.find_program("ps-worker")), "--solver", str(solver), "--rank", str(rank),
           "--workers", str(workers), "--servers", ",".join(servers), "--mode", mode,
           "--staleness", str(staleness), "--chunk-bytes", str(chunk_bytes), "--job-key",
           str(job_key), "--threads", str(threads), "--json"]
    if straggle_ms or straggle_jitter_ms:
        cmd += ["--straggle-ms", str(straggle_ms), "--straggle-jitter-ms", str(straggle_jitter_ms)]
    return ProcessHandle(cmd + list(extra_args), role="worker", rank=rank, log_path=log_path,
                         sink=sink, cwd=cwd)
