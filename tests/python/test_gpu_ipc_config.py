"""transport.gpu_ipc (GPU IPC pushes, docs/config-reference.md): the job key (default false
until a GPU has run the path; auto, true or false, otherwise one error naming the key), the
ps-worker flag the plan gives every worker (none for false, the default of ps-worker), and true refused at job start where
the path cannot run, naming what it needs."""
from __future__ import annotations

import pytest

from ps_train_util import base_job, write_job
from pstrain import Job, JobError, programs
from pstrain.localrun import LocalLauncher
from pstrain.plan import make_plan

GPU = {"server_device": "gpu:0", "worker_devices": [0, 0], "workers": 2}


def plan_of(tmp_path, **changes):
    job = Job.from_yaml(write_job(tmp_path, base_job(tmp_path, **changes))).config
    return job, make_plan(job, "job.yaml", layout=LocalLauncher.layout(job, "job.yaml"))


def flag(cmd: list[str]) -> str | None:
    return cmd[cmd.index("--gpu-ipc") + 1] if "--gpu-ipc" in cmd else None


def test_off_by_default_and_no_flag(tmp_path, build_dir):
    job, plan = plan_of(tmp_path)
    assert job.transport.gpu_ipc is False
    assert flag(plan.worker_command(0, ["e"])) is None
    _, auto = plan_of(tmp_path, transport={"kind": "tcp", "gpu_ipc": "auto"})
    assert flag(auto.worker_command(0, ["e"])) == "auto"


def test_true_reaches_every_worker_and_no_server_and_false_needs_no_flag(tmp_path, build_dir, monkeypatch):
    # The plan of a GPU job, made on any machine: a CUDA build with one GPU, as far as the
    # device checks can tell.
    monkeypatch.setattr(programs, "cuda_build", lambda: True)
    monkeypatch.setattr(programs, "gpu_count", lambda: 1)
    _, off = plan_of(tmp_path, transport={"kind": "tcp", "gpu_ipc": False})
    assert [flag(off.worker_command(r, ["e"])) for r in (0, 1)] == [None, None]
    _, on = plan_of(tmp_path, cluster=GPU, consistency={"mode": "bsp"},
                    transport={"kind": "ipc", "gpu_ipc": True, "host_aggregation": False})
    assert [flag(on.worker_command(r, ["e"])) for r in (0, 1)] == ["true", "true"]
    assert "--gpu-ipc" not in on.server_command(0, None)


def test_a_value_that_is_not_auto_true_or_false_names_the_key(tmp_path):
    with pytest.raises(JobError, match=r"transport\.gpu_ipc: must be auto, true or false, "
                                       r"got 'sometimes'"):
        Job.from_yaml(write_job(tmp_path, base_job(
            tmp_path, transport={"kind": "tcp", "gpu_ipc": "sometimes"})))


@pytest.mark.parametrize("changes, needs", [
    ({}, "GPU workers (cluster.worker_devices is cpu)"),
    ({"cluster": {**GPU, "server_device": "cpu"}}, "a GPU shard (cluster.server_device is cpu)"),
    ({"cluster": GPU, "consistency": {"mode": "ssp", "staleness": 1}},
     "consistency.mode bsp (got ssp)"),
    ({"cluster": GPU, "consistency": {"mode": "bsp", "backup_workers": 1}},
     "no consistency.backup_workers"),
])
def test_true_where_the_path_cannot_run_stops_the_job_naming_the_need(tmp_path, changes, needs):
    transport = {"kind": "ipc", "gpu_ipc": True, "host_aggregation": False}
    with pytest.raises(JobError) as e:
        Job.from_yaml(write_job(tmp_path, base_job(tmp_path, transport=transport, **changes)))
    assert str(e.value).endswith(f"transport.gpu_ipc: true needs {needs}"), str(e.value)
