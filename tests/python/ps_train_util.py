"""Helpers for the ps-train tests: job files in a temporary folder and a /proc
scan for processes a job left behind."""
from __future__ import annotations

import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def base_job(tmp: pathlib.Path, **changes) -> dict:
    """A small valid job (LeNet, 1 server, 2 workers, ssp) writing under tmp/runs."""
    job = {
        "name": "tiny",
        "solver": str(ROOT / "configs/nets/lenet_solver.prototxt"),
        "solver_overrides": {"max_iter": 60, "test_interval": 30, "test_iter": 10,
                             "snapshot": 30, "display": 10},
        "cluster": {"servers": 1, "workers": 2, "worker_devices": "cpu",
                    "threads_per_worker": 1, "hosts": "local", "straggler": None},
        "consistency": {"mode": "ssp", "staleness": 2},
        "transport": {"kind": "tcp", "interface": "127.0.0.1"},
        "data": None,
        "output": str(tmp / "runs"),
        "restart": {"max_worker_restarts": 3},
    }
    job.update(changes)
    return job


def write_job(tmp: pathlib.Path, job: dict, name: str = "job.yaml") -> pathlib.Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


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
