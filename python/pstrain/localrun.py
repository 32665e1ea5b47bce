"""cluster.hosts: local: every process on this machine (launch.py's interface).

Each program is a child process in its own session (launcher.ProcessHandle).
GPUs: cluster.worker_devices lists them (or `auto` takes every GPU of a CUDA
build round robin); each GPU worker sees its GPU alone, as device 0
(CUDA_VISIBLE_DEVICES, plan.worker_env). A restarted worker runs here again.
"""
from __future__ import annotations

import pathlib

from . import programs
from .config import JobConfig
from .errors import JobError
from .launch import Launcher
from .launcher import ProcessHandle
from .layout import Layout


class LocalLauncher(Launcher):
    name = "local"

    @classmethod
    def layout(cls, job: JobConfig, source: str) -> Layout:
        """Checks server_device and worker_devices against this build and machine."""
        return Layout(_worker_gpus(job, source))

    def start_servers(self) -> list[ProcessHandle]:
        return self.start_each_server(
            lambda k, argv: ProcessHandle(argv, role="server", rank=k,
                                          log_path=self.log_path("server", k), sink=self.sink))

    def start_worker(self, rank: int, endpoints: list[str]) -> ProcessHandle:
        return self.track(ProcessHandle(self.plan.worker_command(rank, endpoints), role="worker",
                                        rank=rank, log_path=self.log_path("worker", rank),
                                        sink=self.sink, env=self.plan.worker_env(rank)))

    def release(self) -> None:
        """Removes the host groups' shared memory (transport.host_aggregation), which
        a leader that did not end cleanly (killed, or stopped with the job) leaves."""
        groups = self.plan.host_groups()
        for g in sorted(set(groups or [])):
            segment = pathlib.Path("/dev/shm") / f"{self.plan.host_group_shm()[1:]}-g{g}"
            segment.unlink(missing_ok=True)


def _worker_gpus(job: JobConfig, source: str) -> list[int | None]:
    """Checks the devices; returns each worker's GPU id (None: the CPU)."""
    c = job.cluster
    gpus = None
    if c.server_device.startswith("gpu:"):
        gpus = programs.gpu_count()
        n = int(c.server_device[4:])
        if not programs.cuda_build():
            raise JobError(f"{source}: cluster.server_device: server_device gpu:{n} needs a CUDA "
                           f"build (nvcc was not found when PSTRAIN was built)")
        if n >= gpus:
            raise JobError(f"{source}: cluster.server_device: GPU {n} does not exist (this "
                           f"machine has {gpus} GPUs per nvidia-smi -L)")
    if isinstance(c.worker_devices, list):
        gpus = programs.gpu_count() if gpus is None else gpus
        if len(c.worker_devices) != c.workers:
            raise JobError(f"{source}: cluster.worker_devices: lists {len(c.worker_devices)} GPUs "
                           f"for {c.workers} workers (one entry per worker; entries may repeat "
                           f"to share a GPU)")
        if not programs.cuda_build():
            raise JobError(f"{source}: cluster.worker_devices: GPU workers need a CUDA build "
                           f"(nvcc was not found when PSTRAIN was built)")
        absent = [g for g in c.worker_devices if g >= gpus]
        if absent:
            raise JobError(f"{source}: cluster.worker_devices: GPU {absent[0]} does not exist "
                           f"(this machine has {gpus} GPUs per nvidia-smi -L)")
        return list(c.worker_devices)
    # worker_devices: auto uses GPUs when the build has CUDA and the machine GPUs; else the CPU.
    if c.worker_devices == "auto":
        gpus = programs.gpu_count() if gpus is None else gpus
        if gpus > 0 and programs.cuda_build():
            return [rank % gpus for rank in range(c.workers)]
    return [None] * c.workers
