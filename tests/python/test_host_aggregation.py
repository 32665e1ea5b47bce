"""transport.host_aggregation: the workers of a host sum their gradients in shared
memory and one of them pushes (worker/ps/host_group.hpp); the job key, the command
lines it makes, and real local jobs: half the bytes pushed, the same weights bit for
bit, equal to one worker with the whole batch, and a killed member restarted."""
from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess

import pytest

from ps_train_util import base_job, leftover_processes, run_killing_worker, write_job
from pstrain import Job
from pstrain.errors import JobError

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMOOTH_NET = ROOT / "tests/e2e/nets/mlp_smooth.prototxt"


def _flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def smooth_solver(tmp: pathlib.Path, name: str, batch: int, data: pathlib.Path) -> pathlib.Path:
    """mlp_smooth (no ReLU or max pooling: equal up to rounding to one large batch)."""
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    net = SMOOTH_NET.read_text().replace("BATCH", str(batch)).replace("DATA", str(data))
    (folder / "net.prototxt").write_text(net)
    solver = folder / "solver.prototxt"
    solver.write_text(f'net: "{folder}/net.prototxt"\nbase_lr: 0.01\nmomentum: 0.9\n'
                      f'weight_decay: 0.0005\nlr_policy: "fixed"\ndisplay: 10\nmax_iter: 40\n'
                      f'snapshot: 0\nsnapshot_prefix: "{folder}/snap"\nrandom_seed: 7\n'
                      f'solver_mode: CPU\n')
    return solver


def job_for(tmp: pathlib.Path, name: str, data: pathlib.Path, *, workers: int, batch: int,
            aggregation, iters: int = 40, **changes) -> dict:
    job = base_job(tmp, name=name, solver=str(smooth_solver(tmp, name, batch, data)),
                   consistency={"mode": "bsp", "staleness": 0}, engine="fast", **changes)
    job["cluster"]["workers"] = workers
    job["solver_overrides"] = {"max_iter": iters, "display": 10, "snapshot": 0}
    job["transport"]["host_aggregation"] = aggregation
    return job


def _segments() -> set[str]:
    return {p.name for p in pathlib.Path("/dev/shm").glob("pstrain-*")}


def digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the key and the command lines -------------------------------------------------------

def test_auto_groups_the_workers_of_a_bsp_job_on_one_host(tmp_path, build_dir):
    job = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
    job["cluster"]["workers"] = 3
    plan = Job.from_yaml(write_job(tmp_path, job)).plan()
    assert plan.job.transport.host_aggregation == "auto"
    assert plan.host_groups() == [0, 0, 0]
    server = plan.server_command(0, None)
    assert (_flag(server, "--workers"), _flag(server, "--average-over")) == ("1", "3")
    worker = plan.worker_command(2, ["tcp://127.0.0.1:5000"])
    assert _flag(worker, "--rank") == "2" and _flag(worker, "--workers") == "3"
    assert _flag(worker, "--host-groups") == "0,0,0"
    assert _flag(worker, "--host-group-shm") == f"/pstrain-{plan.job_key:016x}"
    # off, or not lock-step (auto): every worker pushes alone, as before
    for changes in ({"transport": {"host_aggregation": False}},
                    {"consistency": {"mode": "ssp", "staleness": 2}},
                    {"consistency": {"mode": "bsp", "staleness": 0, "backup_workers": 1}}):
        j = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
        for section, values in changes.items():
            j[section].update(values)
        plan = Job.from_yaml(write_job(tmp_path, j)).plan()
        assert plan.host_groups() is None
        assert _flag(plan.server_command(0, None), "--workers") == "2"
        assert "--average-over" not in plan.server_command(0, None)
        assert "--host-groups" not in plan.worker_command(1, ["e"])


def test_groups_follow_the_hosts_of_a_hostfile(tmp_path, build_dir):
    hosts = tmp_path / "hosts"
    hosts.write_text("a slots=2\nb slots=2\nc slots=1\n")
    job = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
    del job["cluster"]["servers"]
    job["cluster"].update(hosts="hostfile", hostfile=str(hosts), workers=5)
    plan = Job.from_yaml(write_job(tmp_path, job)).plan()
    assert plan.host_groups() == [0, 0, 1, 1, 2]
    server = plan.server_command(2, "tcp://a:1")
    assert (_flag(server, "--num-servers"), _flag(server, "--workers"),
            _flag(server, "--average-over")) == ("3", "3", "5")
    # one worker a host: nothing to sum, no groups
    hosts.write_text("a\nb slots=2\n")
    job["cluster"]["workers"] = 2
    plan = Job.from_yaml(write_job(tmp_path, job)).plan()
    assert plan.host_groups() is None
    # ... and a worker moved to the spare slot beside the other keeps pushing alone:
    # the servers were started counting two pushers
    placement = plan.layout.placement
    assert str(placement.take_spare(0, avoid=placement.workers[0].host)) == "b slot 1"
    assert plan.layout.worker_hosts() == ["b", "b"]
    assert plan.host_groups() is None
    assert "--host-groups" not in plan.worker_command(0, ["tcp://b:1"])


def test_host_aggregation_key_errors(tmp_path, build_dir, monkeypatch):
    for changes, message in [
            ({"transport": {"host_aggregation": "yes"}},
             "transport.host_aggregation: must be auto, true or false, got 'yes'"),
            ({"transport": {"host_aggregation": True}},
             "transport.host_aggregation: true needs consistency.mode bsp (got ssp: each worker "
             "pushes on its own clock)"),
            ({"transport": {"host_aggregation": True},
              "consistency": {"mode": "bsp", "staleness": 0, "backup_workers": 1}},
             "transport.host_aggregation: true needs no consistency.backup_workers (a step "
             "would drop a whole host's sum)")]:
        j = base_job(tmp_path)
        for section, values in changes.items():
            j[section].update(values)
        path = write_job(tmp_path, j)
        with pytest.raises(JobError) as e:
            Job.from_yaml(path)
        assert str(e.value) == f"{path}: {message}"
    # Slurm places tasks when srun starts them: no groups known at plan time
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    j = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
    j["cluster"]["hosts"] = "slurm"
    j["transport"]["host_aggregation"] = True
    path = write_job(tmp_path, j)
    with pytest.raises(JobError) as e:
        Job.from_yaml(path).plan()
    assert str(e.value) == (f"{path}: transport.host_aggregation: true is not available with "
                            f"hosts: slurm (the nodes of its tasks are known only once srun "
                            f"starts them); set auto or false")


# -- real jobs -------------------------------------------------------------------------------

def test_one_push_per_host_halves_the_bytes_and_keeps_the_weights(tmp_path, build_dir,
                                                                  fashion_mnist):
    runs = {}
    for name, workers, batch, aggregation in (("on", 2, 32, True), ("off", 2, 32, False),
                                              ("one", 1, 64, False)):
        job = job_for(tmp_path, name, fashion_mnist, workers=workers, batch=batch,
                      aggregation=aggregation)
        runs[name] = Job.from_yaml(write_job(tmp_path, job)).run(quiet=True, timeout=240)
        assert runs[name].ok, runs[name].summary["message"]
    on, off = runs["on"].summary, runs["off"].summary
    assert on["iterations"] == off["iterations"] == 40
    # one pusher instead of two: exactly half the gradient bytes. Both count worker 0's
    # init push once: the model, 784 x 64 + 64 + 64 x 10 + 10 floats
    model_bytes = 4 * (784 * 64 + 64 + 64 * 10 + 10)
    gradients = {n: runs[n].summary["bytes_pushed"] - model_bytes for n in ("on", "off")}
    assert gradients["off"] == 40 * 2 * model_bytes
    assert gradients["on"] == 40 * model_bytes
    # one host: the leader sums in rank order, as the shard does: the same floats
    model = {n: pathlib.Path(r.summary["snapshot"]) for n, r in runs.items()}
    assert digest(model["on"]) == digest(model["off"])
    # and bsp is still one worker with the whole batch (up to rounding)
    diff = subprocess.run([str(build_dir / "bin" / "ps-net"), "diff", str(model["on"]), str(model["one"]),
                           "--max-rel", "1e-5"], capture_output=True, text=True, timeout=60)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    # the member's metrics say it sent nothing to the servers
    sent = [r["bytes_sent"] for r in runs["on"].metrics
            if r["event"] == "train" and r.get("rank") == 1 and "bytes_sent" in r]
    assert sent and not any(sent)


def test_a_killed_member_is_restarted_and_the_weights_are_unchanged(tmp_path, fashion_mnist):
    clean = job_for(tmp_path, "clean", fashion_mnist, workers=2, batch=32, aggregation=True,
                    iters=80)
    reference = Job.from_yaml(write_job(tmp_path, clean)).run(quiet=True, timeout=240)
    assert reference.ok, reference.summary["message"]

    job = job_for(tmp_path, "killed", fashion_mnist, workers=2, batch=32, aggregation=True,
                  iters=80)
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 40}
    job_obj = Job.from_yaml(write_job(tmp_path, job))
    run_dir = job_obj.config.run_dir
    before = _segments()
    r = run_killing_worker(job_obj, rank=1)
    assert r.summary["status"] == "ok", r.summary
    assert r.summary["worker_restarts"] >= 1 and r.summary["iterations"] == 80
    assert "restart 1 of worker 1" in (run_dir / "logs/worker-1.log").read_text()
    # no shared memory left behind, whatever ended its processes (ps-train removes it)
    assert _segments() <= before, _segments() - before
    # the restarted member joined at the leader's iteration: the same run, bit for bit
    assert digest(pathlib.Path(r.summary["snapshot"])) == \
        digest(pathlib.Path(reference.summary["snapshot"]))
    assert not leftover_processes(str(run_dir))


# -- the shared memory, alone ------------------------------------------------------------

def _member(build_dir, solver: pathlib.Path, shm: str, *extra: str, groups: str = "0,0"):
    """ps-worker 1 of 2 in host group 0 (a member: it never connects to the servers)."""
    return subprocess.run([str(build_dir / "bin" / "ps-worker"), "--solver", str(solver),
                           "--rank", "1", "--workers", "2", "--servers", "tcp://127.0.0.1:9",
                           "--engine", "fast", "--host-groups", groups, "--host-group-shm", shm,
                           *extra], capture_output=True, text=True, timeout=60)


def test_a_planted_or_foreign_segment_is_refused(tmp_path, build_dir, fashion_mnist):
    solver = smooth_solver(tmp_path, "alone", 32, fashion_mnist)
    shm = f"/pstrain-test-{os.getpid()}"
    planted = pathlib.Path("/dev/shm") / (shm[1:] + "-g0")
    planted.write_bytes(b"")
    try:
        planted.chmod(0o644)        # readable by every local user: refused
        done = _member(build_dir, solver, shm)
        assert done.returncode == 1, done.stderr
        assert (f"ps-worker 1: host group {shm}-g0: owned by uid {os.geteuid()} with mode 0644: "
                f"not this user's private segment (uid {os.geteuid()}, mode 0600); refused"
                in done.stderr), done.stderr
        planted.chmod(0o600)
        planted.write_bytes(b"\0" * 4096)   # another shape
        done = _member(build_dir, solver, shm)
        # 16 KiB of control words, then a member's slot and the weights: 2 x 50890 floats
        assert done.returncode == 1 and (
            f"host group {shm}-g0: holds 4096 bytes, this group needs {16384 + 2 * 4 * 50890} "
            f"(another job's segment?)") in done.stderr, done.stderr
    finally:
        planted.unlink()
    # a member without a leader waits --timeout-s, then says for whom
    done = _member(build_dir, solver, shm, "--timeout-s", "1")
    pathlib.Path("/dev/shm", shm[1:] + "-g0").unlink()
    assert done.returncode == 75, done.stderr
    assert ("worker 1: its host group's leader, worker 0, did not let it join within 1000 ms "
            f"({shm}-g0)") in done.stderr, done.stderr
    ssp = _member(build_dir, solver, shm, "--mode", "ssp")
    assert ssp.returncode == 1 and ("ps-worker 1: host aggregation (--host-groups) needs mode "
                                    "bsp without EASGD or model averaging") in ssp.stderr, ssp.stderr
    bad = _member(build_dir, solver, shm, groups="1,0")
    assert bad.returncode == 2
    assert ('--host-groups: "1,0": groups are numbered 0, 1, ... in order of first appearance'
            in bad.stderr), bad.stderr


def test_a_stopped_job_leaves_no_shared_memory(tmp_path, fashion_mnist):
    """The leader removes its segment when it finishes; when the job is stopped
    (here: its time is up) ps-train removes it."""
    job = job_for(tmp_path, "stopped", fashion_mnist, workers=2, batch=32, aggregation=True,
                  iters=100000)
    before = _segments()
    result = Job.from_yaml(write_job(tmp_path, job)).run(quiet=True, timeout=8)
    assert result.summary["status"] == "failed", result.summary
    assert _segments() <= before, _segments() - before
