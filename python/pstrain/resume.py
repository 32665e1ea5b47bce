"""--resume: the job must be the run folder's job, checked before anything is
written or started. A resumed run keeps its net, solver, cluster, consistency
mode and transport; it may change only what does not change what is trained
(ALLOWED). A refusal is one JobError (exit 2) naming the first difference."""
from __future__ import annotations

import pathlib
from typing import Any

from .config import JobConfig, load_yaml, parse_job
from .errors import JobError
from .plan import Plan

MARKER = "job.resolved.yaml"

# Dotted job keys a resumed run may change (docs/user-guide.md, "Resuming").
ALLOWED = ("name", "output", "solver_overrides.max_iter", "solver_overrides.snapshot",
           "solver_overrides.snapshot_after_train", "solver_overrides.display",
           "solver_overrides.test_interval", "solver_overrides.test_iter",
           "restart.max_worker_restarts", "cluster.threads_per_worker",
           "transport.io_threads", "data",
           "data.prepare", "security.auth", "security.nonfinite", "weights")
# Solver fields those keys set: their lines may differ in the solver copy.
_SOLVER_FIELDS = ("max_iter", "snapshot", "snapshot_after_train", "display", "test_interval",
                  "test_iter")


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys -> values; an empty mapping has no keys (solver_overrides: {}
    and one max_iter set by --set differ only in solver_overrides.max_iter)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _show(value: Any) -> str:
    return "(not set)" if value is None else repr(value)


def _refuse(source: str, run: pathlib.Path, what: str) -> JobError:
    return JobError(f"{source}: --resume {run}: {what}; a resumed run keeps its net, solver, "
                    f"cluster and mode (it may change {', '.join(ALLOWED[2:])})")


def check_weights(config: JobConfig, source: str) -> None:
    """weights: starts a fresh run; a resumed one continues from its checkpoint
    (as Caffe refuses -weights with -snapshot)."""
    if config.weights:
        shown = ", ".join(str(w) for w in config.weights)
        raise JobError(f"{source}: weights: cannot be used with --resume: a resumed run "
                       f"continues from its checkpoint, and weights: ({shown}) sets the "
                       f"initial weights of a fresh run only; drop it (--set weights=null) to "
                       f"resume, or start a new run without --resume to fine-tune")


def check_job(config: JobConfig, source: str) -> None:
    """Refuses a job whose keys differ from the run folder's job.resolved.yaml
    outside ALLOWED. Reads only."""
    run = config.run_dir
    marker = run / MARKER
    if not marker.is_file():
        raise JobError(f"{source}: --resume {run}: not a run folder (no {MARKER})")
    old = parse_job(load_yaml(marker), str(marker), run)
    before, after = _flatten(old.to_dict()), _flatten(config.to_dict())
    for key in sorted(set(before) | set(after)):
        if key in ALLOWED or any(key.startswith(a + ".") for a in ALLOWED):
            continue
        if before.get(key) != after.get(key):
            raise _refuse(source, run, f"{key} differs: the run has {_show(before.get(key))}, "
                                       f"this job {_show(after.get(key))}")


def _lines(text: str, solver: bool) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    if solver:  # also "# max_iter: 1  (ps-train: replaced below)", a field a resume may set
        lines = [line for line in lines
                 if line.split(":", 1)[0].strip().lstrip("#").strip() not in _SOLVER_FIELDS]
    return lines


def check_files(plan: Plan) -> None:
    """Refuses a plan whose solver or net copies differ from those in the run
    folder (the user's files changed since): the first differing line is named."""
    run = plan.run_dir
    copies = [(plan.solver_copy, plan.solver_text, True)]
    copies += [(run / name, text, False) for name, (_, text) in plan.nets.items()]
    for copy, text, solver in copies:
        if not copy.is_file():
            raise _refuse(plan.source, run, f"the run folder has no {copy.name}: its solver names "
                                            f"other nets")
        old, new = _lines(copy.read_text(), solver), _lines(text, solver)
        if old == new:
            continue
        original = plan.originals.get(copy, copy)
        for i, (a, b) in enumerate(zip(old + [""] * len(new), new + [""] * len(old))):
            if a != b:
                raise _refuse(plan.source, run, f"{original} differs from the run's copy "
                                                f"{copy.name}: {a.strip()!r} became {b.strip()!r}")
