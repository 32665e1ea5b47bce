"""`ps-train node [FLAGS...]`: run this process's role, taken from the
environment, for a launch by hand or by another scheduler:

    PSTRAIN_ROLE=server PSTRAIN_RANK=0 ... ps-train node    # execs ps-server
    DMLC_ROLE=worker RANK=1 ... ps-train node               # execs ps-worker

PSTRAIN_ROLE (or MXNet's DMLC_ROLE) is `server` or `worker`; every other
setting comes from the programs' own environment variables or the FLAGS given
(docs/user-guide.md, "By hand, or from another scheduler")."""
from __future__ import annotations

import os
import sys

from . import programs

ROLES = {"server": "ps-server", "worker": "ps-worker"}


def main(args: list[str]) -> int:
    """Replaces this process with the role's program; returns 2 on a bad role."""
    variable = "PSTRAIN_ROLE" if "PSTRAIN_ROLE" in os.environ else "DMLC_ROLE"
    role = os.environ.get(variable)
    if role not in ROLES:
        shown = f"{variable}={role!r}" if role is not None else "PSTRAIN_ROLE is not set"
        print(f"ps-train node: {shown}; set PSTRAIN_ROLE to server or worker", file=sys.stderr)
        return 2
    program = str(programs.find_program(ROLES[role]))
    sys.stdout.flush()
    os.execv(program, [program, *args])
    return 1   # not reached
