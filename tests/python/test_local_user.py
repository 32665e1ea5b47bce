"""Another local user against a job's files (docs/security.md, "A hostile local
user"): a folder or symlink planted where a run folder will be, an output folder
others can rename it out of, and a remote host's copy of the run folder written
under that host's umask. The C++ side (snapshots written in a shared folder,
keys folders, host group segments): tests/cpp/local_user_test.cpp."""
from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest

from ps_train_util import base_job, write_job
from pstrain import Job, runfolder, slurmnode
from pstrain.cli import main as ps_train
from pstrain.config import RemoteConfig
from pstrain.errors import JobError
from pstrain.hosts import Host
from pstrain.remote import Remote

NOBODY = 65534


def needs_root():
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")


def test_a_folder_another_user_planted_at_the_run_name_is_never_taken(tmp_path):
    needs_root()
    runs = tmp_path / "runs"
    planted = runs / "tiny"          # empty, so it looked free
    planted.mkdir(parents=True)
    os.chown(planted, NOBODY, NOBODY)
    planted.chmod(0o777)
    ours = tmp_path / "elsewhere"
    ours.mkdir()
    (runs / "tiny-2").symlink_to(ours)   # empty and ours, but a link: not taken either
    job = Job.from_yaml(write_job(tmp_path, base_job(tmp_path)))
    assert runfolder.free_name(runs, "tiny") == "tiny-3"
    assert job.dry_run().splitlines()[0] == \
        f"# run folder: {runs / 'tiny-3'} ({planted} exists; --overwrite would replace it)"
    # Planted after the name was chosen (a race): create refuses it, writes nothing.
    plan = job.plan()
    with pytest.raises(JobError) as e:
        runfolder.create(plan, resume=False)
    assert str(e.value) == (f"{plan.source}: output: {planted} belongs to uid {NOBODY}, not to "
                            f"this user (uid 0); a run folder must be this user's own; choose "
                            f"another name or output")
    assert list(planted.iterdir()) == []
    # --overwrite does not take it either, nor delete what a link points at.
    (ours / "job.resolved.yaml").write_text("name: other\n")
    link = Job.from_yaml(write_job(tmp_path, {**base_job(tmp_path), "name": "tiny-2"})).plan()
    with pytest.raises(JobError, match=r"output: .*/runs/tiny-2 is a symbolic link; a run "
                                       r"folder must be this user's own"):
        runfolder.create(link, resume=False, overwrite=True)
    assert (ours / "job.resolved.yaml").read_text() == "name: other\n"


@pytest.mark.parametrize("mode, owner, why", [
    (0o777, 0, "is writable by every user (mode 0777) and not sticky: another user could "
               "replace the run folder"),
    (0o755, NOBODY, f"belongs to uid {NOBODY}, another user, who could replace the run "
                    f"folder"),
])
def test_an_output_folder_others_can_rename_the_run_out_of_is_refused(tmp_path, capsys,
                                                                      fashion_mnist, mode,
                                                                      owner, why):
    needs_root()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    os.chown(shared, owner, owner)
    path = write_job(tmp_path, {**base_job(tmp_path), "output": str(shared)})
    assert ps_train([str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"output: {shared} {why}; choose an output folder of your own" in err, err
    assert list(shared.iterdir()) == []
    # /tmp's way (sticky: only a file's owner may rename it) is accepted.
    shared.chmod(0o1777)
    os.chown(shared, 0, 0)
    plan = Job.from_yaml(path).plan()
    runfolder.check_output(plan)


@pytest.fixture
def local_ssh(tmp_path) -> pathlib.Path:
    """An `ssh` that runs the command line here, as sshd runs it in a session
    with the host's default umask (022 here)."""
    fake = tmp_path / "fake-ssh"
    fake.write_text(f"#!{sys.executable}\nimport os, sys\nos.umask(0o022)\n"
                    f"os.execv('/bin/sh', ['sh', '-c', sys.argv[-1]])\n")
    fake.chmod(0o700)
    return fake


def test_a_remote_hosts_copy_of_the_run_is_owner_only(tmp_path, local_ssh):
    run = tmp_path / "here" / "j"
    workdir = tmp_path / "there" / "j"
    remote = Remote(RemoteConfig(ssh=str(local_ssh), workdir=str(workdir)), run, "j")
    host = Host("node-1")
    remote.stage(host, {"solver.prototxt": b"net: 'x'\n", "keys/worker-0.key": b"secret\n",
                        "keys/worker-0.pub": b"public\n"}, private={"keys/worker-0.key"})
    modes = {str(p.relative_to(workdir)): stat.S_IMODE(p.stat().st_mode)
             for p in workdir.rglob("*")}
    assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
    assert modes == {"snapshots": 0o700, "solver.prototxt": 0o600, "keys": 0o700,
                     "keys/worker-0.key": 0o600, "keys/worker-0.pub": 0o600}
    # A process there (a shard writing its checkpoint) creates files owner-only.
    cmd = remote.command(host, ["/bin/sh", "-c", "echo state > snapshots/shard0.state"])
    # stdin stays open while it runs: the wrapper stops the program when it closes.
    with subprocess.Popen(cmd, stdin=subprocess.PIPE) as done:
        assert done.wait(timeout=30) == 0
    assert stat.S_IMODE((workdir / "snapshots" / "shard0.state").stat().st_mode) == 0o600


def test_a_slurm_task_runs_its_program_owner_only(tmp_path):
    # srun passes the submitting shell's umask on (022 here): the task sets its own.
    plan = tmp_path / "plan.json"
    made = tmp_path / "shard0.state"
    plan.write_text(json.dumps({"tasks": [{"role": "server", "rank": 0, "argv": [
        "/bin/sh", "-c", f"echo state > {made}"]}]}))
    env = {**os.environ, "SLURM_PROCID": "0"}
    script = pathlib.Path(slurmnode.__file__)     # stdlib only: runs as a script
    with subprocess.Popen(["sh", "-c", 'umask 022; exec "$@"', "sh", sys.executable,
                           str(script), str(plan)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, env=env) as task:
        assert task.wait(timeout=30) == 0
        assert json.loads(task.stdout.read().splitlines()[-1]) == \
            {"event": "task_exit", "status": 0}
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
