"""The launcher interface: how a job's processes are started, watched for where
they run, moved after a loss, stopped, and how their checkpoints reach the run
folder, whatever runs them. The runner (runner.py) drives every run through
this interface and never asks which launcher it has; launchers.py registers
each implementation under its `cluster.hosts` name:

    localrun.py   local      processes on this machine
    hostrun.py    hostfile   one ssh session per process on a hostfile's hosts
    slurm.py      slurm      every process a task of one srun step

A new launcher (Kubernetes, MPI, ...) is one module with a Launcher subclass
that implements `layout`, `start_servers` and `start_worker` (and, where it
applies, `relocate`, `collect_checkpoint`, `release`), plus its line in
launchers.py; config.HOSTS, the job file's vocabulary, names it too
(test_launchers.py holds the two equal).

Retries are not the launcher's to decide: the runner restarts a worker, or the
whole job after a server, exactly when exitcodes.is_retryable(returncode,
remote=handle.remote) says so; a launcher only says where the next start runs
(`relocate`). Logs need no collecting: each handle's output (a pipe, an ssh
session, the step's labelled output) is written to the run folder's
logs/<role>-<rank>.log as it arrives (launcher.py).
"""
from __future__ import annotations

import abc
import dataclasses
import pathlib
import time
from typing import Callable, ClassVar

from . import runfolder
from .config import JobConfig
from .launcher import EventSink, ProcessHandle
from .layout import Layout
from .plan import Plan

SERVER_START_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0


class CannotRelocate(Exception):
    """A lost process has nowhere left to run; the message says why."""


@dataclasses.dataclass(frozen=True)
class Placed:
    """Where a relocated or restarted process runs: the address peers reach
    (recorded in its restart event) and a label for messages ('h2 slot 1')."""

    address: str
    label: str


class Launcher(abc.ABC):
    """One run (one attempt) of a plan's processes. Every handle the launcher
    starts is kept in `started`, in start order, so `stop` reaches them all
    (even a server that never reported its endpoint)."""

    name: ClassVar[str]            # the cluster.hosts value that selects it
    remote: ClassVar[bool] = False  # processes may run elsewhere: the summary names their hosts

    def __init__(self, plan: Plan, sink: EventSink):
        self.plan = plan
        self.sink = sink
        self.started: list[ProcessHandle] = []

    # -- plan time ---------------------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def layout(cls, job: JobConfig, source: str) -> Layout:
        """Checks the job's cluster section for this launcher (hosts, devices,
        transport) and says where each process runs. Raises JobError naming the
        key; starts nothing, writes nothing."""

    # -- run time ----------------------------------------------------------------

    @abc.abstractmethod
    def start_servers(self) -> list[ProcessHandle]:
        """Starts servers 0..S-1 (after whatever the launcher prepares first:
        copies of the run folder, a step) and returns their handles, in shard
        order, once every one listens (handle.endpoint). Raises RuntimeError when
        one does not start (the attempt fails; `stop` still ends what was started)."""

    @abc.abstractmethod
    def start_worker(self, rank: int, endpoints: list[str]) -> ProcessHandle:
        """Starts worker `rank` against the servers' endpoints: its first start, or
        a restart after a retryable failure (then where `relocate` put it)."""

    def relocate(self, rank: int, lost: ProcessHandle, returncode: int) -> Placed | None:
        """Called once worker `rank` (handle `lost`) failed retryably, before it is
        started again: picks where that start runs and says so (None: where it
        ran, nothing to report). Raises CannotRelocate when it can run nowhere."""
        return None

    def collect_checkpoint(self, handle: ProcessHandle, event: dict) -> None:
        """A checkpoint `handle` announced (its "snapshot" event): one written on
        another host is copied into the run folder and event["path"] made the
        local .caffemodel. Raises JobError when it cannot be copied."""

    def stop(self) -> None:
        """Ends everything still running: SIGTERM (servers write an interrupted
        checkpoint), a bounded wait, SIGKILL for what is left; then `release`."""
        running = [h for h in self.started if h.poll() is None]
        for h in running:
            h.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for h in running:
            if h.wait(max(0.1, deadline - time.monotonic())) is None:
                h.kill()
        self.release()

    def release(self) -> None:
        """What the launcher itself holds once its processes ended (srun steps)."""

    # -- for implementations ---------------------------------------------------

    def log_path(self, role: str, rank: int) -> pathlib.Path:
        return runfolder.log_path(self.plan.run_dir, role, rank)

    def track(self, handle: ProcessHandle) -> ProcessHandle:
        self.started.append(handle)
        return handle

    def start_each_server(self, start: Callable[[int, list[str]], ProcessHandle]
                          ) -> list[ProcessHandle]:
        """Servers one after another: server 0 first, the others told its endpoint
        (--coordinator); `start(shard, argv)` starts one. Returns their handles."""
        coordinator = None
        servers: list[ProcessHandle] = []
        for k in range(self.plan.job.cluster.servers):
            handle = self.track(start(k, self.plan.server_command(k, coordinator)))
            servers.append(handle)
            endpoint = handle.wait_listening(SERVER_START_TIMEOUT_S)
            coordinator = coordinator or endpoint
        return servers
