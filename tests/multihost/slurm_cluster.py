"""A one-node Slurm cluster made by the test: munged, slurmctld and slurmd
(Debian's munge and slurm-wlm) in a network namespace of their own, every
file (slurm.conf, munge key, state, spool, logs) in the test's folder.

The namespace has loopback and one veth with 10.78.0.1/24 (getaddrinfo needs
a non-loopback address); the daemons run through `nsenter --net`, which keeps
the machine's mounts (slurmd needs /sys/fs/cgroup). The node is this
machine's host name, as slurmctld requires. close() cancels the jobs, kills
every process in the namespace and deletes it."""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

ADDRESS = "10.78.0.1"


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespace, munged, slurmd)"
    for tool in ("ip", "nsenter", "munged", "slurmctld", "slurmd", "sbatch", "squeue", "srun"):
        if shutil.which(tool) is None and not pathlib.Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} not found (Debian packages slurmctld slurmd slurm-client munge)"
    return None


class SlurmCluster:
    def __init__(self, folder: pathlib.Path, cpus: int = 8):
        self.folder = folder
        self.ns = f"pstslurm{os.getpid() % 100000}"
        self.node = socket.gethostname()
        self.made_ns = False
        try:
            self._start(cpus)
        except BaseException:
            self.close()
            raise

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.folder / "slurm.conf"))

    def run(self, *cmd: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        """cmd in the cluster's namespace, with its SLURM_CONF."""
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.ns}", *cmd], env=self.env,
                              capture_output=True, text=True, timeout=timeout, **kw)

    def _start(self, cpus: int) -> None:
        f = self.folder
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        self.made_ns = True
        for args in (["link", "set", "lo", "up"],
                     ["link", "add", "name", "pstsa", "type", "veth", "peer", "name", "pstsb"],
                     ["addr", "add", f"{ADDRESS}/24", "dev", "pstsa"],
                     ["link", "set", "pstsa", "up"], ["link", "set", "pstsb", "up"]):
            subprocess.run(["ip", "-n", self.ns, *args], check=True)
        for d in ("state", "spool"):
            (f / d).mkdir()
        (f / "munge.key").write_bytes(os.urandom(1024))
        os.chmod(f / "munge.key", 0o600)
        (f / "slurm.conf").write_text(f"""ClusterName=pstest
SlurmctldHost={self.node}({ADDRESS})
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket={f / 'munge.sock'}
CredType=cred/munge
StateSaveLocation={f / 'state'}
SlurmdSpoolDir={f / 'spool'}
SlurmctldPidFile={f / 'slurmctld.pid'}
SlurmdPidFile={f / 'slurmd.pid'}
SlurmctldLogFile={f / 'slurmctld.log'}
SlurmdLogFile={f / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
SlurmUser=root
SlurmdUser=root
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={self.node} NodeAddr={ADDRESS} CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=pstest Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        started = self.run("munged", "--force", f"--socket={f / 'munge.sock'}",
                           f"--key-file={f / 'munge.key'}", f"--pid-file={f / 'munged.pid'}",
                           f"--log-file={f / 'munged.log'}", f"--seed-file={f / 'munge.seed'}")
        if started.returncode != 0:
            raise RuntimeError(f"munged: {started.stderr.strip()}")
        for daemon in ("slurmctld", "slurmd"):
            started = self.run(daemon, *(["-c", "-i"] if daemon == "slurmctld" else ["-c"]))
            if started.returncode != 0:
                raise RuntimeError(f"{daemon}: {started.stderr.strip()}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = self.run("sinfo", "--noheader", "--format=%t", timeout=20).stdout.split()
            if out and out[0] in ("idle", "mix", "alloc"):
                return
            time.sleep(0.5)
        logs = [(f / n).read_text()[-600:] for n in ("slurmd.log", "slurmctld.log")
                if (f / n).exists()]
        raise RuntimeError(f"slurmd did not come up: {' '.join(logs)}")

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def close(self) -> None:
        if not self.made_ns:
            return
        try:
            self.run("scancel", "--full", "--user=root", timeout=20)
        except (subprocess.TimeoutExpired, OSError):
            pass
        for _ in range(2):
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while self.pids() and time.monotonic() < deadline:
                time.sleep(0.1)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        self.made_ns = False
