"""The run folder output/name/: what it holds and how it is laid out.

    job.resolved.yaml   the job as run (absolute paths, defaults filled in)
    solver.prototxt     the solver copy the processes train with (+ net copies)
    logs/<role>-<rank>.log (+ .caffe.log), metrics.jsonl, snapshots/, plots/, summary.json
    keys/               security: curve: one CURVE key pair per process (keys.py)

The folder is mode 0700 and everything in it is written under umask 077 (the
runner sets it for the run and its processes): readable by its owner only.
It is this user's own folder: one that another user made (an empty folder or
a symlink planted at output/name in a shared folder such as /tmp) is never
taken, and an output folder another user could rename it out of is refused
(check_output; docs/security.md, "A hostile local user").
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import stat

from . import keys
from .errors import JobError
from .plan import Plan

MARKER = "job.resolved.yaml"


def _ours(run: pathlib.Path) -> bool:
    """Whether `run` is a real folder (not a symlink) of this user."""
    info = run.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def _taken(run: pathlib.Path) -> bool:
    if not run.is_symlink() and not run.exists():
        return False
    return not _ours(run) or any(run.iterdir())


def check_output(plan: Plan) -> None:
    """Refuses (JobError naming the folder) an output folder that another user
    could rename the run folder out of, and replace it: one of another user (not
    root), or one every user may write to without the sticky bit (as /tmp has)."""
    output = plan.run_dir.parent
    info = output.stat()
    if info.st_uid not in (os.geteuid(), 0):
        raise JobError(f"{plan.source}: output: {output} belongs to uid {info.st_uid}, "
                       f"another user, who could replace the run folder; choose an output "
                       f"folder of your own")
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise JobError(f"{plan.source}: output: {output} is writable by every user (mode "
                       f"{stat.S_IMODE(info.st_mode):04o}) and not sticky: another user could "
                       f"replace the run folder; choose an output folder of your own")


def _check_own(plan: Plan) -> None:
    """Refuses a run folder that is not this user's own real folder (one another
    user made, a symlink, a file)."""
    run = plan.run_dir
    if not _ours(run):
        owner = run.lstat().st_uid
        what = ("is a symbolic link" if run.is_symlink() else
                "is not a folder" if not run.is_dir() else
                f"belongs to uid {owner}, not to this user (uid {os.geteuid()})")
        raise JobError(f"{plan.source}: output: {run} {what}; a run folder must be this "
                       f"user's own; choose another name or output")


def free_name(output: pathlib.Path, name: str) -> str:
    """`name` when output/name is free (absent or empty), else the first of name-2,
    name-3, ... that is: a new run never touches an earlier run's folder."""
    if not _taken(output / name):
        return name
    n = 2
    while _taken(output / f"{name}-{n}"):
        n += 1
    return f"{name}-{n}"


def create(plan: Plan, *, resume: bool, overwrite: bool = False) -> None:
    """Writes the folder for a run. REQUIRES (unless resume): the folder is free, or
    overwrite, which replaces an earlier run folder (one holding job.resolved.yaml);
    any other non-empty folder is refused."""
    run = plan.run_dir
    if run.is_symlink() or run.exists():
        _check_own(plan)       # another user's, planted after free_name chose the name
    if not resume and _taken(run):
        if not overwrite:
            raise JobError(f"{plan.source}: output: {run} exists; choose another name or "
                           f"output, or overwrite it")
        if not (run / MARKER).exists():
            raise JobError(f"{plan.source}: output: {run} exists and is not a run folder; "
                           f"choose another name or output")
        shutil.rmtree(run)
    run.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_output(plan)
    try:
        run.mkdir(mode=0o700)
    except FileExistsError:   # an empty folder, or resume: checked next
        pass
    _check_own(plan)
    os.chmod(run, 0o700)
    for sub in ("logs", "snapshots", "plots"):
        (run / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    if plan.keys_dir is not None:
        keys.make_keys(plan.keys_dir, plan.job.cluster.servers, plan.job.cluster.workers)
    if plan.job.transport.kind == "ipc":
        (run / "sockets").mkdir(exist_ok=True)
    (run / MARKER).write_text(plan.job.to_yaml())
    for copy_name, (_, text) in plan.nets.items():
        (run / copy_name).write_text(text)
    if plan.initial_model is not None:
        link_or_copy(plan.initial_model, run / "initial.caffemodel")
    for files in plan.memory_data.values():
        for original, copy in files:
            link_or_copy(original, copy)
    plan.solver_copy.write_text(plan.solver_text)


def link_or_copy(original: pathlib.Path, copy: pathlib.Path) -> None:
    """`copy` becomes `original`'s content: a hard link where both lie on one
    filesystem (no bytes copied, one page cache), else a copy made under a
    temporary name and renamed."""
    copy.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = copy.with_name(copy.name + ".linking")
    tmp.unlink(missing_ok=True)
    try:
        os.link(original, tmp)
    except OSError:
        shutil.copyfile(original, tmp)
    os.replace(tmp, copy)


def log_path(run_dir: pathlib.Path, role: str, rank: int) -> pathlib.Path:
    return run_dir / "logs" / f"{role}-{rank}.log"


def _manifest_iteration(text: str) -> int | None:
    m = re.search(r"^iter:\s*(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def checkpoint_iteration(manifest: pathlib.Path) -> int | None:
    """The iteration a checkpoint manifest was taken at (its `iter:` line), or None."""
    return _manifest_iteration(manifest.read_text())


def newest_checkpoint(run_dir: pathlib.Path) -> pathlib.Path | None:
    """The manifest of the newest complete checkpoint under run_dir/snapshots.
    A manifest is written last (after the shard states), so one whose files all
    exist is complete."""
    best: tuple[int, pathlib.Path] | None = None
    for manifest in (run_dir / "snapshots").glob("*_iter_*.manifest"):
        text = manifest.read_text()
        it = _manifest_iteration(text)
        files = re.findall(r'^(?:shard_files|caffemodel):\s*"([^"]*)"', text, re.M)
        if it is None or not all(pathlib.Path(f).exists() for f in files):
            continue
        if best is None or it > best[0]:
            best = (it, manifest)
    return best[1] if best else None
