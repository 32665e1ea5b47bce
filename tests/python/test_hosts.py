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
    p = place(hosts, servers=1, workers=3, source="job", placement="first_slots")
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
        place(hosts, servers=2, workers=4, source="job", placement="first_slots")


def test_job_keys_for_hostfiles(tmp_path):
    hosts = hostfile(tmp_path, "10.0.0.1 slots=1\n10.0.0.2 slots=2\n")
    job = base_job(tmp_path)
    job["cluster"].update(hosts="hostfile", hostfile=str(hosts), server_placement="first_slots")
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
    j["cluster"].update(hosts="hostfile", hostfile=str(hosts), workers=3,
                        server_placement="first_slots")
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
    assert line[:6] == ["umask", "077", "&&", "cd", "/scratch/node-7/j", "&&"]
    assert line[-6:] == ["env", "OPENBLAS_CORETYPE=Haswell", "CUDA_VISIBLE_DEVICES=1",
                         "/opt/pstrain/bin/ps-worker", "--solver",
                         "/scratch/node-7/j/solver.prototxt"]
    assert "PSTRAIN_NOT_FORWARDED=1" not in line
    assert remote.to_local("/scratch/node-7/j/snapshots/x.caffemodel", host) == \
        f"{run}/snapshots/x.caffemodel"
    assert remote.to_local("/elsewhere/x", host) == "/elsewhere/x"


# -- cluster.server_placement: per_host (the default with hostfiles and Slurm) ----------

@pytest.mark.parametrize("slots, workers, servers, expect_servers, expect_workers, spares", [
    # one host, 2 slots: both workers there, its server beside them (no slot taken)
    ([2], 2, None, ["a"], ["a slot 0", "a slot 1"], []),
    # two hosts of 2 slots, 3 workers: a server on each host that runs workers
    ([2, 2], 3, None, ["a", "b"], ["a slot 0", "a slot 1", "b slot 0"], ["b slot 1"]),
    # three hosts, 4 workers fill a and b: c runs no worker, so no server either
    ([2, 2, 3], 4, None, ["a", "b"], ["a slot 0", "a slot 1", "b slot 0", "b slot 1"],
     ["c slot 0", "c slot 1", "c slot 2"]),
    # four hosts of 2 slots, 8 workers: four servers
    ([2, 2, 2, 2], 8, None, ["a", "b", "c", "d"],
     [f"{h} slot {i}" for h in "abcd" for i in (0, 1)], []),
    # an explicit count goes round the worker hosts: server k on host k mod H
    ([1, 1], 2, 3, ["a", "b", "a"], ["a slot 0", "b slot 0"], []),
    ([3, 1, 1, 1], 4, 1, ["a"], ["a slot 0", "a slot 1", "a slot 2", "b slot 0"],
     ["c slot 0", "d slot 0"]),
])
def test_per_host_places_one_server_beside_the_workers_of_each_host(
        slots, workers, servers, expect_servers, expect_workers, spares):
    hosts = [Host(name, n) for name, n in zip("abcd", slots)]
    p = place(hosts, servers=servers, workers=workers, source="job", placement="per_host")
    assert [str(s) for s in p.servers] == [f"{h} beside its workers" for h in expect_servers]
    assert [s.host.name for s in p.servers] == expect_servers
    assert [str(s) for s in p.workers] == expect_workers
    assert [str(s) for s in p.spares] == spares


def test_per_host_gpus_and_errors():
    hosts = [Host("a", 2, (4, 6)), Host("b", 1)]
    p = place(hosts, servers=None, workers=3, source="job", placement="per_host")
    assert [(str(s), s.gpu) for s in p.workers] == [("a slot 0", 4), ("a slot 1", 6),
                                                     ("b slot 0", None)]
    assert all(s.gpu is None for s in p.servers)
    with pytest.raises(JobError) as e:
        place(hosts, servers=None, workers=4, source="job", placement="per_host")
    assert str(e.value) == ("job: cluster.hostfile: 3 slots for 4 workers (servers share the "
                            "workers' hosts); add hosts or slots")
    with pytest.raises(JobError) as e:
        place(hosts, servers=1, workers=1, source="job", placement="beside")
    assert str(e.value) == ("job: cluster.server_placement: must be one of per_host, "
                            "first_slots, got 'beside'")


def test_per_host_is_the_hostfile_default_and_the_dry_run_shows_it(tmp_path):
    hosts = hostfile(tmp_path, "10.0.0.1 slots=2\n10.0.0.2 slots=2\n")
    job = base_job(tmp_path)
    del job["cluster"]["servers"]
    job["cluster"].update(hosts="hostfile", hostfile=str(hosts), workers=4)
    loaded = Job.from_yaml(write_job(tmp_path, job))
    assert loaded.config.cluster.server_placement == "per_host"
    assert loaded.config.cluster.servers is None        # one a worker host, once placed
    plan = loaded.plan()
    assert plan.job.cluster.servers == 2
    for k, address in ((0, "10.0.0.1"), (1, "10.0.0.2")):
        cmd = plan.server_command(k, None)
        assert cmd[cmd.index("--bind") + 1] == f"tcp://{address}:0"
        assert cmd[cmd.index("--num-servers") + 1] == "2"
    dry = Job.from_yaml(write_job(tmp_path, job)).dry_run()
    assert "# on 10.0.0.1 beside its workers\n" in dry
    assert "# on 10.0.0.2 beside its workers\n" in dry
    assert "# on 10.0.0.1 slot 1\n" in dry and "# on 10.0.0.2 slot 1\n" in dry
    assert "  servers: 2\n" in dry and "  server_placement: per_host\n" in dry


def test_io_threads_auto_is_one_a_connection_over_hosts(tmp_path):
    """transport.io_threads: auto (the default) gives a job over hosts one ZeroMQ I/O thread
    a connection (CURVE's encryption and the kernel copies beside each other, docs/scaling.md
    E14): a worker one a shard, a shard one a pusher, at most 8; on one host 1; a number is
    taken as is."""
    hosts = hostfile(tmp_path, "10.0.0.1 slots=4\n10.0.0.2 slots=4\n10.0.0.3 slots=4\n")
    job = base_job(tmp_path)
    del job["cluster"]["servers"]
    job["cluster"].update(hosts="hostfile", hostfile=str(hosts), workers=12)
    plan = Job.from_yaml(write_job(tmp_path, job)).plan()

    def flag(cmd):
        return int(cmd[cmd.index("--io-threads") + 1]) if "--io-threads" in cmd else 1
    assert plan.job.cluster.servers == 3          # one a worker host
    assert flag(plan.worker_command(0, ["tcp://10.0.0.1:5000"] * 3)) == 3
    assert flag(plan.server_command(0, None)) == 8    # 12 workers, 8 at most
    # bsp, one push per host (auto): a shard serves the 3 hosts' leaders only
    job["consistency"] = {"mode": "bsp"}
    plan = Job.from_yaml(write_job(tmp_path, job, "bsp.yaml")).plan()
    assert plan.host_groups() == [0] * 4 + [1] * 4 + [2] * 4
    assert flag(plan.server_command(0, None)) == 3
    assert flag(plan.worker_command(0, ["tcp://10.0.0.1:5000"] * 3)) == 3
    job["transport"] = dict(job.get("transport") or {}, io_threads=2)
    plan = Job.from_yaml(write_job(tmp_path, job, "two.yaml")).plan()
    assert flag(plan.worker_command(0, ["tcp://10.0.0.1:5000"] * 3)) == 2
    assert flag(plan.server_command(0, None)) == 2
    # every slot on one host: the cores compute, 1 thread
    one = base_job(tmp_path)
    del one["cluster"]["servers"]
    one["cluster"].update(hosts="hostfile", workers=4,
                          hostfile=str(hostfile(tmp_path, "10.0.0.1 slots=4\n")))
    plan = Job.from_yaml(write_job(tmp_path, one, "one.yaml")).plan()
    assert flag(plan.worker_command(0, ["tcp://10.0.0.1:5000"])) == 1
    assert flag(plan.server_command(0, None)) == 1


def test_server_placement_key_errors(tmp_path):
    hosts = hostfile(tmp_path, "a slots=2\n")
    for cluster, message in [
            ({"server_placement": "per_host"},
             "cluster.server_placement: is used only with hosts: hostfile or slurm "
             "(hosts is 'local')"),
            ({"hosts": "hostfile", "hostfile": str(hosts), "server_placement": "spread"},
             "cluster.server_placement: must be one of per_host, first_slots, got 'spread'"),
            ({"hosts": "hostfile", "hostfile": str(hosts), "server_placement": False},
             "cluster.server_placement: must be one of per_host, first_slots, got False"),
            ({"hosts": "hostfile", "hostfile": str(hosts), "servers": 0},
             "cluster.servers: must be an integer >= 1, got 0")]:
        j = base_job(tmp_path)
        j["cluster"].update(cluster)
        path = write_job(tmp_path, j)
        with pytest.raises(JobError) as e:
            Job.from_yaml(path)
        assert str(e.value) == f"{path}: {message}"
    # local jobs keep one server by default; a null placement is the default
    assert Job.from_yaml(write_job(tmp_path, base_job(tmp_path))).config.cluster.servers == 1
    j = base_job(tmp_path)
    j["cluster"].update(hosts="hostfile", hostfile=str(hosts), server_placement=None)
    assert Job.from_yaml(write_job(tmp_path, j)).config.cluster.server_placement == "per_host"


def test_slurm_per_host_servers_take_no_task(tmp_path, monkeypatch):
    from pstrain.slurm import SlurmLauncher, allocation_nodes, check_allocation
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    monkeypatch.delenv("SLURM_NNODES", raising=False)
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "3")
    monkeypatch.setenv("SLURM_NTASKS", "6")
    assert allocation_nodes() == 3
    job = base_job(tmp_path)
    del job["cluster"]["servers"]
    job["cluster"].update(hosts="slurm", workers=6)
    config = Job.from_yaml(write_job(tmp_path, job)).config
    SlurmLauncher.layout(config, "job")
    assert config.cluster.servers == 3
    with pytest.raises(JobError) as e:
        check_allocation(3, 7, "job", servers_take_tasks=False)
    assert str(e.value) == ("job: cluster.hosts: slurm: the allocation has 6 tasks for 7 "
                            "workers (servers placed per_host share their nodes); ask for "
                            "--ntasks=7")
    with pytest.raises(JobError) as e:
        check_allocation(1, 6, "job")
    assert str(e.value) == ("job: cluster.hosts: slurm: the allocation has 6 tasks for 1 "
                            "servers and 6 workers; ask for --ntasks=7")
