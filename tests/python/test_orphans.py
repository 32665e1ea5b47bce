"""kill -9 of ps-train on one machine: its servers and workers get SIGTERM
from the kernel (PR_SET_PDEATHSIG) and are gone soon after (the test allows 30 s, for a loaded machine)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ps_train_util import ROOT, base_job, leftover_processes, write_job


def test_kill_9_of_ps_train_leaves_no_process(tmp_path, fashion_mnist):
    job = base_job(tmp_path, name="orphans")
    job["solver_overrides"].update(max_iter=5000, test_interval=0, snapshot=0)
    path = write_job(tmp_path, job)
    run_dir = tmp_path / "runs" / "orphans"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.Popen([sys.executable, "-m", "pstrain", str(path), "--quiet"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            metrics = run_dir / "metrics.jsonl"
            lines = metrics.read_text().splitlines() if metrics.exists() else []
            if any(json.loads(l).get("event") == "train" for l in lines if l.strip()):
                break
            time.sleep(0.2)
        assert len(leftover_processes(str(run_dir))) == 3
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 30
        while leftover_processes(str(run_dir)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not leftover_processes(str(run_dir))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in leftover_processes(str(run_dir)):
            os.kill(int(p.split(":")[0]), signal.SIGKILL)
