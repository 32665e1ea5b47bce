"""Errors the package raises. A JobError is bad input (exit code 2, nothing started)."""
from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class JobError(ValueError):
    """A job file, override or run folder is unusable; the message names the file and key.
    It is one line: control characters from the input (a key "a\\nb") are shown escaped."""

    exit_code = 2

    def __init__(self, message: object = "", *args: object):
        super().__init__(_CONTROL.sub(lambda m: repr(m.group())[1:-1], str(message)), *args)


class ProgramNotFound(JobError):
    """A C++ program (ps-server, ps-worker, ps-data) is neither built nor on PATH."""
