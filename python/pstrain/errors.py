"""Errors the package raises. A JobError is bad input (exit code 2, nothing started)."""
from __future__ import annotations


class JobError(ValueError):
    """A job file, override or run folder is unusable; the message names the file and key."""

    exit_code = 2


class ProgramNotFound(JobError):
    """A C++ program (ps-server, ps-worker, ps-data) is neither built nor on PATH."""
