"""transport.host_aggregation: the workers of a host sum their gradients in shared
memory and one of them pushes (worker/ps/host_group.hpp); the job key, the command
lines it makes, and real local jobs: half the bytes pushed, the same weights bit for
bit, equal to one worker with the whole batch, and a killed member restarted."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess

import pytest

from ps_train_util import base_job, leftover_processes, run_killing_worker, write_job
from pstrain import Job
from pstrain import slurmnode
from pstrain.errors import JobError
from pstrain.slurm import (PLAN_FILE, SlurmLauncher, expand_nodelist, expand_tasks_per_node)

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
    # Slurm without the allocation's node list: the nodes of the tasks are not known
    _slurm_env(monkeypatch, None, None)
    j = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
    j["cluster"]["hosts"] = "slurm"
    j["transport"]["host_aggregation"] = True
    path = write_job(tmp_path, j)
    with pytest.raises(JobError) as e:
        Job.from_yaml(path).plan()
    assert str(e.value) == (f"{path}: transport.host_aggregation: true is not available with "
                            f"hosts: slurm here (SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE are "
                            f"not both set, so the nodes of its tasks are known only once srun "
                            f"starts them); set auto or false")


# -- Slurm: the groups from the allocation's variables -----------------------------------------

def _slurm_env(monkeypatch, nodelist: str | None, per_node: str | None, ntasks: int = 0) -> None:
    """Inside a Slurm allocation (SLURM_JOB_ID, srun on PATH) with these variables."""
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    for name in ("SLURM_NODELIST", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_JOB_NUM_NODES",
                 "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE"):
        monkeypatch.delenv(name, raising=False)
    if nodelist is not None:
        monkeypatch.setenv("SLURM_JOB_NODELIST", nodelist)
        monkeypatch.setenv("SLURM_JOB_NUM_NODES", str(len(expand_nodelist(nodelist))))
    if per_node is not None:
        monkeypatch.setenv("SLURM_TASKS_PER_NODE", per_node)
    if ntasks:
        monkeypatch.setenv("SLURM_NTASKS", str(ntasks))


def _slurm_plan(tmp_path, workers: int, aggregation="auto", **cluster):
    job = base_job(tmp_path, consistency={"mode": "bsp", "staleness": 0})
    del job["cluster"]["servers"]
    job["cluster"].update(hosts="slurm", workers=workers, **cluster)
    job["transport"]["host_aggregation"] = aggregation
    path = write_job(tmp_path, job)
    return Job.from_yaml(path).plan(), path


def test_slurm_groups_come_from_the_allocations_node_list(tmp_path, build_dir, monkeypatch):
    # sbatch --nodes=2 --ntasks-per-node=2: two nodes of two task slots
    _slurm_env(monkeypatch, "node[01-02]", "2(x2)", ntasks=4)
    plan, _ = _slurm_plan(tmp_path, 4)
    assert plan.layout.worker_hosts() == ["node01", "node01", "node02", "node02"]
    assert plan.host_groups() == [0, 0, 1, 1]
    assert plan.job.cluster.servers == 2        # per_host: one server a node
    server = plan.server_command(1, "tcp://node01:1")
    assert (_flag(server, "--workers"), _flag(server, "--average-over")) == ("2", "4")
    worker = plan.worker_command(3, ["@SERVERS@"])
    assert _flag(worker, "--host-groups") == "0,0,1,1"
    assert _flag(worker, "--advertise") == "@NODE@"
    # the launcher places the workers itself, on those nodes, and tells each task its node
    launcher = SlurmLauncher(plan, sink=None)
    assert launcher.placed_nodes() == {"worker": ["node01", "node01", "node02", "node02"],
                                       "server": []}
    assert launcher._arbitrary(launcher.placed_nodes()["worker"]) == [
        "--distribution=arbitrary", "--nodelist=node01,node01,node02,node02"]
    plan.run_dir.mkdir(parents=True)
    launcher.write_tasks()
    tasks = json.loads((plan.run_dir / PLAN_FILE).read_text())["tasks"]
    assert [(t["role"], t.get("node")) for t in tasks] == [
        ("server", None), ("server", None), ("worker", "node01"), ("worker", "node01"),
        ("worker", "node02"), ("worker", "node02")]
    # the steps: per_host servers cyclic over the nodes, then the workers where the plan
    # put them; a restarted worker goes back to its group's node
    steps = []

    class Step:
        def send(self, message):
            pass

    class Task:
        host = "elsewhere"

        def wait_listening(self, timeout):
            return "tcp://node01:1"

    def start_step(self, tasks, node=None, spread=()):
        steps.append((tasks, node, list(spread)))
        self.steps.append(Step())
        return {t: Task() for t in tasks}

    monkeypatch.setattr(SlurmLauncher, "_start_step", start_step)
    launcher.start_servers()
    assert launcher.start_worker(2, ["e"]) is not None
    launcher.start_worker(2, ["e"])         # the restart of worker 2
    assert steps == [
        ([0, 1], None, ["--nodes=2", "--distribution=cyclic", "--overlap"]),
        ([2, 3, 4, 5], None, ["--overlap", "--distribution=arbitrary",
                              "--nodelist=node01,node01,node02,node02"]),
        ([4], "node02", [])]
    # uneven nodes (3,1): block order fills the first node first
    _slurm_env(monkeypatch, "a,b", "3,1", ntasks=4)
    plan, _ = _slurm_plan(tmp_path, 4)
    assert plan.host_groups() == [0, 0, 0, 1]
    # first_slots: the servers take the allocation's first slots, the workers the next
    _slurm_env(monkeypatch, "gpu[7-8]", "2(x2)", ntasks=4)
    plan, _ = _slurm_plan(tmp_path, 3, server_placement="first_slots", servers=1)
    assert plan.layout.worker_hosts() == ["gpu7", "gpu8", "gpu8"]
    assert plan.host_groups() == [0, 1, 1]
    assert SlurmLauncher(plan, sink=None).placed_nodes() == {
        "worker": ["gpu7", "gpu8", "gpu8"], "server": ["gpu7"]}
    # one worker a node: nothing to sum; and off: Slurm's own placement, as before
    _slurm_env(monkeypatch, "n[1-4]", "1(x4)", ntasks=4)
    plan, _ = _slurm_plan(tmp_path, 4)
    assert plan.host_groups() is None and SlurmLauncher(plan, sink=None).placed_nodes() is None
    _slurm_env(monkeypatch, "node[01-02]", "2(x2)", ntasks=4)
    plan, _ = _slurm_plan(tmp_path, 4, aggregation=False)
    assert plan.host_groups() is None and SlurmLauncher(plan, sink=None).placed_nodes() is None
    assert "--average-over" not in plan.server_command(0, None)


def test_slurm_allocations_that_do_not_say_where_the_workers_go(tmp_path, build_dir,
                                                                monkeypatch):
    # sbatch --nodes=2 with srun --overcommit: 2 slots for 4 workers; auto stays off
    _slurm_env(monkeypatch, "node[01-02]", "1(x2)")
    plan, path = _slurm_plan(tmp_path, 4)
    assert plan.host_groups() is None
    with pytest.raises(JobError) as e:
        _slurm_plan(tmp_path, 4, aggregation=True)
    assert str(e.value) == (f"{path}: transport.host_aggregation: true is not available with "
                            f"hosts: slurm here (the allocation has 2 task slots "
                            f"(SLURM_TASKS_PER_NODE 1(x2)) for 4 tasks, so srun places the "
                            f"others only when it starts them); set auto or false")
    # malformed or disagreeing variables: one error naming the variable
    for nodelist, per_node, message in [
            ("node[01-02]", "2(x2", "SLURM_TASKS_PER_NODE: cannot read '2(x2': '2(x2' is not "
                                    "N or N(xM)"),
            ("node[01-03]", "2(x2)", "SLURM_TASKS_PER_NODE: '2(x2)' gives 2 task counts for the "
                                     "3 nodes of SLURM_JOB_NODELIST 'node[01-03]'"),
            ("node[02-01]", "2(x2)", "SLURM_JOB_NODELIST: cannot read the node list "
                                     "'node[02-01]': the range '02-01' runs backwards")]:
        _slurm_env(monkeypatch, None, per_node)
        monkeypatch.setenv("SLURM_JOB_NODELIST", nodelist)
        with pytest.raises(JobError) as e:
            _slurm_plan(tmp_path, 4)
        assert str(e.value) == f"{path}: cluster.hosts: slurm: {message}"


def test_slurm_host_lists_expand_as_slurm_writes_them():
    assert expand_nodelist("pstnode[0-1]") == ["pstnode0", "pstnode1"]
    assert expand_nodelist("n[01-03,7],gpu5") == ["n01", "n02", "n03", "n7", "gpu5"]
    assert expand_nodelist("n[098-101]") == ["n098", "n099", "n100", "n101"]
    assert expand_nodelist("r[1-2]-n[1-2]") == ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
    assert expand_nodelist("a, b") == ["a", "b"]
    assert expand_tasks_per_node("2(x2),1") == [2, 2, 1]
    assert expand_tasks_per_node("4") == [4]
    for text, why in [("n[1-", "a '[' without ']'"), ("n]", "a ']' without '['"),
                      ("n[1-]", "the range '1-' is not N or N-M"),
                      ("n[a]", "the range 'a' is not N or N-M"), ("a,,b", "an empty name"),
                      ("n[1[2]]", "a '[' inside brackets")]:
        with pytest.raises(JobError) as e:
            expand_nodelist(text)
        assert str(e.value) == f"SLURM_JOB_NODELIST: cannot read the node list {text!r}: {why}"


def test_slurmnode_refuses_a_task_srun_put_on_another_node(tmp_path, monkeypatch, capsys):
    plan = tmp_path / PLAN_FILE
    plan.write_text(json.dumps({"tasks": [
        {"role": "worker", "rank": 0, "argv": ["true"], "node": "node01"},
        {"role": "worker", "rank": 1, "argv": ["true"], "node": "node02"}]}))
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURMD_NODENAME", "node01")
    assert slurmnode.main([str(plan)]) == 2
    assert capsys.readouterr().out.splitlines() == [
        "pstrain.slurmnode: worker 1 runs on node01, but ps-train placed it on node02 "
        "(transport.host_aggregation groups the workers by node); srun did not follow "
        "--distribution=arbitrary", '{"event": "task_exit", "status": 2}']


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
