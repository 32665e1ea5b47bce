"""A one-node Slurm cluster made by the test: munged, slurmctld and slurmd
(Debian's munge and slurm-wlm) in a network namespace of their own, every
file (slurm.conf, munge key, state, spool, logs) in the test's folder.

The namespace has loopback and one veth with 10.78.0.1/24 (getaddrinfo needs
a non-loopback address); the daemons run through `nsenter --net`, which keeps
the machine's mounts (slurmd needs /sys/fs/cgroup). The node is this
machine's host name, as slurmctld requires. close() cancels the jobs, kills
every process in the namespace and deletes it.

SlurmCluster(folder, nodes=N) with N >= 2 makes N nodes, pstnode0.., one
slurmd each (slurmd -N NAME), in the same namespace: node i listens at
10.78.0.(2+i) on a port of its own, with its own spool folder, pid file and
log (slurm.conf's %n). Each slurmd runs in a mount namespace of its own where
/etc/hosts also names the nodes (the tasks advertise their node's name, and
their peers must resolve it); the batch script runs on pstnode0, in its
namespace. Every node is this machine: its cores, its /dev/shm, its files."""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ADDRESS = "10.78.0.1"



@contextlib.contextmanager
def started(prefix: str, nodes: int = 1):
    """A SlurmCluster of `nodes` in a fresh folder named `prefix`..., for a test fixture:
    the test is skipped (pytest.skip) where Slurm is unavailable or does not start; the
    cluster's processes and folder are gone afterwards."""
    import pytest  # only the tests call this

    why = unavailable()
    if why:
        pytest.skip(f"the Slurm test needs {why}")
    folder = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    try:
        cluster = SlurmCluster(folder, nodes=nodes)
    except RuntimeError as e:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"Slurm does not start here: {e}")
    try:
        yield cluster
    finally:
        cluster.close()
        shutil.rmtree(folder, ignore_errors=True)


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespace, munged, slurmd)"
    for tool in ("ip", "nsenter", "munged", "slurmctld", "slurmd", "sbatch", "squeue", "srun"):
        if shutil.which(tool) is None and not pathlib.Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} not found (Debian packages slurmctld slurmd slurm-client munge)"
    return None


class SlurmCluster:
    def __init__(self, folder: pathlib.Path, cpus: int = 8, nodes: int = 1):
        self.folder = folder
        self.ns = f"pstslurm{os.getpid() % 100000}n{nodes}"
        self.node = socket.gethostname()
        self.nodes = [self.node] if nodes == 1 else [f"pstnode{i}" for i in range(nodes)]
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
                     *[["addr", "add", f"{self._address(i)}/24", "dev", "pstsa"]
                       for i in range(len(self.nodes)) if len(self.nodes) > 1],
                     ["link", "set", "pstsa", "up"], ["link", "set", "pstsb", "up"]):
            subprocess.run(["ip", "-n", self.ns, *args], check=True)
        for d in ("state", "spool"):
            (f / d).mkdir()
        many = len(self.nodes) > 1
        ncpus = os.cpu_count() or 1
        if many:
            # two CPUs a node whatever this machine has, so that the tests' allocations
            # (--nodes=2 --ntasks=3: SLURM_TASKS_PER_NODE 2,1) are the same everywhere
            nodes = "\n".join(f"NodeName={n} NodeAddr={self._address(i)} NodeHostname={self.node} "
                              f"Port={6818 + i} CPUs=2 State=UNKNOWN"
                              for i, n in enumerate(self.nodes))
            for n in self.nodes:
                (f / "spool" / n).mkdir()
            (f / "hosts").write_text(pathlib.Path("/etc/hosts").read_text() + "".join(
                f"{self._address(i)} {n}\n" for i, n in enumerate(self.nodes)))
        else:
            nodes = f"NodeName={self.node} NodeAddr={ADDRESS} CPUs={ncpus} State=UNKNOWN"
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
SlurmdSpoolDir={f / 'spool'}{'/%n' if many else ''}
SlurmctldPidFile={f / 'slurmctld.pid'}
SlurmdPidFile={f / ('slurmd-%n.pid' if many else 'slurmd.pid')}
SlurmctldLogFile={f / 'slurmctld.log'}
SlurmdLogFile={f / ('slurmd-%n.log' if many else 'slurmd.log')}
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
{nodes}
PartitionName=pstest Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        started = self.run("munged", "--force", f"--socket={f / 'munge.sock'}",
                           f"--key-file={f / 'munge.key'}", f"--pid-file={f / 'munged.pid'}",
                           f"--log-file={f / 'munged.log'}", f"--seed-file={f / 'munge.seed'}")
        if started.returncode != 0:
            raise RuntimeError(f"munged: {started.stderr.strip()}")
        started = self.run("slurmctld", "-c", "-i")
        if started.returncode != 0:
            raise RuntimeError(f"slurmctld: {started.stderr.strip()}")
        if many:
            for n in self.nodes:
                # unshare's mount namespace (private): /etc/hosts naming the nodes, for
                # this slurmd and every task it starts; the machine's /etc/hosts unchanged.
                started = subprocess.run(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                     f'mount --bind "$0" /etc/hosts && exec nsenter --net=/run/netns/{self.ns} '
                     f'slurmd -c -N {n}', str(f / "hosts")],
                    env=self.env, capture_output=True, text=True, timeout=60)
                if started.returncode != 0:
                    raise RuntimeError(f"slurmd -N {n}: {started.stderr.strip()}")
        else:
            started = self.run("slurmd", "-c")
            if started.returncode != 0:
                raise RuntimeError(f"slurmd: {started.stderr.strip()}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = self.run("sinfo", "--noheader", "--Node", "--format=%t",
                           timeout=20).stdout.split()
            if len(out) == len(self.nodes) and all(t in ("idle", "mix", "alloc") for t in out):
                return
            time.sleep(0.5)
        logs = [p.read_text()[-600:] for p in sorted(f.glob("slurm*.log"))]
        raise RuntimeError(f"slurmd did not come up: {' '.join(logs)}")

    @staticmethod
    def _address(i: int) -> str:
        """Node i's address with several nodes (ADDRESS is slurmctld's)."""
        return f"10.78.0.{2 + i}"

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
