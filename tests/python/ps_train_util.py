"""Helpers for the ps-train tests: job files in a temporary folder (base_job
comes from tests/pstrain_testing.py) and a /proc scan for processes a job left
behind."""
from __future__ import annotations

import pathlib

import yaml

from pstrain_testing import base_job  # noqa: F401  (re-exported)

ROOT = pathlib.Path(__file__).resolve().parents[2]


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
