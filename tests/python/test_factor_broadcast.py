"""transport.sufficient_factors: broadcast (sufficient-factor broadcasting): the key's
values, the ps-worker flags (the replica checked at every snapshot), the plan-time
refusals naming the key, and a bsp job whose worker 1 is killed with SIGKILL and
restarted: the new process starts its replica from the weights and history it pulls
and the run ends bit for bit where the same job without the kill ends, with the
strict check of the replica on."""
from __future__ import annotations

import hashlib
import pathlib

import pytest

from ps_train_util import base_job, run_killing_worker, write_job
from pstrain import Job, JobError
from pstrain.localrun import LocalLauncher
from pstrain.plan import make_plan

BSP = {"mode": "bsp", "staleness": 0}


def plan_of(tmp_path, transport: dict, **changes):
    job = Job.from_yaml(write_job(tmp_path, base_job(
        tmp_path, transport={"kind": "tcp", **transport}, **changes))).config
    return job, make_plan(job, "job.yaml", layout=LocalLauncher.layout(job, "job.yaml"))


def test_values_and_flags(tmp_path, build_dir):
    for value, held, broadcast in ((True, True, False), ("push", True, False),
                                   (False, False, False), ("false", False, False),
                                   ("broadcast", "broadcast", True)):
        job, _ = plan_of(tmp_path, {"sufficient_factors": value}, consistency=BSP)
        assert (job.transport.sufficient_factors, job.transport.factor_broadcast) == \
            (held, broadcast), value
    # broadcast on one host: auto host aggregation stays off (each worker its own
    # factors), and so does auto pull overlap (a broadcast weight exists once the
    # whole pull is in)
    _, plan = plan_of(tmp_path, {"sufficient_factors": "broadcast"}, consistency=BSP)
    assert plan.host_groups() is None
    assert plan.pull_overlap() is False
    assert "--pull-overlap" not in plan.worker_command(0, ["e"])
    worker = plan.worker_command(1, ["e"])
    assert "--sufficient-factors" in worker and "--factor-broadcast" in worker
    # base_job snapshots every 30 iterations: the replica is checked there
    assert worker[worker.index("--factor-verify-interval") + 1] == "30"
    assert "--factor-broadcast" not in plan.server_command(0, None)
    _, push = plan_of(tmp_path, {"sufficient_factors": "push"}, consistency=BSP,
                      solver_overrides={"max_iter": 60, "snapshot": 0})
    assert "--factor-broadcast" not in push.worker_command(0, ["e"])
    with pytest.raises(JobError, match=r"job.yaml: transport\.sufficient_factors: must be false, "
                                       r"true, push or broadcast, got 'pull'"):
        plan_of(tmp_path, {"sufficient_factors": "pull"})


@pytest.mark.parametrize("changes, why", [
    ({}, "mode ssp: only bsp steps are the same for every worker"),
    ({"consistency": {"mode": "asp", "easgd": {"tau": 2}}},
     "an elastic method pushes weight deltas; mode asp"),
    ({"consistency": BSP, "solver_overrides": {"max_iter": 60, "clip_gradients": 10}},
     "clip_gradients scales a step by every shard's norm"),
    ({"consistency": {"mode": "bsp", "staleness": 0, "backup_workers": 1}},
     "backup workers drop some workers' factors"),
])
def test_refused_where_the_relay_cannot_be_exact(tmp_path, build_dir, changes, why):
    with pytest.raises(JobError) as e:
        plan_of(tmp_path, {"sufficient_factors": "broadcast"}, **changes)
    assert str(e.value).startswith("job.yaml: transport.sufficient_factors: broadcast is not "
                                   "possible here (")
    assert why in str(e.value)


def test_refused_with_pull_overlap_true(tmp_path, build_dir):
    with pytest.raises(JobError, match=r"transport\.sufficient_factors: broadcast is not possible "
                                       r"here \(transport\.pull_overlap: true"):
        plan_of(tmp_path, {"sufficient_factors": "broadcast", "pull_overlap": True},
                consistency=BSP)


def test_refused_with_host_aggregation_true(tmp_path, build_dir):
    with pytest.raises(JobError, match=r"transport\.sufficient_factors: broadcast needs each "
                                       r"worker's own factors"):
        plan_of(tmp_path, {"sufficient_factors": "broadcast", "host_aggregation": True},
                consistency=BSP)


def wide_job(tmp_path, name: str, data: pathlib.Path) -> dict:
    """bsp, 2 workers, the fc-heavy MLP (784-1024-1024-10, batch 16), momentum 0.9 and
    weight decay; worker 1 straggles so that it is killed mid-run."""
    folder = tmp_path / name
    folder.mkdir()
    root = pathlib.Path(__file__).resolve().parents[2]
    net = (root / "tests/e2e/nets/mlp_wide.prototxt").read_text()
    (folder / "net.prototxt").write_text(net.replace("BATCH", "16").replace("DATA", str(data)))
    (folder / "solver.prototxt").write_text(
        f'net: "{folder}/net.prototxt"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\n'
        f'lr_policy: "fixed"\ndisplay: 5\nmax_iter: 40\nsnapshot: 0\n'
        f'snapshot_prefix: "{folder}/snap"\nrandom_seed: 7\nsolver_mode: CPU\n')
    job = base_job(tmp_path, name=name, solver=str(folder / "solver.prototxt"),
                   consistency=BSP, engine="fast")
    job["solver_overrides"] = {"max_iter": 40, "display": 5, "snapshot": 0}
    job["transport"]["sufficient_factors"] = "broadcast"
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 60}
    return job


def digest(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


# The kill lands anywhere in iteration 1 or 2 of worker 1: when its process had
# already pushed some chunks of the iteration, those chunks' step may be applied
# (landed) before the restarted process pulls that iteration; the shard then
# still serves them as they were before the step (ShardCore::StepStart), or the
# restarted worker would recompute the iteration on mixed weights (issue 32).
def test_a_killed_worker_restarts_its_replica_and_the_run_is_unchanged(
        tmp_path, fashion_mnist, monkeypatch):
    # Every 4 iterations the replica is compared with the shard, an error if one bit differs.
    monkeypatch.setenv("PSTRAIN_FACTOR_VERIFY_INTERVAL", "4")
    monkeypatch.setenv("PSTRAIN_FACTOR_VERIFY_STRICT", "1")
    reference = Job.from_yaml(write_job(tmp_path, wide_job(tmp_path, "clean", fashion_mnist),
                                        "clean.yaml")).run(quiet=True, timeout=240)
    assert reference.ok, reference.summary["message"]
    job = Job.from_yaml(write_job(tmp_path, wide_job(tmp_path, "killed", fashion_mnist),
                                  "killed.yaml"))
    r = run_killing_worker(job, rank=1)
    assert r.summary["status"] == "ok", r.summary
    assert r.summary["worker_restarts"] >= 1 and r.summary["iterations"] == 40
    log = (job.config.run_dir / "logs/worker-1.log").read_text()
    assert "restart 1 of worker 1" in log
    assert "factor broadcast: ip2/0: 262144 bytes of factors pulled" in log
    assert digest(r.summary["snapshot"]) == digest(reference.summary["snapshot"])


@pytest.mark.parametrize("factors", [False, "push"])
def test_a_killed_worker_restarts_and_the_run_is_unchanged_without_broadcast(
        tmp_path, fashion_mnist, factors):
    """The controls: the same kill in the dense bsp run and with push-only factors
    (the restart's pull of a partly pushed iteration is the same code)."""
    def job_of(name):
        job = wide_job(tmp_path, name, fashion_mnist)
        job["transport"]["sufficient_factors"] = factors
        job["transport"]["host_aggregation"] = False  # auto would aggregate the one host
        return job
    reference = Job.from_yaml(write_job(tmp_path, job_of("clean"), "clean.yaml")).run(
        quiet=True, timeout=240)
    assert reference.ok, reference.summary["message"]
    job = Job.from_yaml(write_job(tmp_path, job_of("killed"), "killed.yaml"))
    r = run_killing_worker(job, rank=1)
    assert r.summary["status"] == "ok", r.summary
    assert r.summary["worker_restarts"] >= 1 and r.summary["iterations"] == 40
    log = (job.config.run_dir / "logs/worker-1.log").read_text()
    assert "restart 1 of worker 1" in log
    assert ("sufficient factors: ip2 (1024 -> 1024)" in log) == (factors == "push")
    assert "factor broadcast" not in log
    assert digest(r.summary["snapshot"]) == digest(reference.summary["snapshot"])
