"""Starts a parameter-server job from the built programs, for the end-to-end tests.

Servers first (each binds 127.0.0.1 on a free port and prints its endpoint),
then the workers. Every process gets its own process group; whatever happens,
all of them are stopped before the function returns. Jobs are run by the
`ps-train` orchestrator (python/pstrain, tested in tests/python); these tests
keep this small launcher because they need exact control over each process's
flags (extra server/worker arguments, a given job key, raw stderr).

With merge_worker_stdout, the workers write their events into one shared
file opened for appending: each event is one line written by one write(),
so the file holds the events of all workers in the order they were written,
which is what a check of how far apart the workers' clocks were needs.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import tempfile
import time


@dataclasses.dataclass
class JobResult:
    returncodes: dict
    # Every JSON line of every process, with "source" added; with merged worker
    # output, the workers' events come first, in the order they were written.
    events: list
    stderr: dict

    def of(self, kind: str, source: str | None = None) -> list:
        return [e for e in self.events
                if e.get("event") == kind and (source is None or e["source"] == source)]


def _appending_temp_file():
    """An anonymous file opened with O_APPEND: every write goes to its end."""
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    file = open(path, "a+")
    os.unlink(path)
    return file


def _read_endpoint(proc: subprocess.Popen, deadline: float) -> str:
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"ps-server exited early: {proc.stderr.read()}")
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == "listening":
                return event["endpoint"]
    raise TimeoutError("ps-server did not report its endpoint")


def run_job(build_dir: pathlib.Path, solver: pathlib.Path, *, workers: int, servers: int = 1,
            mode: str = "bsp", staleness: int = 0, timeout: float = 300, cwd=None,
            worker_args: dict | None = None, server_args: list | None = None,
            resume: pathlib.Path | None = None, job_key: int = 4242,
            chunk_bytes: int = 1 << 20, merge_worker_stdout: bool = False,
            bind: str = "tcp://127.0.0.1:0") -> JobResult:
    bin_dir = pathlib.Path(build_dir) / "bin"
    deadline = time.monotonic() + timeout
    procs: dict[str, subprocess.Popen] = {}
    outputs: dict[str, str] = {}
    merged = _appending_temp_file() if merge_worker_stdout else None
    try:
        endpoints = []
        for k in range(servers):
            cmd = [str(bin_dir / "ps-server"), "--shard", str(k), "--num-servers", str(servers),
                   "--workers", str(workers), "--bind", bind.format(k=k), "--solver",
                   str(solver), "--mode", mode, "--staleness", str(staleness), "--job-key",
                   str(job_key), "--chunk-bytes", str(chunk_bytes), "--json"]
            if k > 0:
                cmd += ["--coordinator", endpoints[0]]
            if resume is not None:
                cmd += ["--resume", str(resume)]
            cmd += server_args or []
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
            procs[f"server-{k}"] = proc
            endpoints.append(_read_endpoint(proc, deadline))
        for r in range(workers):
            cmd = [str(bin_dir / "ps-worker"), "--solver", str(solver), "--rank", str(r),
                   "--workers", str(workers), "--servers", ",".join(endpoints), "--mode", mode,
                   "--staleness", str(staleness), "--job-key", str(job_key), "--chunk-bytes",
                   str(chunk_bytes), "--json", "--threads", "1", "--timeout-s", "60"]
            cmd += (worker_args or {}).get(r, [])
            procs[f"worker-{r}"] = subprocess.Popen(cmd, cwd=cwd,
                                                    stdout=merged or subprocess.PIPE,
                                                    stderr=subprocess.PIPE, text=True,
                                                    start_new_session=True)
        codes = {}
        errs = {}
        # Workers first: they finish on their own; the servers follow worker 0.
        order = [n for n in procs if n.startswith("worker")] + \
                [n for n in procs if n.startswith("server")]
        for name in order:
            proc = procs[name]
            remaining = max(1.0, deadline - time.monotonic())
            try:
                out, err = proc.communicate(timeout=remaining)
            except subprocess.TimeoutExpired:
                report = []
                for other, p in procs.items():
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                    o, e = p.communicate(timeout=10)
                    # stderr is None where it was merged into stdout.
                    report.append(f"{other}: exit {p.returncode}; stdout tail: {(o or '')[-800:]!r};"
                                  f" stderr tail: {(e or '')[-800:]!r}")
                raise TimeoutError(f"job did not finish in {timeout} s (waiting for {name}):\n"
                                   + "\n".join(report))
            outputs[name] = out or ""
            errs[name] = err
            codes[name] = proc.returncode
        events = []
        if merged is not None:
            merged.seek(0)
            for line in merged.read().splitlines():
                if line.startswith("{"):
                    event = json.loads(line)
                    event["source"] = f"worker-{event['rank']}"
                    events.append(event)
        for name, out in outputs.items():
            for line in out.splitlines():
                if line.startswith("{"):
                    event = json.loads(line)
                    event["source"] = name
                    events.append(event)
        return JobResult(codes, events, errs)
    finally:
        if merged is not None:
            merged.close()
        for proc in procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
