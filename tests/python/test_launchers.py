"""The launcher interface (python/pstrain/launch.py): every cluster.hosts value has
a launcher; a launcher is one class the runner drives through the interface only
(a test launcher here relocates a killed worker and the run records where);
the hostfile launcher's relocation; the plan's command lines from a layout; the
one rule of what is retried (exitcodes.is_retryable)."""
from __future__ import annotations

import inspect
import os
import pathlib
import signal
import threading
import time
import types

import pytest

from ps_train_util import base_job, leftover_processes, write_job
from pstrain import Job, config, exitcodes, launchers
from pstrain.hostrun import HostLauncher, HostLayout
from pstrain.hosts import Host, place
from pstrain.launch import CannotRelocate, Launcher, Placed
from pstrain.launcher import ProcessHandle
from pstrain.layout import Layout
from pstrain.localrun import LocalLauncher
from pstrain.plan import make_plan
from pstrain.slurm import SlurmLayout


def test_every_hosts_value_has_a_launcher_that_implements_the_interface():
    assert set(launchers.LAUNCHERS) == set(config.HOSTS)
    for name, cls in launchers.LAUNCHERS.items():
        assert issubclass(cls, Launcher) and cls.name == name
        assert not inspect.isabstract(cls), f"{cls.__name__} leaves part of Launcher undone"
    with pytest.raises(Exception, match=r"cluster.hosts: no launcher is named 'k8s' \(known: "
                                        r"local, hostfile, slurm\)"):
        launchers.launcher_for("k8s")


@pytest.mark.parametrize("rc,remote,retried", [
    (exitcodes.RETRYABLE, False, True), (-signal.SIGKILL, False, True),
    (exitcodes.LOST, True, True), (exitcodes.LOST, False, False),
    (exitcodes.FAILURE, True, False), (exitcodes.DIVERGED, True, False),
    (exitcodes.USAGE, False, False), (exitcodes.OK, True, False)])
def test_what_is_retried(rc, remote, retried):
    assert exitcodes.is_retryable(rc, remote=remote) is retried


# -- a launcher of the test's own ----------------------------------------------------

class RecordingLauncher(Launcher):
    """Local processes, every interface call recorded; a restarted worker is
    'moved' to a made-up slot."""

    name = "local"
    calls: list = []

    @classmethod
    def layout(cls, job, source):
        cls.calls.append(("layout",))
        return Layout([None] * job.cluster.workers)

    def start_servers(self):
        self.calls.append(("start_servers",))
        return self.start_each_server(lambda k, argv: ProcessHandle(
            argv, role="server", rank=k, log_path=self.log_path("server", k), sink=self.sink))

    def start_worker(self, rank, endpoints):
        self.calls.append(("start_worker", rank, tuple(endpoints)))
        return self.track(ProcessHandle(self.plan.worker_command(rank, endpoints), role="worker",
                                        rank=rank, log_path=self.log_path("worker", rank),
                                        sink=self.sink))

    def relocate(self, rank, lost, returncode):
        self.calls.append(("relocate", rank, returncode))
        return Placed("127.0.0.9", "test slot 7")

    def release(self):
        self.calls.append(("release",))


def test_the_runner_drives_a_launcher_through_the_interface_only(tmp_path, fashion_mnist,
                                                               monkeypatch):
    RecordingLauncher.calls = []
    monkeypatch.setitem(launchers.LAUNCHERS, "local", RecordingLauncher)
    job = base_job(tmp_path, name="recorded")
    job["solver_overrides"].update(max_iter=60, test_interval=0, snapshot=0)
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 60}
    job_obj = Job.from_yaml(write_job(tmp_path, job))
    run_dir = job_obj.config.run_dir
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(r=job_obj.run(quiet=True, timeout=240)))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "logs/worker-1.log").exists() or \
                '"event":"train"' not in (run_dir / "logs/worker-1.log").read_text():
            assert time.monotonic() < deadline, "worker 1 never trained"
            time.sleep(0.2)
        victims = [p for p in leftover_processes(str(run_dir)) if "--rank 1 " in p]
        assert len(victims) == 1, victims
        os.kill(int(victims[0].split(":")[0]), signal.SIGKILL)
    finally:
        thread.join(300)
    r = result["r"]
    assert r.summary["status"] == "ok", r.summary
    endpoints = RecordingLauncher.calls[2][2]
    assert len(endpoints) == 1 and endpoints[0].startswith("tcp://127.0.0.1:")
    assert RecordingLauncher.calls == [
        ("layout",), ("start_servers",), ("start_worker", 0, endpoints),
        ("start_worker", 1, endpoints), ("relocate", 1, -signal.SIGKILL),
        ("start_worker", 1, endpoints), ("release",)]
    restarts = [x for x in r.metrics if x["event"] == "restart"]
    assert [(x["rank"], x["exit"], x["host"]) for x in restarts] == [
        (1, -signal.SIGKILL, "127.0.0.9")]
    assert "hosts" not in r.summary                  # a launcher of local processes
    assert not leftover_processes(str(run_dir))


# -- the hostfile launcher's relocation, without ssh ---------------------------------

def _host_launcher(tmp_path, hosts, servers, workers, reachable):
    placement = place(hosts, servers, workers, "job.yaml", placement="first_slots")
    job = types.SimpleNamespace(remote=config.RemoteConfig(), name="j")
    plan = types.SimpleNamespace(layout=HostLayout(placement), job=job, run_dir=tmp_path,
                                 host_groups=lambda: None)
    launcher = HostLauncher(plan, sink=lambda h, e: None)
    staged = []
    launcher.ssh.reachable = lambda host: host.name in reachable
    launcher._stage_host = staged.append
    return launcher, staged


def test_a_lost_worker_moves_to_a_spare_slot_of_another_host(tmp_path):
    h1, h2, h3 = Host("h1"), Host("h2"), Host("alice@h3", slots=2)
    launcher, staged = _host_launcher(tmp_path, [h1, h2, h3], 1, 2, reachable={"h1", "alice@h3"})
    lost = types.SimpleNamespace()
    # worker 0 on h2 (no answer): lost session -> h3's second slot (h3's first is worker 1)
    assert launcher.relocate(0, lost, exitcodes.LOST) == Placed("h3", "alice@h3 slot 1")
    assert staged == [h3]
    assert launcher.plan.layout.worker_address(0) == "h3"
    assert launcher.plan.layout.where("worker", 0) == "alice@h3 slot 1"
    # a retryable exit other than a lost session restarts on the same slot, no ssh asked
    launcher.ssh.reachable = None
    assert launcher.relocate(1, lost, exitcodes.RETRYABLE) == Placed("h3", "alice@h3 slot 0")


def test_a_lost_worker_with_no_spare_slot_cannot_move(tmp_path):
    launcher, _ = _host_launcher(tmp_path, [Host("h1"), Host("h2")], 1, 1, reachable={"h1"})
    with pytest.raises(CannotRelocate) as e:
        launcher.relocate(0, types.SimpleNamespace(), exitcodes.LOST)
    assert str(e.value) == "h2 does not answer ssh and no spare slot is left in the hostfile"


# -- command lines from a layout --------------------------------------------------------

def _flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def test_the_plan_takes_addresses_from_the_layout(tmp_path, build_dir):
    job = Job.from_yaml(write_job(tmp_path, base_job(tmp_path))).config
    local = make_plan(job, "job.yaml", layout=LocalLauncher.layout(job, "job.yaml"))
    slurm = make_plan(job, "job.yaml", layout=SlurmLayout(2))
    hosts = make_plan(job, "job.yaml", layout=HostLayout(place(
        [Host("u@10.0.0.1"), Host("10.0.0.2", slots=2)], 1, 2, "job.yaml",
        placement="first_slots")))
    for plan, bind, server, workers in [
            (local, "tcp://127.0.0.1:0", None, [None, None]),
            (slurm, "tcp://@NODE@:0", "@NODE@", ["@NODE@", "@NODE@"]),
            (hosts, "tcp://10.0.0.1:0", "10.0.0.1", ["10.0.0.2", "10.0.0.2"])]:
        cmd = plan.server_command(0, None)
        assert (_flag(cmd, "--bind"), _flag(cmd, "--advertise")) == (bind, server)
        assert [_flag(plan.worker_command(r, ["e"]), "--advertise") for r in (0, 1)] == workers
    assert "# on 10.0.0.2 slot 1\n" in hosts.describe()
    assert "# on " not in local.describe()
