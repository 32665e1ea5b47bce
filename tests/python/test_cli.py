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
