"""Faults across hosts, for real (the hosts of netns_hosts.py): ps-train killed
with SIGKILL, the server's processes killed mid-job, a worker's host cut off
the network mid-job."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time

import pytest
import yaml

from pstrain import Job
from test_hostfile import digest, hostfile_job, job_dict, no_programs_left, ps_train, run_to_end, write


def records(run_dir: pathlib.Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def leftovers(hosts) -> list[str]:
    """Every process in a host namespace but its sshd listener."""
    return [p for i in (1, 2, 3) for p in hosts.processes(hosts.ns(i)) if "[listener]" not in p]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, fashion_mnist):
    """The undisturbed bsp job on one host (60 iterations, snapshots at 30 and 60)."""
    tmp = tmp_path_factory.mktemp("reference")
    result = Job.from_yaml(write(tmp, job_dict(tmp, "ref"))).run(quiet=True, timeout=240)
    assert result.ok, result.summary["message"]
    return result


def test_kill_9_of_ps_train_leaves_nothing_on_any_host(tmp_path, hosts, fashion_mnist):
    job = hostfile_job(tmp_path, hosts, "killed")
    data = yaml.safe_load(job.read_text())
    data["solver_overrides"].update(max_iter=5000, test_interval=0, snapshot=0)
    job.write_text(yaml.safe_dump(data, sort_keys=False))
    run_dir = tmp_path / "runs" / "killed"
    proc = ps_train(hosts, job)
    try:
        wait_for(lambda: any(r["event"] == "train" and r["rank"] == 1 for r in records(run_dir)),
                 120, "worker 1's first training event")
        assert len(no_programs_left(hosts)) == 3
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # SIGTERM through each session's end; the server saves its shard first
        # (30 s: a loaded machine is slow to do that). The wait is the assertion:
        # it fails when a process is still there after 30 s.
        wait_for(lambda: not leftovers(hosts), 30, "every process on every host to end")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The server stopped on SIGTERM (its session ended), so it saved its shard.
    host1 = tmp_path / f"on-host-{hosts.address(1)}" / "killed" / "snapshots"
    assert (host1 / "killed_interrupted.shard0.state").is_file()


def test_a_lost_server_host_restarts_the_job_from_the_last_checkpoint(tmp_path, hosts,
                                                                      reference):
    # Host 3 has a spare slot. Every process of host 1 (its sshd, the server) is
    # killed mid-job: the job restarts from its checkpoint with the server on the spare.
    job = hostfile_job(tmp_path, hosts, "lostserver", slots={3: 2})
    data = yaml.safe_load(job.read_text())
    # Time to act mid-job: 30 iterations x 300 ms between the checkpoint and the end.
    data["cluster"]["straggler"] = {"rank": 1, "delay_ms": 300}
    job.write_text(yaml.safe_dump(data, sort_keys=False))
    run_dir = tmp_path / "runs" / "lostserver"
    proc = ps_train(hosts, job)
    try:
        wait_for(lambda: (run_dir / "snapshots" / "lostserver_iter_30.manifest").exists(), 120,
                 "the checkpoint at iteration 30 in the run folder")
        assert [p for p in no_programs_left(hosts) if "ps-server" in p]
        hosts.kill_all(hosts.ns(1))
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        hosts.start_sshd(1)      # host 1 answers again, for the tests after this one
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok", (summary["message"], out)
    assert summary["server_restarts"] == 1
    assert "server-0 on 10.77.0.11 " in out
    assert f"restarting the job from {run_dir}/snapshots/lostserver_iter_30.manifest" in out
    assert summary["resumed_from"] == str(run_dir / "snapshots" / "lostserver_iter_30.manifest")
    assert summary["hosts"]["server-0"] == hosts.address(3)
    ref = reference.summary
    assert abs(summary["final_test_accuracy"] - ref["final_test_accuracy"]) <= 0.01
    # bsp resumes exactly: the same weights as the undisturbed run.
    assert digest(run_dir / "snapshots" / "lostserver_iter_60.caffemodel") == \
        digest(reference.run_dir / "snapshots" / "ref_iter_60.caffemodel")
    assert not no_programs_left(hosts)


def test_a_worker_cut_off_is_reported_and_replaced_on_a_spare_slot(tmp_path, hosts,
                                                                    fashion_mnist):
    # Hostfile order 2, 3, 1 (host 1 with 2 slots): server 0 on host 2, worker 0 on
    # host 3, worker 1 on host 1, a spare slot on host 1. Host 3's link goes down.
    job = hostfile_job(tmp_path, hosts, "cutoff", slots={1: 2}, order=(2, 3, 1))
    data = yaml.safe_load(job.read_text())
    data["solver_overrides"].update(max_iter=60, snapshot=0, test_interval=30)
    data["cluster"]["straggler"] = {"rank": 1, "delay_ms": 50}
    # The session ends 14 s after the cut (after the servers' 10 s stall warning);
    # the probe of host 3 gives up after 3 s.
    data["remote"]["ssh_options"] += ["-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=7",
                                      "-o", "ConnectTimeout=3"]
    job.write_text(yaml.safe_dump(data, sort_keys=False))
    run_dir = tmp_path / "runs" / "cutoff"
    proc = ps_train(hosts, job)
    try:
        wait_for(lambda: any(r["event"] == "train" and r["rank"] == 0 for r in records(run_dir)),
                 120, "worker 0's first training event")
        subprocess.run(["ip", "-n", hosts.ns(3), "link", "set", "eth0", "down"], check=True)
        out, _ = proc.communicate(timeout=240)
    finally:
        subprocess.run(["ip", "-n", hosts.ns(3), "link", "set", "eth0", "up"])
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok", (summary["message"], out)
    recs = records(run_dir)
    stall = [r for r in recs if r["event"] == "stall"]
    assert stall and stall[0]["rank"] == 0 and stall[0]["host"] == hosts.address(3), stall
    assert isinstance(stall[0]["clock"], int) and stall[0]["silent_s"] >= 10
    assert f"stall: worker-0 on {hosts.address(3)} (rank 0, last clock {stall[0]['clock']})" \
        in out
    restart = [r for r in recs if r["event"] == "restart"]
    assert len(restart) == 1 and restart[0]["rank"] == 0, restart
    assert restart[0]["host"] == hosts.address(1)
    assert summary["hosts"]["worker-0"] == hosts.address(1)
    assert summary["worker_restarts"] == 1
    assert f"worker-0 on {hosts.address(3)} lost its ssh session" in out
    assert summary["iterations"] == 60
    assert summary["snapshot"] == str(run_dir / "snapshots" / "cutoff_iter_60.caffemodel")
    assert pathlib.Path(summary["snapshot"]).is_file()
