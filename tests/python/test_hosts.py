"""hosts: hostfile: the hostfile parser (Horovod's syntax), the placement rule,
the job keys that go with it, and the ssh command lines (no ssh is run here;
tests/multihost runs the real thing)."""
from __future__ import annotations

import os
import pathlib
import shlex

import pytest

from ps_train_util import base_job, write_job
from pstrain import Job
from pstrain.config import RemoteConfig
from pstrain.errors import JobError
from pstrain.hosts import Host, place, read_hostfile
from pstrain.remote import Remote


def hostfile(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "hosts"
    path.write_text(text)
    return path


def test_hostfile_lines_comments_slots_and_gpus(tmp_path):
    hosts = read_hostfile(hostfile(tmp_path, "# cluster\n\nnode-a slots=2  # two\n"
                                              "alice@10.0.0.2 slots=4 gpus=0,1\nnode-c\n"), "job")
    assert hosts == [Host("node-a", 2, (), 3), Host("alice@10.0.0.2", 4, (0, 1), 4),
                     Host("node-c", 1, (), 5)]
    assert hosts[1].address == "10.0.0.2"


@pytest.mark.parametrize("text, message", [
    ("a slots=0\n", ":1: slots=0: must be an integer >= 1"),
    ("a\nb slots=x\n", ":2: slots=x: must be an integer >= 1"),
    ("a cores=2\n", ":1: 'cores=2': expected slots=N or gpus=I,J,..."),
    ("a gpus=0,a\n", ":1: gpus=0,a: must be GPU ids like 0,1,2"),
    ("a slots=1\na slots=2\n", ":2: host 'a' is listed twice (first on line 1); give it one line with all its slots"),
    ("a slots=1 slots=2\n", ":1: slots is given twice"),
    ("bad;host\n", ":1: 'bad;host' is not a host name or address"),
])
def test_a_bad_hostfile_line_is_named(tmp_path, text, message):
    path = hostfile(tmp_path, text)
    with pytest.raises(JobError) as e:
        read_hostfile(path, "job")
    assert str(e.value) == f"{path}{message}"


def test_an_empty_or_missing_hostfile(tmp_path):
    with pytest.raises(JobError, match=r"job: cluster.hostfile: .* lists no host"):
        read_hostfile(hostfile(tmp_path, "# nothing\n"), "job")
    with pytest.raises(JobError, match=r"job: cluster.hostfile: cannot read .*absent"):
        read_hostfile(tmp_path / "absent", "job")


def test_placement_servers_first_then_workers_then_spares():
    hosts = [Host("a", 2), Host("b", 2, (3, 5)), Host("c", 1)]
    p = place(hosts, servers=1, workers=3, source="job")
    assert [str(s) for s in p.servers] == ["a slot 0"]
    assert [(str(s), s.gpu) for s in p.workers] == [("a slot 1", None), ("b slot 0", 3),
                                                     ("b slot 1", 5)]
    assert [str(s) for s in p.spares] == ["c slot 0"]
    assert [h.name for h in p.hosts()] == ["a", "b"]
    moved = p.take_spare(2, avoid=hosts[1])
    assert str(moved) == "c slot 0" and p.workers[2] == moved and not p.spares
    assert p.take_spare(0, avoid=hosts[0]) is None
    with pytest.raises(JobError, match=r"job: cluster.hostfile: 5 slots for 2 servers and 4 "
                                       r"workers \(6 needed\)"):
        place(hosts, servers=2, workers=4, source="job")


def test_job_keys_for_hostfiles(tmp_path):
    hosts = hostfile(tmp_path, "10.0.0.1 slots=1\n10.0.0.2 slots=2\n")
    job = base_job(tmp_path)
    job["cluster"].update(hosts="hostfile", hostfile=str(hosts))
    job["remote"] = {"ssh_options": ["-p", "2222"], "workdir": "/scratch/{name}/{host}"}
    plan = Job.from_yaml(write_job(tmp_path, job)).plan()
    servers = plan.server_command(0, None)
    assert servers[servers.index("--bind") + 1] == "tcp://10.0.0.1:0"
    assert servers[servers.index("--advertise") + 1] == "10.0.0.1"
    worker = plan.worker_command(1, ["tcp://10.0.0.1:5000"])
    assert worker[worker.index("--advertise") + 1] == "10.0.0.2"
    dry = Job.from_yaml(write_job(tmp_path, job)).dry_run()
    assert "# on 10.0.0.2 slot 1\n" in dry
    for bad, message in [
            ({"hosts": "hostfile"}, "cluster.hostfile: is required with hosts: hostfile"),
            ({"hosts": "local", "hostfile": str(hosts)},
             "cluster.hostfile: is used only with hosts: hostfile"),
            ({"hosts": "cloud"}, "cluster.hosts: must be one of local, hostfile, slurm")]:
        j = base_job(tmp_path)
        j["cluster"].update(bad)
        with pytest.raises(JobError, match=message):
            Job.from_yaml(write_job(tmp_path, j))
    j = base_job(tmp_path, remote={"workdir": "/x/{user}"})
    with pytest.raises(JobError, match=r"remote.workdir: may use \{run_dir\}"):
        Job.from_yaml(write_job(tmp_path, j))
    j = base_job(tmp_path, remote={"ssh_options": "-p 22"})
    with pytest.raises(JobError, match=r"remote.ssh_options: must be a list"):
        Job.from_yaml(write_job(tmp_path, j))
    j = base_job(tmp_path)
    j["cluster"].update(hosts="hostfile", hostfile=str(hosts), workers=3)
    with pytest.raises(JobError, match=r"3 slots for 1 servers and 3 workers"):
        Job.from_yaml(write_job(tmp_path, j)).plan()


def test_ssh_command_lines(tmp_path, monkeypatch):
    # The CPU libraries' settings go along (the same kernels on every host); others do not.
    for name in list(os.environ):
        if name.startswith(("OPENBLAS_", "OMP_", "GOMP_", "ONEDNN_", "DNNL_", "MKL_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("PSTRAIN_NOT_FORWARDED", "1")
    run = tmp_path / "runs" / "j"
    remote = Remote(RemoteConfig(ssh_options=["-o", "Port=2222"], workdir="/scratch/{host}/{name}",
                                 program_dir="/opt/pstrain/bin"), run, "j")
    host = Host("bob@node-7")
    cmd = remote.command(host, ["/build/bin/ps-worker", "--solver", f"{run}/solver.prototxt"],
                         {"CUDA_VISIBLE_DEVICES": "1"})
    assert cmd[:2] == ["ssh", "-o"] and "BatchMode=yes" in cmd
    assert cmd.index("Port=2222") > cmd.index("ServerAliveInterval=5")   # the job's come last
    assert cmd[-2] == "bob@node-7"
    line = shlex.split(cmd[-1])
    assert line[:3] == ["cd", "/scratch/node-7/j", "&&"]
    assert line[-6:] == ["env", "OPENBLAS_CORETYPE=Haswell", "CUDA_VISIBLE_DEVICES=1",
                         "/opt/pstrain/bin/ps-worker", "--solver",
                         "/scratch/node-7/j/solver.prototxt"]
    assert "PSTRAIN_NOT_FORWARDED=1" not in line
    assert remote.to_local("/scratch/node-7/j/snapshots/x.caffemodel", host) == \
        f"{run}/snapshots/x.caffemodel"
    assert remote.to_local("/elsewhere/x", host) == "/elsewhere/x"
