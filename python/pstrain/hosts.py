"""Hosts of a multi-host job: a hostfile in Horovod's syntax, and where each
server and worker runs (the placement rule, docs/user-guide.md "Several hosts").

Hostfile: one host a line, `#` starts a comment, blank lines are skipped:

    # host            slots   optional
    10.0.0.1          slots=2
    alice@gpu-node-7  slots=4 gpus=0,1,2,3

`host` is what ssh is given (`user@` and names from ~/.ssh/config allowed); the
part after `user@` is also the address peers connect to, so it must resolve
the same way on every host. `slots` (default 1) is how many PSTrain processes
the host takes; `gpus` lists the CUDA devices its workers use.

Placement (cluster.server_placement): the slots are numbered in file order
(every slot of the first host, then the second host's, ...).

  per_host (the default): workers 0..W-1 take the first W slots; server k runs
      beside them on the k-th host that has workers (k mod H for H such hosts)
      and takes no slot, as BytePS colocates one server with each worker machine:
      the servers' bandwidth grows with the hosts. cluster.servers defaults to H.
  first_slots: servers 0..S-1 take the first S slots, workers 0..W-1 the next W.

Either way the slots left over are spares, where a worker goes when its own
host no longer answers. A worker's GPU is its host's gpus[i mod len(gpus)], i
counting the workers on that host in rank order.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re

from .errors import JobError

PLACEMENTS = ("per_host", "first_slots")
BESIDE = -1     # Slot.index of a server placed per_host: it shares its host, no slot of its own

_HOST = re.compile(r"^(?:[A-Za-z0-9_.+-]+@)?(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])$")


@dataclasses.dataclass(frozen=True)
class Host:
    name: str                       # as ssh is given it ([user@]host)
    slots: int = 1
    gpus: tuple[int, ...] = ()
    line: int = 0                   # in the hostfile (messages)

    @property
    def address(self) -> str:
        """What peers connect to: the name without `user@` (and without [ ] for IPv6)."""
        return self.name.rpartition("@")[2].strip("[]")


@dataclasses.dataclass(frozen=True)
class Slot:
    host: Host
    index: int                      # the slot's number on its host; BESIDE: none taken
    gpu: int | None = None          # workers only

    def __str__(self) -> str:
        if self.index == BESIDE:
            return f"{self.host.name} beside its workers"
        return f"{self.host.name} slot {self.index}"


@dataclasses.dataclass
class Placement:
    servers: list[Slot]
    workers: list[Slot]
    spares: list[Slot]

    def hosts(self) -> list[Host]:
        """Every host with a server or worker, in hostfile order, once each."""
        seen: dict[str, Host] = {}
        for slot in self.servers + self.workers:
            seen.setdefault(slot.host.name, slot.host)
        return list(seen.values())

    def take_spare(self, rank: int, avoid: Host) -> Slot | None:
        """Moves worker `rank` to the first spare slot not on `avoid`; None if there is none."""
        for i, slot in enumerate(self.spares):
            if slot.host.name != avoid.name:
                del self.spares[i]
                old = self.workers[rank]
                gpu = (slot.host.gpus[0] if slot.host.gpus else None) if old.gpu is not None \
                    else None
                self.workers[rank] = dataclasses.replace(slot, gpu=gpu)
                return self.workers[rank]
        return None


def read_hostfile(path: pathlib.Path, source: str) -> list[Host]:
    """The hosts of a hostfile; raises JobError naming the file and line."""
    try:
        text = path.read_text()
    except OSError as e:
        raise JobError(f"{source}: cluster.hostfile: cannot read {path}: {e.strerror}") from e
    hosts: list[Host] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{path}:{number}"
        name = words[0]
        if not _HOST.match(name):
            raise JobError(f"{where}: '{name}' is not a host name or address")
        if name in seen:
            raise JobError(f"{where}: host '{name}' is listed twice (first on line "
                           f"{seen[name]}); give it one line with all its slots")
        seen[name] = number
        fields: dict[str, str] = {}
        for word in words[1:]:
            key, sep, value = word.partition("=")
            if not sep or key not in ("slots", "gpus") or not value:
                raise JobError(f"{where}: '{word}': expected slots=N or gpus=I,J,...")
            if key in fields:
                raise JobError(f"{where}: {key} is given twice")
            fields[key] = value
        slots_text = fields.get("slots", "1")
        if not slots_text.isdigit() or int(slots_text) < 1:
            raise JobError(f"{where}: slots={slots_text}: must be an integer >= 1")
        gpus: tuple[int, ...] = ()
        if "gpus" in fields:
            parts = fields["gpus"].split(",")
            if not all(p.isdigit() for p in parts):
                raise JobError(f"{where}: gpus={fields['gpus']}: must be GPU ids like 0,1,2")
            gpus = tuple(int(p) for p in parts)
        hosts.append(Host(name=name, slots=int(slots_text), gpus=gpus, line=number))
    if not hosts:
        raise JobError(f"{source}: cluster.hostfile: {path} lists no host")
    return hosts


def worker_hosts(hosts: list[Host], workers: int) -> list[Host]:
    """The hosts that run workers when workers fill the slots from the first:
    the placement per_host puts one server on each of them."""
    seen: list[Host] = []
    left = workers
    for h in hosts:
        if left <= 0:
            break
        seen.append(h)
        left -= h.slots
    return seen


def place(hosts: list[Host], servers: int | None, workers: int, source: str, *,
          placement: str) -> Placement:
    """Every process on its slot (the module's comment); raises JobError naming
    the hostfile when the slots are too few. `servers` None with per_host: one a
    worker host."""
    if placement not in PLACEMENTS:
        raise JobError(f"{source}: cluster.server_placement: must be one of "
                       f"{', '.join(PLACEMENTS)}, got {placement!r}")
    per_host_servers = placement == "per_host"
    if servers is None and not per_host_servers:
        raise JobError(f"{source}: cluster.servers: placement first_slots needs a count")
    slots = [Slot(h, i) for h in hosts for i in range(h.slots)]
    first = 0 if per_host_servers else servers
    need = first + workers
    if len(slots) < need:
        what = (f"{workers} workers (servers share the workers' hosts)" if per_host_servers
                else f"{servers} servers and {workers} workers ({need} needed)")
        raise JobError(f"{source}: cluster.hostfile: {len(slots)} slots for {what}; "
                       f"add hosts or slots")
    placed_workers: list[Slot] = []
    per_host: dict[str, int] = {}
    for slot in slots[first:need]:
        i = per_host.get(slot.host.name, 0)
        per_host[slot.host.name] = i + 1
        gpu = slot.host.gpus[i % len(slot.host.gpus)] if slot.host.gpus else None
        placed_workers.append(dataclasses.replace(slot, gpu=gpu))
    if per_host_servers:
        beside = worker_hosts(hosts, workers)
        count = len(beside) if servers is None else servers
        placed_servers = [Slot(beside[k % len(beside)], BESIDE) for k in range(count)]
    else:
        placed_servers = slots[:servers]
    return Placement(servers=placed_servers, workers=placed_workers, spares=slots[need:])
