"""Where a job's processes run, as far as their command lines need it.

A launcher (launch.py) makes a Layout when the job is planned; the plan
(plan.py) asks it, never which launcher it has, for each process's address
and GPU. This base is every process on this machine (cluster.hosts: local);
hostrun.py and slurm.py subclass it.
"""
from __future__ import annotations


class Layout:
    """Every process on this machine. worker_gpus[rank]: the CUDA device worker
    `rank` sees as device 0 (CUDA_VISIBLE_DEVICES), or None for the CPU."""

    def __init__(self, worker_gpus: list[int | None]):
        self.worker_gpus = list(worker_gpus)

    def server_address(self, shard: int) -> str | None:
        """The address peers reach server `shard` at: it binds it when the job binds
        the default 127.0.0.1, and advertises it (--advertise). None: this machine
        (the job's transport.interface, nothing advertised)."""
        return None

    def worker_address(self, rank: int) -> str | None:
        """The address worker `rank` advertises (--advertise); None: nothing."""
        return None

    def where(self, role: str, rank: int) -> str | None:
        """Where the process runs, for the dry run ('h1 slot 0'); None: here."""
        return None

    def worker_hosts(self) -> list[str] | None:
        """Per worker rank, the host it runs on (workers with the same name share a
        host: transport.host_aggregation groups them); None: not known before the
        processes start. Here: every worker on this machine."""
        return ["localhost"] * len(self.worker_gpus)

    def server_hosts(self) -> list[str] | None:
        """Per shard, the host it runs on, named as worker_hosts() names them; None: not
        known before the processes start, or (here) every process on this machine, where
        any worker reaches any shard without a NIC."""
        return None

    def worker_hosts_unknown(self) -> str:
        """Why worker_hosts() is None (for the error of host_aggregation: true)."""
        return "the hosts of its workers are known only once they start"
