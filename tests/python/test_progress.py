"""Progress output: a tqdm bar only on a terminal; in a file or a pipe, one plain
line per display interval and no carriage returns."""
from __future__ import annotations

import io
import os
import subprocess
import sys

from ps_train_util import ROOT, base_job, write_job
from pstrain.progress import BarProgress, LineProgress, make_progress


def test_a_file_or_pipe_gets_plain_lines():
    assert isinstance(make_progress("j", 10, quiet=False, stream=io.StringIO()), LineProgress)


def test_quiet_gets_plain_lines_even_on_a_terminal():
    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "w") as tty:
            assert isinstance(make_progress("j", 10, quiet=True, stream=tty), LineProgress)
    finally:
        os.close(leader)


def test_a_terminal_gets_the_bar():
    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "w") as tty:
            progress = make_progress("j", 10, quiet=False, stream=tty)
            assert isinstance(progress, BarProgress)
            progress.close()
    finally:
        os.close(leader)


def test_ps_train_into_a_log_file_writes_one_line_per_display(tmp_path, fashion_mnist):
    job = base_job(tmp_path, name="logged")
    job["solver_overrides"].update({"max_iter": 40, "display": 10, "test_interval": 1000,
                                    "snapshot": 0})
    log = tmp_path / "ps-train.log"
    with log.open("wb") as out:
        done = subprocess.run([sys.executable, "-m", "pstrain", str(write_job(tmp_path, job))],
                              stdout=out, stderr=subprocess.STDOUT, timeout=240,
                              env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    text = log.read_text()
    assert done.returncode == 0, text
    assert "\r" not in text
    train_lines = [l for l in text.splitlines() if " iter " in l and " loss " in l]
    # displays at iterations 10, 20, 30 and 40 (iteration 0 too, where displayed)
    assert len(train_lines) in (4, 5), text
