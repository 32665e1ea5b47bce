"""The ps-train command line itself: its help lists the commands, a pipe closed
early ends it quietly, and the dry run explains what it shows (the job key,
the solver's snapshot_prefix)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ps_train_util import ROOT, base_job, write_job
from pstrain.cli import main

ENV = {**os.environ, "PYTHONPATH": str(ROOT / "python")}


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    commands = out[out.index("commands"):].splitlines()[1:]
    for name in ("compare", "export", "sweep", "node"):
        lines = [l for l in commands if l.strip().startswith(f"ps-train {name} ")]
        assert len(lines) == 1, (name, out)          # one line each, with what it does
        assert len(lines[0].split("  ")[-1].split()) >= 3, lines[0]


def test_a_closed_pipe_ends_quietly(tmp_path, build_dir):
    """`ps-train JOB --dry-run | head -1`: the reader is gone before ps-train
    writes (here: closed before it starts), which is no error of ps-train's."""
    job = write_job(tmp_path, base_job(tmp_path))
    read, write = os.pipe()
    os.close(read)                        # the reader left before the first write
    try:
        done = subprocess.run([sys.executable, "-m", "pstrain", str(job), "--dry-run"],
                              stdout=write, stderr=subprocess.PIPE, text=True, env=ENV,
                              timeout=60)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.stderr == ""
    assert done.returncode == 141                 # 128 + SIGPIPE, as a shell reports a tool's


def test_dry_run_piped_into_head(tmp_path, build_dir):
    job = base_job(tmp_path)
    job["cluster"]["workers"] = 300              # far more than a pipe holds
    path = write_job(tmp_path, job)
    done = subprocess.run(f"'{sys.executable}' -m pstrain '{path}' --dry-run | head -1",
                          shell=True, capture_output=True, text=True, env=ENV, timeout=120)
    assert done.stdout.startswith("# run folder: ")
    assert done.stderr == ""


def dry_run(capsys, tmp_path, **changes) -> str:
    path = write_job(tmp_path, base_job(tmp_path, **changes))
    assert main([str(path), "--dry-run"]) == 0
    return capsys.readouterr().out


def test_dry_run_says_what_the_job_key_is(capsys, tmp_path):
    """Under CURVE (the default) the key on the command lines is 0, and the dry
    run says why; without CURVE it is a random number per run."""
    out = dry_run(capsys, tmp_path)
    commands = [l for l in out.splitlines() if "/ps-server " in l or "/ps-worker " in l]
    assert all(" --job-key 0 " in c for c in commands)
    note = f"# --job-key 0: security curve; the CURVE keys in {tmp_path}/runs/tiny/keys"
    assert note in out
    out = dry_run(capsys, tmp_path, security="none")
    server = next(l for l in out.splitlines() if "/ps-server " in l)
    key = server.split(" --job-key ")[1].split()[0]
    assert key != "0" and f"# --job-key {key}: security none; a random number, new for each run" \
        in out


def test_dry_run_warns_that_the_solvers_snapshot_prefix_is_replaced(capsys, tmp_path):
    solver = ROOT / "configs/nets/lenet_solver.prototxt"
    assert 'snapshot_prefix: "runs/lenet/lenet"' in solver.read_text()
    out = dry_run(capsys, tmp_path, solver=str(solver))
    assert out.splitlines()[1] == (
        f'# warning: {solver}: snapshot_prefix "runs/lenet/lenet" is replaced by the run '
        f"folder's {tmp_path}/runs/tiny/snapshots/tiny (a job's snapshots and checkpoints stay "
        f"in its run folder)")
