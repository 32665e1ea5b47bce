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

Waiting: every process's pipes are read at once (a process whose output
nobody reads would block on a full pipe and stall the job), and the job ends
in bounded time, naming the party the others waited for:
  - a process killed by a signal while others run (a worker the kernel's OOM
    killer took: SIGKILL) stops the job at once with JobFailed: its peers
    could only wait for it (in bsp the shard waits for its pushes, the other
    workers for the shard; a ps-server leaves only after --idle-exit-s, 600 s,
    without a message). ps-train restarts such a worker instead
    (python/pstrain/runner.py); this launcher has no restarts;
  - a process that exits non-zero while others run gives them failure_grace
    seconds (more than the workers' --timeout-s of 60 s) to end by their own
    deadlines, then JobFailed names it;
  - past `timeout`, TimeoutError names the first process still running.
Every JobFailed and TimeoutError ends with each process's exit and the tails
of its output.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import tempfile
import threading
import time


class JobFailed(RuntimeError):
    """A process of the job failed while others still ran, and they could not end
    without it (run_job): the message names it, how it ended, and every
    process's last output."""


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
            bind: str = "tcp://127.0.0.1:0", failure_grace: float = 90) -> JobResult:
    bin_dir = pathlib.Path(build_dir) / "bin"
    deadline = time.monotonic() + timeout
    procs: dict[str, subprocess.Popen] = {}
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
        return _wait(procs, deadline, timeout, failure_grace, merged)
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


def describe_exit(code: int) -> str:
    """'exited with 75', or 'was killed by SIGKILL (signal 9)' with what usually sends it."""
    if code >= 0:
        return f"exited with {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "a signal"
    text = f"was killed by {name} (signal {-code})"
    if -code == signal.SIGKILL:
        text += (": nothing in the job sends it; the kernel's OOM killer does when memory"
                 " runs out (dmesg names the process)")
    return text


def _stop(procs: dict, readers: dict, outputs: dict) -> str:
    """Kills what still runs; each process's exit and the tails of its output."""
    for p in procs.values():
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    report = []
    for name, p in procs.items():
        p.wait(timeout=10)
        readers[name].join(timeout=10)
        # stdout is None where it was merged into one file.
        o, e = outputs.get(name, ("", ""))
        report.append(f"{name}: exit {p.returncode}; stdout tail: {(o or '')[-800:]!r};"
                      f" stderr tail: {(e or '')[-800:]!r}")
    return "\n".join(report)


def _wait(procs: dict, deadline: float, timeout: float, failure_grace: float,
          merged) -> JobResult:
    """Waits for every process, reading all their pipes at once, and returns the
    JobResult; stops the job (JobFailed, TimeoutError) as run_job says."""
    outputs: dict[str, tuple] = {}

    def drain(name: str, proc: subprocess.Popen) -> None:
        outputs[name] = proc.communicate()

    readers = {n: threading.Thread(target=drain, args=(n, p), daemon=True)
               for n, p in procs.items()}
    for reader in readers.values():
        reader.start()
    # Workers first: they finish on their own; the servers follow worker 0.
    order = [n for n in procs if n.startswith("worker")] + \
            [n for n in procs if n.startswith("server")]
    first_failure: tuple[str, int, float] | None = None
    while True:
        running = [n for n in order if procs[n].poll() is None]
        if not running:
            break
        now = time.monotonic()
        if first_failure is None:
            failed = [n for n in order if n not in running and procs[n].returncode != 0]
            if failed:
                first_failure = (failed[0], procs[failed[0]].returncode, now)
        if first_failure is not None:
            name, code, at = first_failure
            # A process killed by a signal never reports: its peers can only wait
            # for it (a bsp shard for its pushes, the others for the shard).
            if code < 0 or now - at > failure_grace:
                after = "" if code < 0 else f" for {failure_grace:.0f} s after that"
                report = _stop(procs, readers, outputs)
                raise JobFailed(f"{name} {describe_exit(code)}; the job stopped: "
                                f"{', '.join(running)} still ran{after}:\n" + report)
        if now > deadline:
            report = _stop(procs, readers, outputs)
            raise TimeoutError(f"job did not finish in {timeout} s (waiting for {running[0]}):\n"
                               + report)
        time.sleep(0.05)
    for reader in readers.values():
        reader.join()
    codes = {n: procs[n].returncode for n in order}
    outs = {n: outputs[n][0] or "" for n in order}
    errs = {n: outputs[n][1] for n in order}
    events = []
    if merged is not None:
        merged.seek(0)
        for line in merged.read().splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                event["source"] = f"worker-{event['rank']}"
                events.append(event)
    for name, out in outs.items():
        for line in out.splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                event["source"] = name
                events.append(event)
    return JobResult(codes, events, errs)
