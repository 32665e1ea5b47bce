"""A run's processes on the hosts of a hostfile: staging each host's copy of
the run folder, one ssh session per process, snapshots copied back, a lost
worker moved to a spare slot.

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

import os
import pathlib
import re

from .errors import JobError
from .hosts import Host, Slot
from .launcher import EventSink, ProcessHandle
from .plan import Plan
from .remote import Remote

_QUOTED_PATH = re.compile(r'^(\s*(shard_files|caffemodel|deploy_prototxt):\s*)"([^"]*)"', re.M)


class HostLauncher:
    """REQUIRES: plan.placement is set (hosts: hostfile)."""

    def __init__(self, plan: Plan):
        assert plan.placement is not None
        self.plan = plan
        self.placement = plan.placement
        self.remote = Remote(plan.job.remote, plan.run_dir, plan.job.name)

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
            if self.remote.reachable(slot.host):
                continue
            for i, spare in enumerate(self.placement.spares):
                if spare.host.name != slot.host.name and self.remote.reachable(spare.host):
                    servers[k] = self.placement.spares.pop(i)
                    break
            else:
                raise JobError(f"server {k}'s host {slot.host.name} does not answer ssh and no "
                               f"spare slot of another host does")

    def _stage_host(self, host: Host) -> None:
        run = self.plan.run_dir
        files: dict[str, bytes] = {}
        for copy in [self.plan.solver_copy] + [run / n for n in self.plan.nets]:
            files[str(copy.relative_to(run))] = self.remote.to_host(copy.read_text(),
                                                                   host).encode()
        manifest = self.plan.resume_manifest
        if manifest is not None:
            text = manifest.read_text()
            for _, field, path in _QUOTED_PATH.findall(text):
                local = pathlib.Path(path)
                if field == "shard_files" and local.is_relative_to(run) and local.exists():
                    files[str(local.relative_to(run))] = local.read_bytes()
            if manifest.is_relative_to(run):
                files[str(manifest.relative_to(run))] = self.remote.to_host(text, host).encode()
        private = self._stage_keys(host, files)
        self.remote.stage(host, files, private=private)

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

    def start(self, role: str, rank: int, argv: list[str], log_path: pathlib.Path,
              sink: EventSink) -> ProcessHandle:
        slot = (self.placement.servers if role == "server" else self.placement.workers)[rank]
        env = {"CUDA_VISIBLE_DEVICES": str(slot.gpu)} if slot.gpu is not None else None
        return ProcessHandle(self.remote.command(slot.host, argv, env), role=role, rank=rank,
                             log_path=log_path, sink=sink, keep_stdin=True,
                             host=slot.host.address)

    def worker_slot(self, rank: int) -> Slot:
        return self.placement.workers[rank]

    def relocate_worker(self, rank: int) -> Slot | None:
        """After worker `rank`'s session was lost: its slot if its host answers
        ssh again, else a spare slot on another host (staged first); None: neither."""
        slot = self.placement.workers[rank]
        if self.remote.reachable(slot.host):
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
        base = caffemodel[:-len(".caffemodel")] if caffemodel.endswith(".caffemodel") \
            else caffemodel
        manifest_remote = base + ".manifest"
        text = self.remote.fetch(w0, manifest_remote).decode()
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
            local = self.remote.to_local(path, host)
            self._write(pathlib.Path(local), self.remote.fetch(host, path))
            local_text = local_text.replace(f'"{path}"', f'"{local}"', 1)
        self._write(pathlib.Path(self.remote.to_local(manifest_remote, w0)), local_text.encode())
        return self.remote.to_local(caffemodel, w0)

    def _write(self, path: pathlib.Path, data: bytes) -> None:
        if not path.is_relative_to(self.plan.run_dir):
            raise JobError(f"a snapshot file {path} lies outside the run folder "
                           f"{self.plan.run_dir}; not copied")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".fetching")
        tmp.write_bytes(data)
        os.replace(tmp, path)
