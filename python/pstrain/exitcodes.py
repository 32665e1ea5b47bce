"""The programs' exit codes (common/exit_code.hpp) and what ps-train does with them.

    0   done
    1   a permanent failure (bad input, a missing or corrupt file): recurs
    2   bad command-line arguments
    3   training diverged
    75  a retryable failure (EX_TEMPFAIL): a peer gone or silent past its deadline

A process killed by a signal (a negative return code from subprocess) is
retryable as well. A remote process (an ssh session, a Slurm task) that ended
with 255 was lost with its session or host (ssh's own status for a failed or
lost connection; a task that sent no task_exit line, slurm.py): retryable too.
`is_retryable` is the one place that decides: every launcher restarts or
relocates exactly these failures (launch.py), and a server failure that is one
of them restarts the job from its last checkpoint.
"""
from __future__ import annotations

OK = 0
FAILURE = 1
USAGE = 2
DIVERGED = 3
RETRYABLE = 75
LOST = 255     # a remote process's session or host was lost (remote processes only)

_MEANING = {
    FAILURE: "a permanent failure",
    USAGE: "bad command-line arguments",
    DIVERGED: "training diverged",
    RETRYABLE: "retryable",
}


def is_retryable(returncode: int, *, remote: bool = False) -> bool:
    """True for an exit that may pass when the process is started again: 75, a
    death by signal, and for a remote process (`remote`) a lost session (255)."""
    return returncode == RETRYABLE or returncode < 0 or (remote and returncode == LOST)


def describe(returncode: int) -> str:
    """'was killed by signal 9', 'exited with 3 (training diverged)', ..."""
    if returncode < 0:
        return f"was killed by signal {-returncode}"
    meaning = _MEANING.get(returncode)
    return f"exited with {returncode}" + (f" ({meaning})" if meaning else "")
