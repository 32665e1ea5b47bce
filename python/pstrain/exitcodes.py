"""The programs' exit codes (common/exit_code.hpp) and what ps-train does with them.

    0   done
    1   a permanent failure (bad input, a missing or corrupt file): recurs
    2   bad command-line arguments
    3   training diverged
    75  a retryable failure (EX_TEMPFAIL): a peer gone or silent past its deadline

A process killed by a signal (a negative return code from subprocess) is
retryable as well: a worker is restarted only after one of those two.
"""
from __future__ import annotations

OK = 0
FAILURE = 1
USAGE = 2
DIVERGED = 3
RETRYABLE = 75

_MEANING = {
    FAILURE: "a permanent failure",
    USAGE: "bad command-line arguments",
    DIVERGED: "training diverged",
    RETRYABLE: "retryable",
}


def is_retryable(returncode: int) -> bool:
    """True for an exit that may pass when the process is started again."""
    return returncode == RETRYABLE or returncode < 0


def describe(returncode: int) -> str:
    """'was killed by signal 9', 'exited with 3 (training diverged)', ..."""
    if returncode < 0:
        return f"was killed by signal {-returncode}"
    meaning = _MEANING.get(returncode)
    return f"exited with {returncode}" + (f" ({meaning})" if meaning else "")
