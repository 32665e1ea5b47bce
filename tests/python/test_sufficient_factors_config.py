"""transport.sufficient_factors: the job key (default false, a boolean or one clear
error), the ps-worker flag the plan gives every worker (and no server), and the plan's
warnings where ps-worker pushes every gradient dense anyway."""
from __future__ import annotations

import pytest

from ps_train_util import base_job, write_job
from pstrain import Job, JobError, programs
from pstrain.localrun import LocalLauncher
from pstrain.plan import make_plan


def plan_of(tmp_path, **changes):
    job = Job.from_yaml(write_job(tmp_path, base_job(tmp_path, **changes))).config
    return job, make_plan(job, "job.yaml", layout=LocalLauncher.layout(job, "job.yaml"))


def factor_warnings(plan) -> list[str]:
    return [w for w in plan.warnings if "sufficient_factors" in w]


def test_off_by_default_and_no_flag(tmp_path, build_dir):
    job, plan = plan_of(tmp_path)
    assert job.transport.sufficient_factors is False
    assert "--sufficient-factors" not in plan.worker_command(0, ["e"])
    assert factor_warnings(plan) == []


def test_on_every_worker_gets_the_flag_no_server_does(tmp_path, build_dir):
    job, plan = plan_of(tmp_path, consistency={"mode": "bsp"},
                        transport={"kind": "tcp", "sufficient_factors": True,
                                   "host_aggregation": False})
    assert job.transport.sufficient_factors is True
    assert all("--sufficient-factors" in plan.worker_command(r, ["e"]) for r in (0, 1))
    assert "--sufficient-factors" not in plan.server_command(0, None)
    assert factor_warnings(plan) == []


def test_a_value_that_is_no_boolean_names_the_key(tmp_path):
    with pytest.raises(JobError, match=r"transport\.sufficient_factors"):
        Job.from_yaml(write_job(tmp_path, base_job(
            tmp_path, transport={"kind": "tcp", "sufficient_factors": "sometimes"})))


def test_the_plan_warns_where_every_gradient_goes_dense(tmp_path, build_dir):
    _, easgd = plan_of(tmp_path, consistency={"mode": "asp", "easgd": {"tau": 2}},
                       transport={"kind": "tcp", "sufficient_factors": True})
    assert factor_warnings(easgd) == ["job.yaml: transport.sufficient_factors: off (an elastic method "
                              "pushes weight deltas)"]
    _, clipped = plan_of(tmp_path, solver_overrides={"max_iter": 60, "clip_gradients": 10},
                         transport={"kind": "tcp", "sufficient_factors": True})
    assert factor_warnings(clipped) == ["job.yaml: transport.sufficient_factors: off (ssp with "
                                "clip_gradients pushes every gradient with its norm)"]
    # bsp on one host: its workers' sum is pushed dense (transport.host_aggregation)
    _, grouped = plan_of(tmp_path, consistency={"mode": "bsp"},
                         transport={"kind": "tcp", "sufficient_factors": True})
    assert factor_warnings(grouped) == [
        "job.yaml: transport.sufficient_factors: off (host aggregation pushes each host's dense "
        "sum; transport.host_aggregation: false pushes factors)"]


def test_gpu_workers_push_factors_and_gpu_ipc_true_turns_them_off(tmp_path, build_dir,
                                                                   monkeypatch):
    # The plan of a GPU job, made on any machine: a CUDA build with one GPU, as far as the
    # device checks can tell.
    monkeypatch.setattr(programs, "cuda_build", lambda: True)
    monkeypatch.setattr(programs, "gpu_count", lambda: 1)
    gpus = {"worker_devices": [0, 0], "workers": 2}
    _, plan = plan_of(tmp_path, cluster=gpus, consistency={"mode": "bsp"},
                      transport={"kind": "tcp", "sufficient_factors": True,
                                 "host_aggregation": False})
    assert all("--sufficient-factors" in plan.worker_command(r, ["e"]) for r in (0, 1))
    assert factor_warnings(plan) == []
    # GPU IPC pushes (same host, a GPU shard) hand every gradient over on the device.
    _, ipc = plan_of(tmp_path, cluster={**gpus, "server_device": "gpu:0"},
                     consistency={"mode": "bsp"},
                     transport={"kind": "ipc", "sufficient_factors": True, "gpu_ipc": True,
                                "host_aggregation": False})
    assert factor_warnings(ipc) == [
        "job.yaml: transport.sufficient_factors: off (GPU IPC pushes hand every gradient over "
        "in device memory)"]


def test_broadcast_with_gpu_workers_is_refused_naming_them(tmp_path, build_dir, monkeypatch):
    monkeypatch.setattr(programs, "cuda_build", lambda: True)
    monkeypatch.setattr(programs, "gpu_count", lambda: 1)
    with pytest.raises(JobError) as e:
        plan_of(tmp_path, cluster={"worker_devices": [0, 0], "workers": 2},
                consistency={"mode": "bsp"},
                transport={"kind": "tcp", "sufficient_factors": "broadcast",
                           "host_aggregation": False})
    assert str(e.value) == (
        "job.yaml: transport.sufficient_factors: broadcast is not possible here (GPU workers "
        "(the replica's rebuild and step run on CPU workers only)); use push")
