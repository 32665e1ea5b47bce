"""Helpers for the ps-train tests: job files in a temporary folder (base_job
comes from tests/pstrain_testing.py) and a /proc scan for processes a job left
behind."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time

import yaml

from pstrain_testing import base_job  # noqa: F401  (re-exported)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def write_job(tmp: pathlib.Path, job: dict, name: str = "job.yaml") -> pathlib.Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def records(run_dir: pathlib.Path) -> list[dict]:
    """metrics.jsonl's records so far."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def run_killing_worker(job, rank: int = 1, timeout: float = 240):
    """Runs `job` (a pstrain.Job) on a thread, kills worker `rank` with SIGKILL
    after its first training record, and returns the run's result (RunResult)."""
    import threading
    run_dir = job.config.run_dir
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(r=job.run(quiet=True,
                                                                     timeout=timeout)))
    thread.start()
    try:
        wait_for(lambda: any(r["event"] == "train" and r["rank"] == rank
                             for r in records(run_dir)),
                 120, f"worker {rank}'s first training event")
        victims = [p for p in leftover_processes(str(run_dir)) if f"--rank {rank} " in p]
        assert len(victims) == 1, victims
        os.kill(int(victims[0].split(":")[0]), signal.SIGKILL)
    finally:
        thread.join(timeout + 60)
    assert not thread.is_alive()
    return result["r"]


def leftover_processes(marker: str) -> list[str]:
    """Command lines of running ps-server/ps-worker processes that mention `marker`."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(") ", 1)[1][:1]
        except (OSError, IndexError):
            continue
        if state != "Z" and ("ps-server" in cmdline or "ps-worker" in cmdline) \
                and marker in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def start_ps_server(solver: pathlib.Path, *, job_key: int, mode: str,
                    flags: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """One ps-server (shard 0 of 1, one worker) on 127.0.0.1 in its own session,
    printing JSON; returns it and the endpoint it listens on once it says so.
    The caller kills its process group."""
    from pstrain.programs import find_program
    proc = subprocess.Popen([str(find_program("ps-server")), "--shard", "0", "--num-servers", "1",
                             "--workers", "1", "--bind", "tcp://127.0.0.1:0", "--solver",
                             str(solver), "--mode", mode, "--job-key", str(job_key), "--json",
                             *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("{") and json.loads(line).get("event") == "listening":
            return proc, json.loads(line)["endpoint"]
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"ps-server did not start: {proc.stderr.read()}")
