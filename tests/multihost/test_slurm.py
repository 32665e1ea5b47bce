"""cluster.hosts: slurm for real: a Slurm cluster started by the test
(slurm_cluster.py), the job submitted with sbatch through the documented
script (scripts/slurm/pstrain.sbatch), its summary.json checked."""
from __future__ import annotations

import json
import pathlib
import shutil
import tempfile
import time

import pytest
import yaml

import slurm_cluster
from conftest import ROOT
from test_hostfile import job_dict


@pytest.fixture(scope="module")
def slurm():
    why = slurm_cluster.unavailable()
    if why:
        pytest.skip(f"the Slurm test needs {why}")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pstrain-slurm-"))
    try:
        cluster = slurm_cluster.SlurmCluster(folder)
    except RuntimeError as e:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"Slurm does not start here: {e}")
    try:
        yield cluster
    finally:
        cluster.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_job_submitted_with_sbatch(tmp_path, slurm, fashion_mnist):
    job = job_dict(tmp_path, "slurmjob")
    job["remote"] = {"srun_options": ["--overcommit"]}     # 3 tasks on a small node
    path = tmp_path / "slurmjob.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    out = tmp_path / "sbatch.out"
    submitted = slurm.run("env", f"PSTRAIN_PYTHONPATH={ROOT / 'python'}", "sbatch", "--parsable", "--overcommit", f"--output={out}",
                          f"--chdir={ROOT}", str(ROOT / "scripts/slurm/pstrain.sbatch"), str(path))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        queued = slurm.run("squeue", "--noheader", f"--jobs={job_id}", "--format=%T")
        if not queued.stdout.strip():
            break
        time.sleep(1)
    else:
        pytest.fail(f"Slurm job {job_id} still queued or running after 240 s: "
                    f"{out.read_text() if out.exists() else ''}")
    run = tmp_path / "runs" / "slurmjob"
    text = out.read_text() if out.exists() else ""
    assert (run / "summary.json").exists(), text
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok", (summary["message"], text)
    assert summary["iterations"] == 60
    assert summary["hosts"] == {"server-0": slurm.node, "worker-0": slurm.node,
                                "worker-1": slurm.node}
    assert (run / "snapshots" / "slurmjob_iter_60.caffemodel").is_file()
    for log in ("server-0", "worker-0", "worker-1"):
        assert (run / "logs" / f"{log}.log").stat().st_size > 0
    tasks = json.loads((run / "slurm_tasks.json").read_text())["tasks"]
    assert [(t["role"], t["rank"]) for t in tasks] == [("server", 0), ("worker", 0),
                                                       ("worker", 1)]
    assert f"slurmjob: ok after" in text
