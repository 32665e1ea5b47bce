"""cluster.hosts: hostfile (launch.py's interface): a run's processes on the
hosts of a hostfile: staging each host's copy of the run folder, one ssh
session per process, snapshots copied back, a lost worker moved to a spare
slot.

Placement (hosts.py) happens at plan time (HostLauncher.layout): with
cluster.server_placement per_host (the default) workers on the first slots and
one server beside them on each of their hosts; with first_slots servers on the
first slots, workers next; spares last. A worker whose session was lost
(exit 255) restarts on its slot if its host answers ssh again, else on a spare
slot of another host (relocate).

Snapshots: worker 0 announces each checkpoint (its "snapshot" event) once
every shard has written its part. The orchestrator then copies the files back
into the run folder here: the manifest from worker 0's host first (to learn
the files), each shard's .state from that shard's host, the .caffemodel and
deploy prototxt from worker 0's host, each written under a temporary name and
renamed, the manifest (its paths made local) last. A checkpoint in the run
folder is therefore complete whichever hosts wrote it, and resuming stages it
back onto the servers' hosts (stage()).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re

from . import exitcodes
from .config import JobConfig
from .errors import JobError
from .hosts import Host, Placement, Slot, place, read_hostfile
from .launch import CannotRelocate, Launcher, Placed
from .launcher import EventSink, ProcessHandle
from .layout import Layout
from .plan import Plan
from .remote import Remote

_QUOTED_PATH = re.compile(r'^(\s*(shard_files|caffemodel|deploy_prototxt):\s*)"([^"]*)"', re.M)


class HostLayout(Layout):
    """Every process on its slot of the placement. The placement is live: a
    server moved at staging or a relocated worker changes what it answers."""

    def __init__(self, placement: Placement):
        super().__init__([slot.gpu for slot in placement.workers])
        self.placement = placement

    def server_address(self, shard: int) -> str | None:
        return self.placement.servers[shard].host.address

    def worker_address(self, rank: int) -> str | None:
        return self.placement.workers[rank].host.address

    def where(self, role: str, rank: int) -> str | None:
        slots = self.placement.servers if role == "server" else self.placement.workers
        return str(slots[rank])

    def worker_hosts(self) -> list[str] | None:
        return [slot.host.name for slot in self.placement.workers]

    def server_hosts(self) -> list[str] | None:
        return [slot.host.name for slot in self.placement.servers]


class HostLauncher(Launcher):
    name = "hostfile"
    remote = True

    def __init__(self, plan: Plan, sink: EventSink):
        super().__init__(plan, sink)
        assert isinstance(plan.layout, HostLayout)
        self.placement = plan.layout.placement
        self.ssh = Remote(plan.job.remote, plan.run_dir, plan.job.name)

    @classmethod
    def layout(cls, job: JobConfig, source: str) -> HostLayout:
        """The hostfile read and every process placed (hosts.py); the job's transport
        and devices checked for it."""
        c = job.cluster
        assert c.hostfile is not None
        if job.transport.kind != "tcp":
            raise JobError(f"{source}: transport.kind: hosts: hostfile needs tcp (ipc sockets do "
                           f"not cross hosts)")
        if c.worker_devices not in ("cpu", "auto"):
            raise JobError(f"{source}: cluster.worker_devices: with hosts: hostfile, list each "
                           f"host's GPUs in the hostfile (gpus=0,1) and set cpu or auto here")
        if c.server_device != "cpu":
            raise JobError(f"{source}: cluster.server_device: with hosts: hostfile servers run on "
                           f"the CPU (got {c.server_device})")
        placement = place(read_hostfile(c.hostfile, source), c.servers, c.workers, source,
                          placement=c.server_placement or "per_host")
        c.servers = len(placement.servers)      # per_host without a count: one a worker host
        if c.worker_devices == "cpu":
            placement.workers = [dataclasses.replace(s, gpu=None) for s in placement.workers]
        return HostLayout(placement)

    # -- the interface ---------------------------------------------------------------

    def start_servers(self) -> list[ProcessHandle]:
        try:
            self.stage()
        except JobError as e:
            raise RuntimeError(str(e)) from e
        return self.start_each_server(lambda k, argv: self._start("server", k, argv))

    def start_worker(self, rank: int, endpoints: list[str]) -> ProcessHandle:
        return self.track(self._start("worker", rank, self.plan.worker_command(rank, endpoints)))

    def relocate(self, rank: int, lost: ProcessHandle, returncode: int) -> Placed | None:
        """A lost session (255) moves the worker to a spare slot unless its host
        answers ssh again; any other retryable failure restarts it on its slot."""
        before = self.placement.workers[rank]
        groups = self.plan.host_groups()
        if (returncode == exitcodes.LOST and groups is not None
                and groups.count(groups[rank]) > 1 and not self.ssh.reachable(before.host)):
            raise CannotRelocate(f"{before.host.name} does not answer ssh, and worker {rank} "
                                 f"sums its gradients with the other workers there "
                                 f"(transport.host_aggregation), so it cannot move to another "
                                 f"host")
        slot = self.relocate_worker(rank) if returncode == exitcodes.LOST else before
        if slot is None:
            raise CannotRelocate(f"{before.host.name} does not answer ssh and no spare slot is "
                                 f"left in the hostfile")
        return Placed(slot.host.address, str(slot))

    def collect_checkpoint(self, handle: ProcessHandle, event: dict) -> None:
        if handle.host and event.get("path"):
            event["path"] = self.collect_snapshot(str(event["path"]))

    # -- staging ---------------------------------------------------------------

    def stage(self) -> None:
        """Writes the solver and net copies (and a resumed checkpoint) on every host.
        When resuming, a server whose host does not answer ssh moves to a spare slot."""
        if self.plan.resume_manifest is not None:
            self._relocate_servers()
        for host in self.placement.hosts():
            self._stage_host(host)

    def _relocate_servers(self) -> None:
        servers = self.placement.servers
        for k, slot in enumerate(servers):
            if self.ssh.reachable(slot.host):
                continue
            for i, spare in enumerate(self.placement.spares):
                if spare.host.name != slot.host.name and self.ssh.reachable(spare.host):
                    servers[k] = self.placement.spares.pop(i)
                    break
            else:
                raise JobError(f"server {k}'s host {slot.host.name} does not answer ssh and no "
                               f"spare slot of another host does")

    def _stage_host(self, host: Host) -> None:
        run = self.plan.run_dir
        files: dict[str, bytes] = {}
        for copy in [self.plan.solver_copy] + [run / n for n in self.plan.nets]:
            files[str(copy.relative_to(run))] = self.ssh.to_host(copy.read_text(), host).encode()
        if self.plan.initial_model is not None:       # a driver's starting weights
            files["initial.caffemodel"] = (run / "initial.caffemodel").read_bytes()
        for pair in self.plan.memory_data.values():  # arrays shipped to each host (data.memory_data)
            for _, copy in pair:
                files[str(copy.relative_to(run))] = copy.read_bytes()
        manifest = self.plan.resume_manifest
        if manifest is not None:
            text = manifest.read_text()
            for _, field, path in _QUOTED_PATH.findall(text):
                local = pathlib.Path(path)
                if field == "shard_files" and local.is_relative_to(run) and local.exists():
                    files[str(local.relative_to(run))] = local.read_bytes()
            if manifest.is_relative_to(run):
                files[str(manifest.relative_to(run))] = self.ssh.to_host(text, host).encode()
        private = self._stage_keys(host, files)
        self.ssh.stage(host, files, private=private)

    def _stage_keys(self, host: Host, files: dict[str, bytes]) -> set[str]:
        """With CURVE: every public key, and the secret keys of the processes this
        host may run (its own slots; on a host with spare slots, every server's and
        worker's, as a lost one may move there). The orchestrator's secret key never
        leaves this machine. Returns the paths to write owner-only."""
        keys = self.plan.keys_dir
        if keys is None:
            return set()
        run = self.plan.run_dir
        p = self.placement
        names = {f"server-{k}" for k, slot in enumerate(p.servers) if slot.host.name == host.name}
        names |= {f"worker-{r}" for r, slot in enumerate(p.workers) if slot.host.name == host.name}
        groups = self.plan.host_groups()
        if groups is not None:      # a group's leader talks to the servers as worker-<group>
            names |= {f"worker-{groups[r]}" for r, slot in enumerate(p.workers)
                      if slot.host.name == host.name}
        if any(slot.host.name == host.name for slot in p.spares):
            names |= {f"server-{k}" for k in range(len(p.servers))}
            names |= {f"worker-{r}" for r in range(len(p.workers))}
        private = set()
        for pub in sorted(keys.glob("*.pub")):
            files[str(pub.relative_to(run))] = pub.read_bytes()
        for name in sorted(names):
            secret = keys / f"{name}.key"
            rel = str(secret.relative_to(run))
            files[rel] = secret.read_bytes()
            private.add(rel)
        return private

    # -- processes ---------------------------------------------------------------

    def _start(self, role: str, rank: int, argv: list[str]) -> ProcessHandle:
        """One ssh session running `argv` on the process's slot (its GPU alone visible)."""
        slot = (self.placement.servers if role == "server" else self.placement.workers)[rank]
        env = {"CUDA_VISIBLE_DEVICES": str(slot.gpu)} if slot.gpu is not None else None
        return ProcessHandle(self.ssh.command(slot.host, argv, env), role=role, rank=rank,
                             log_path=self.log_path(role, rank), sink=self.sink,
                             keep_stdin=True, host=slot.host.address)

    def relocate_worker(self, rank: int) -> Slot | None:
        """After worker `rank`'s session was lost: its slot if its host answers
        ssh again, else a spare slot on another host (staged first); None: neither."""
        slot = self.placement.workers[rank]
        if self.ssh.reachable(slot.host):
            return slot
        spare = self.placement.take_spare(rank, avoid=slot.host)
        if spare is None:
            return None
        self._stage_host(spare.host)
        return spare

    # -- snapshots ---------------------------------------------------------------

    def collect_snapshot(self, caffemodel: str) -> str:
        """Copies the checkpoint worker 0 announced (its .caffemodel path on its
        host) into the run folder; returns the local .caffemodel path."""
        w0 = self.placement.workers[0].host
        base = caffemodel
        for suffix in (".caffemodel", ".caffemodel.h5"):   # snapshot_format BINARYPROTO, HDF5
            if caffemodel.endswith(suffix):
                base = caffemodel[:-len(suffix)]
        manifest_remote = base + ".manifest"
        text = self.ssh.fetch(w0, manifest_remote).decode()
        shard = 0
        local_text = text
        for prefix, field, path in _QUOTED_PATH.findall(text):
            host = w0
            if field == "shard_files":
                if shard >= len(self.placement.servers):
                    raise JobError(f"{manifest_remote} on {w0.name}: more shard files than "
                                   f"servers")
                host = self.placement.servers[shard].host
                shard += 1
            local = self.ssh.to_local(path, host)
            self._write(pathlib.Path(local), self.ssh.fetch(host, path))
            local_text = local_text.replace(f'"{path}"', f'"{local}"', 1)
        self._write(pathlib.Path(self.ssh.to_local(manifest_remote, w0)), local_text.encode())
        return self.ssh.to_local(caffemodel, w0)

    def _write(self, path: pathlib.Path, data: bytes) -> None:
        if not path.is_relative_to(self.plan.run_dir):
            raise JobError(f"a snapshot file {path} lies outside the run folder "
                           f"{self.plan.run_dir}; not copied")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".fetching")
        tmp.write_bytes(data)
        os.replace(tmp, path)
