"""cluster.hosts: slurm for real: a Slurm cluster started by the test
(slurm_cluster.py), the job submitted with sbatch through the documented
script (scripts/slurm/pstrain.sbatch), its summary.json checked."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import time

import pytest
import yaml

import slurm_cluster
from conftest import ROOT
from test_hostfile import job_dict


@pytest.fixture(scope="module")
def slurm():
    with slurm_cluster.started("pstrain-slurm-") as cluster:
        yield cluster


def submit(slurm, tmp_path: pathlib.Path, job: dict, name: str,
           options: list[str] = ()) -> tuple[str, pathlib.Path]:
    """Writes `job` (srun --overcommit: 3 tasks on a small node) to NAME.yaml and
    submits it with sbatch (and its `options`) through scripts/slurm/pstrain.sbatch;
    returns the job id and the file sbatch writes its output to."""
    job["remote"] = {"srun_options": ["--overcommit"]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    out = tmp_path / f"{name}.sbatch.out"
    submitted = slurm.run("env", f"PSTRAIN_PYTHONPATH={ROOT / 'python'}", "sbatch", "--parsable",
                          "--overcommit", *options, f"--output={out}", f"--chdir={ROOT}",
                          str(ROOT / "scripts/slurm/pstrain.sbatch"), str(path))
    assert submitted.returncode == 0, submitted.stderr
    return submitted.stdout.strip().split(";")[0], out


def test_a_job_submitted_with_sbatch(tmp_path, slurm, fashion_mnist):
    job = job_dict(tmp_path, "slurmjob")
    job_id, out = submit(slurm, tmp_path, job, "slurmjob")
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


def test_a_killed_worker_task_is_restarted_as_a_step_of_its_own(tmp_path, slurm, fashion_mnist):
    job = job_dict(tmp_path, "slurmfault", mode="ssp")
    job["solver_overrides"].update(max_iter=100, snapshot=0, test_interval=50)
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 40}
    job_id, out = submit(slurm, tmp_path, job, "slurmfault")
    run = tmp_path / "runs" / "slurmfault"
    deadline = time.monotonic() + 240
    killed = False
    while time.monotonic() < deadline:
        metrics = run / "metrics.jsonl"
        recs = [json.loads(l) for l in metrics.read_text().splitlines()] if metrics.exists() else []
        if not killed and any(r["event"] == "train" and r["rank"] == 1 and r["iter"] >= 10
                              for r in recs):
            worker = [p for p in slurm.pids() if _is_worker(p, 1)]
            assert worker
            os.kill(worker[0], signal.SIGKILL)
            killed = True
        if killed and not slurm.run("squeue", "--noheader", f"--jobs={job_id}").stdout.strip():
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"Slurm job {job_id} not done after 240 s: "
                    f"{out.read_text() if out.exists() else ''}")
    text = out.read_text() if out.exists() else ""
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok", (summary["message"], text)
    assert summary["worker_restarts"] == 1
    assert summary["iterations"] == 100
    restart = [r for r in recs if r["event"] == "restart"] or \
        [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()
         if '"restart"' in l]
    assert restart and restart[0]["rank"] == 1 and restart[0]["exit"] == -9
    assert "--- ps-train: restart 1 of worker 1 ---" in (run / "logs/worker-1.log").read_text()


def test_a_killed_server_task_restarts_the_job_from_its_checkpoint(tmp_path, slurm,
                                                                    fashion_mnist):
    # docs/user-guide.md, Slurm: "a lost server restarts the job from the last checkpoint".
    # bsp, 60 iterations, a checkpoint at 30; worker 1 straggles 300 ms an iteration, so
    # that the server is killed between the checkpoint and the end.
    job = job_dict(tmp_path, "slurmlost")
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 300}
    job_id, out = submit(slurm, tmp_path, job, "slurmlost")
    run = tmp_path / "runs" / "slurmlost"
    manifest = run / "snapshots" / "slurmlost_iter_30.manifest"
    deadline = time.monotonic() + 300
    killed = None
    while time.monotonic() < deadline:
        if killed is None and manifest.exists():
            servers = [p for p in slurm.pids() if _is_program(p, b"ps-server")]
            assert len(servers) == 1, servers
            os.kill(servers[0], signal.SIGKILL)
            killed = servers[0]
        if killed and not slurm.run("squeue", "--noheader", f"--jobs={job_id}").stdout.strip():
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"Slurm job {job_id} not done after 300 s (server killed: {killed}): "
                    f"{out.read_text() if out.exists() else ''}")
    text = out.read_text() if out.exists() else ""
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok", (summary["message"], text)
    assert summary["server_restarts"] == 1, text
    assert summary["resumed_from"] == str(manifest)
    assert summary["iterations"] == 60
    assert f"restarting the job from {manifest} (1/2)" in text
    assert (run / "snapshots" / "slurmlost_iter_60.caffemodel").is_file()
    # The restarted job ran as a Slurm step again: a new server process, every task on the node.
    assert summary["hosts"] == {"server-0": slurm.node, "worker-0": slurm.node,
                                "worker-1": slurm.node}
    assert not [p for p in slurm.pids() if _is_program(p, b"ps-server")
                or _is_program(p, b"ps-worker")]


def _is_program(pid: int, name: bytes) -> bool:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(name)
    except OSError:
        return False


def _is_worker(pid: int, rank: int) -> bool:
    try:
        args = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return args[0].endswith(b"ps-worker") and b"--rank" in args and \
        args[args.index(b"--rank") + 1] == str(rank).encode()
