"""cluster.hosts: slurm (launch.py's interface): every process as a task of one
`srun` step inside the allocation ps-train runs in (sbatch or salloc).

Tasks 0..S-1 are the servers, S..S+W-1 the workers. With
cluster.server_placement per_host (the default) the servers are a step of
their own, one on each node of the allocation (srun --distribution=cyclic
--overlap: server k on node k mod N, sharing the node's CPUs with its workers
and taking none of the allocation's tasks), and the workers a second step of W
tasks; with first_slots all S+W tasks are one step. Slurm's own distribution
puts the tasks of a step on nodes (SLURM_NODEID / SLURM_LOCALID say where).
Each task runs slurmnode.py, which starts the program once ps-train has sent
what it needs over the step's stdin (srun --input=all): server 0's endpoint
to the other servers, every server's endpoint to the workers. The step's
output comes back labelled (srun --label) and is split into one handle per
task, so logs, metrics and the watch loop are as for local processes. A
restarted worker is a new one-task step on the node it ran on (--overlap).
The run folder must be on a filesystem every node of the allocation sees (as
usual on Slurm clusters).

Host aggregation (transport.host_aggregation, plan.py host_groups) needs each
worker's node before anything starts: the servers count one pusher a node.
The allocation says where its task slots are (SLURM_JOB_NODELIST, expanded
as Slurm's host lists are, and SLURM_TASKS_PER_NODE, "2(x2),1"), so the
layout gives the workers those slots in block order (node 0's slots first,
as Slurm's default distribution does; with first_slots the servers take the
first S). When that makes groups, the step is not left to Slurm's placement:
it runs with --distribution=arbitrary and --nodelist naming each task's node
in task order, and slurmnode.py refuses to start a task on another node.
"""
from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from .caffelog import CaffeLog
from .config import JobConfig
from .errors import JobError
from .launch import Launcher
from .launcher import EventSink, ProcessHandle, _die_with_parent, caffe_log_path
from .layout import Layout
from .plan import Plan

_LABEL = re.compile(r"^\s*(\d+): ?(.*)$", re.S)
_HOSTLIST_PART = re.compile(r"([^\[]*)(\[[^\]]*\])?")     # a name's text, then its [ranges]
_WORKER_ON = re.compile(r'"message":"worker \d+ on ([^"]+)"')
PLAN_FILE = "slurm_tasks.json"
NODE = "@NODE@"     # replaced by each task's node name (slurmnode.py)
START_TIMEOUT_S = 120.0   # srun's step start included


def allocation_nodes() -> int:
    """The allocation's node count (SLURM_JOB_NUM_NODES, or SLURM_NNODES; 1 if neither)."""
    for name in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) >= 1:
            return int(value)
    return 1


def expand_nodelist(text: str, variable: str = "SLURM_JOB_NODELIST") -> list[str]:
    """Slurm's compressed host list expanded, in its order: "n[01-03,7],gpu5" ->
    n01 n02 n03 n7 gpu5; several brackets in a name multiply out left first
    ("r[1-2]-n[1-2]" -> r1-n1 r1-n2 r2-n1 r2-n2); a range keeps its first bound's
    zero padding. A malformed list is a JobError naming `variable`."""
    def bad(why: str) -> JobError:
        return JobError(f"{variable}: cannot read the node list {text!r}: {why}")

    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text + ","):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise bad("a '[' inside brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise bad("a ']' without '['")
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise bad("a '[' without ']'")
    names: list[str] = []
    for item in items:
        if not item:
            raise bad("an empty name")
        expanded = [""]
        for prefix, ranges in _HOSTLIST_PART.findall(item):
            parts = [prefix]
            if ranges:
                parts = []
                for r in ranges[1:-1].split(","):
                    lo, dash, hi = r.strip().partition("-")
                    if not lo.isdigit() or (dash and not hi.isdigit()):
                        raise bad(f"the range '{r}' is not N or N-M")
                    if hi and int(hi) < int(lo):
                        raise bad(f"the range '{r}' runs backwards")
                    width = len(lo) if lo.startswith("0") else 0
                    parts += [prefix + str(n).zfill(width)
                              for n in range(int(lo), int(hi or lo) + 1)]
            expanded = [e + part for e in expanded for part in parts]
        names += expanded
    return names


def expand_tasks_per_node(text: str) -> list[int]:
    """SLURM_TASKS_PER_NODE expanded to one count a node: "2(x2),1" -> [2, 2, 1].
    A malformed value is a JobError naming the variable."""
    counts: list[int] = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if m is None:
            raise JobError(f"SLURM_TASKS_PER_NODE: cannot read {text!r}: '{item}' is not N or "
                           f"N(xM)")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def allocation_slots() -> tuple[list[str] | None, str]:
    """The allocation's task slots, one node name a slot, node by node in the order
    of SLURM_JOB_NODELIST (Slurm's block order), from SLURM_JOB_NODELIST (or
    SLURM_NODELIST) and SLURM_TASKS_PER_NODE; (None, why) when they are not set.
    Raises JobError when they are malformed or disagree."""
    variable = "SLURM_JOB_NODELIST" if os.environ.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
    nodelist = os.environ.get(variable)
    per_node = os.environ.get("SLURM_TASKS_PER_NODE")
    if not nodelist or not per_node:
        return None, ("SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE are not both set, so the "
                      "nodes of its tasks are known only once srun starts them")
    nodes = expand_nodelist(nodelist, variable)
    counts = expand_tasks_per_node(per_node)
    if len(nodes) != len(counts):
        raise JobError(f"SLURM_TASKS_PER_NODE: {per_node!r} gives {len(counts)} task counts for "
                       f"the {len(nodes)} nodes of {variable} {nodelist!r}")
    return [node for node, n in zip(nodes, counts) for _ in range(n)], ""


def check_allocation(servers: int, workers: int, source: str, *,
                     servers_take_tasks: bool = True) -> None:
    """Raises JobError unless ps-train runs inside an allocation with srun and
    enough tasks (servers placed per_host take none)."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise JobError(f"{source}: cluster.hosts: slurm: not inside a Slurm allocation "
                       f"(SLURM_JOB_ID is not set); run ps-train from an sbatch script or salloc")
    if shutil.which("srun") is None:
        raise JobError(f"{source}: cluster.hosts: slurm: srun not found on PATH")
    ntasks = os.environ.get("SLURM_NTASKS")
    need = servers + workers if servers_take_tasks else workers
    if ntasks and ntasks.isdigit() and int(ntasks) < need:
        what = (f"{servers} servers and {workers} workers" if servers_take_tasks
                else f"{workers} workers (servers placed per_host share their nodes)")
        raise JobError(f"{source}: cluster.hosts: slurm: the allocation has {ntasks} tasks for "
                       f"{what}; ask for --ntasks={need}")


class SlurmStep:
    """One srun step running some tasks of the plan; its output split per task."""

    def __init__(self, run_dir: pathlib.Path, tasks: list[int], options: list[str],
                 node: str | None = None, spread: list[str] = ()):
        self.tasks = tasks
        cmd = ["srun", f"--ntasks={len(tasks)}", "--label", "--unbuffered", "--input=all",
               "--kill-on-bad-exit=0", f"--job-name=pstrain-{run_dir.name}"]
        if node is not None:
            cmd += ["--nodes=1", f"--nodelist={node}", "--overlap"]
        cmd += list(spread)
        cmd += options + [sys.executable, "-m", "pstrain.slurmnode",
                          str(run_dir / PLAN_FILE), "--tasks", ",".join(map(str, tasks))]
        self.cmd = cmd
        env = dict(os.environ)
        package_root = str(pathlib.Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"]
                                            if env.get("PYTHONPATH") else "")
        self.handles: dict[int, TaskHandle] = {}
        self.messages: collections.deque[str] = collections.deque(maxlen=20)
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1, env=env,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        self._reader = threading.Thread(target=self._read, daemon=True, name="srun-reader")

    def start_reading(self) -> None:
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = _LABEL.match(line)
            if m is None or int(m.group(1)) >= len(self.tasks):
                self.messages.append(line.rstrip("\n"))   # srun's own lines
                for h in self.handles.values():
                    h.tail.append(line.rstrip("\n"))
                continue
            handle = self.handles.get(self.tasks[int(m.group(1))])
            if handle is not None:
                handle.take_task_line(m.group(2))
        self.proc.wait()
        for h in self.handles.values():
            h.take_step_end(self.proc.returncode)

    def send(self, message: dict) -> None:
        with self._lock:
            if self.proc.stdin is None or self.proc.stdin.closed or self.proc.poll() is not None:
                return
            try:
                self.proc.stdin.write(json.dumps(message) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass

    def join(self, timeout: float) -> None:
        if self._reader.is_alive():
            self._reader.join(timeout)

    def stop(self) -> None:
        """Ends the step: stdin closed (each task's program gets SIGTERM), srun
        given 10 s, then SIGKILL to srun (Slurm then kills the step)."""
        with self._lock:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class TaskHandle(ProcessHandle):
    """A ProcessHandle for one task of a SlurmStep (no process of its own here).
    Remote: a task that ended without its task_exit line reads 255 (lost)."""

    def __init__(self, step: SlurmStep, task: int, *, role: str, rank: int,
                 log_path: pathlib.Path, sink: EventSink | None):
        self.cmd = step.cmd
        self.role, self.rank = role, rank
        self.log_path = log_path
        self.events = []
        self.tail = collections.deque(maxlen=20)
        self.endpoint = None
        self.host = None
        self._sink = sink
        self._listening = threading.Event()
        self._log = open(log_path, "a", buffering=1)
        self.started_at = time.time()
        self.proc = None
        self._caffe_log = CaffeLog(caffe_log_path(log_path), step.proc.pid, self.name)
        self._step, self._task = step, task
        self._status: int | None = None
        self._ended = threading.Event()

    @property
    def pid(self) -> int:
        return self._step.proc.pid

    @property
    def remote(self) -> bool:
        return True

    def take_task_line(self, text: str) -> None:
        if self._ended.is_set():
            return
        if text.startswith('{"event": "task_exit"'):
            try:
                self._status = int(json.loads(text)["status"])
            except (ValueError, KeyError, TypeError):
                self._status = 255
            self.take_end()     # the task's last line
            self._ended.set()
            return
        self.take_line(text if text.endswith("\n") else text + "\n")
        if self.host is None and self.endpoint and self.endpoint.startswith("tcp://"):
            self.host = self.endpoint[6:].rpartition(":")[0]
        m = _WORKER_ON.search(text) if self.host is None else None
        if m:
            self.host = m.group(1)

    def take_step_end(self, returncode: int | None) -> None:
        """The step ended; a task that sent no task_exit line was lost (255)."""
        if self._ended.is_set():
            return
        self._status = 255 if not returncode else returncode
        self.take_end()
        self._ended.set()

    def poll(self) -> int | None:
        return self._status if self._ended.is_set() else None

    def wait(self, timeout: float) -> int | None:
        if self._status is not None:
            self._ended.wait(min(timeout, 5.0))
            return self._status
        self._ended.wait(timeout)
        return self.poll()

    def signal(self, sig: int) -> None:
        if self.poll() is None:
            self._step.send({"signal": int(sig), "task": self._task})

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.wait(10) is None:
            self._step.stop()

    def join_output(self, timeout: float = 5.0) -> None:
        self._ended.wait(timeout)


class SlurmLayout(Layout):
    """Every process on the node Slurm gives its task: each binds and advertises
    the node's name (@NODE@, filled in by slurmnode.py); GPUs come from GRES.
    worker_nodes: per worker rank, the node of its slot in the allocation (the
    module's comment), or None, with why_unknown, where the allocation does not say."""

    def __init__(self, workers: int, worker_nodes: list[str] | None = None,
                 why_unknown: str = "the nodes of its tasks are known only once srun "
                                    "starts them", server_nodes: list[str] | None = None):
        super().__init__([None] * workers)
        self.worker_nodes = list(worker_nodes) if worker_nodes is not None else None
        self.why_unknown = why_unknown
        # first_slots: the servers' slots (the first S), for a step that places them too
        self.server_nodes = list(server_nodes) if server_nodes is not None else None

    def server_address(self, shard: int) -> str | None:
        return NODE

    def worker_address(self, rank: int) -> str | None:
        return NODE

    def worker_hosts(self) -> list[str] | None:
        return self.worker_nodes

    def worker_hosts_unknown(self) -> str:
        return self.why_unknown


class SlurmLauncher(Launcher):
    """One srun step for every process; endpoints go to the tasks on its stdin. A
    restarted worker is a one-task step on the node it ran on."""

    name = "slurm"
    remote = True

    def __init__(self, plan: Plan, sink: EventSink):
        super().__init__(plan, sink)
        self.options = list(plan.job.remote.srun_options)
        self.steps: list[SlurmStep] = []
        self._held: dict[int, TaskHandle] = {}      # workers of the first step, not yet taken
        self._workers: dict[int, TaskHandle] = {}   # each worker's latest task

    @classmethod
    def layout(cls, job: JobConfig, source: str) -> SlurmLayout:
        c = job.cluster
        per_host = c.server_placement != "first_slots"
        if per_host and c.servers is None:
            c.servers = allocation_nodes()      # one server a node
        check_allocation(c.servers, c.workers, source, servers_take_tasks=not per_host)
        if job.transport.kind != "tcp":
            raise JobError(f"{source}: transport.kind: hosts: slurm needs tcp (ipc sockets do "
                           f"not cross nodes)")
        if isinstance(c.worker_devices, list) or c.server_device != "cpu":
            raise JobError(f"{source}: cluster.worker_devices: with hosts: slurm, GPUs come "
                           f"from Slurm's GRES (remote.srun_options: ['--gpus-per-task=1']); "
                           f"set worker_devices cpu or auto and server_device cpu")
        try:
            slots, why = allocation_slots()
        except JobError as e:
            raise JobError(f"{source}: cluster.hosts: slurm: {e}") from None
        first = 0 if per_host else c.servers    # first_slots: the servers take the first S
        if slots is not None and len(slots) < first + c.workers:
            why = (f"the allocation has {len(slots)} task slots (SLURM_TASKS_PER_NODE "
                   f"{os.environ['SLURM_TASKS_PER_NODE']}) for {first + c.workers} tasks, so "
                   f"srun places the others only when it starts them")
            slots = None
        if slots is None:
            return SlurmLayout(c.workers, why_unknown=why)
        return SlurmLayout(c.workers, slots[first:first + c.workers],
                           server_nodes=slots[:first] if first else None)

    def start_servers(self) -> list[ProcessHandle]:
        c = self.plan.job.cluster
        S, W = c.servers, c.workers
        self.write_tasks()
        placed = self.placed_nodes()
        if c.server_placement == "first_slots":
            handles = self._start_step(list(range(S + W)), spread=self._arbitrary(
                None if placed is None else placed["server"] + placed["worker"]))
            worker_step = server_step = self.steps[-1]
        else:   # per_host: one server a node, beside the workers (the module's comment)
            nodes = min(S, allocation_nodes())
            handles = self._start_step(list(range(S)), spread=[
                f"--nodes={nodes}", "--distribution=cyclic", "--overlap"])
            server_step = self.steps[-1]
        servers: list[ProcessHandle] = [handles[k] for k in range(S)]
        server_step.send({"coordinator": servers[0].wait_listening(START_TIMEOUT_S)})
        endpoints = [h.wait_listening(START_TIMEOUT_S) for h in servers]
        if c.server_placement != "first_slots":
            handles = self._start_step(list(range(S, S + W)), spread=["--overlap"] + (
                self._arbitrary(None if placed is None else placed["worker"])))
            worker_step = self.steps[-1]
        worker_step.send({"servers": endpoints})
        self._held = {r: handles[S + r] for r in range(W)}
        return servers

    def start_worker(self, rank: int, endpoints: list[str]) -> ProcessHandle:
        if rank in self._held:
            self._workers[rank] = self._held.pop(rank)
            return self._workers[rank]
        task = self.plan.job.cluster.servers + rank
        previous = self._workers.get(rank)
        node = previous.host if previous is not None else None
        placed = self.placed_nodes()
        if placed is not None:      # its host group's node
            node = placed["worker"][rank]
        self._workers[rank] = self._start_step([task], node=node)[task]
        self.steps[-1].send({"servers": endpoints})
        return self._workers[rank]

    def release(self) -> None:
        for step in self.steps:
            step.stop()
        for step in self.steps:
            step.join(10)

    # -- steps -------------------------------------------------------------------

    def placed_nodes(self) -> dict[str, list[str]] | None:
        """With host groups (plan.host_groups), the node of each task the launcher
        places itself: {"worker": per rank, "server": per shard with first_slots,
        else []}; None: Slurm's own distribution places every task."""
        layout = self.plan.layout
        assert isinstance(layout, SlurmLayout)
        if self.plan.host_groups() is None or layout.worker_nodes is None:
            return None
        return {"worker": layout.worker_nodes, "server": layout.server_nodes or []}

    @staticmethod
    def _arbitrary(nodes: list[str] | None) -> list[str]:
        """srun's options that start task i of a step on nodes[i] (none for None)."""
        if nodes is None:
            return []
        return ["--distribution=arbitrary", f"--nodelist={','.join(nodes)}"]

    def write_tasks(self) -> None:
        j = self.plan.job
        tasks = [{"role": "server", "rank": k, "argv": self.plan.server_command(k, "@COORDINATOR@")}
                 for k in range(j.cluster.servers)]
        tasks += [{"role": "worker", "rank": r, "argv": self.plan.worker_command(r, ["@SERVERS@"])}
                  for r in range(j.cluster.workers)]
        placed = self.placed_nodes()
        if placed is not None:      # slurmnode.py checks that srun put the task there
            for task in tasks:
                nodes = placed[task["role"]]
                if task["rank"] < len(nodes):
                    task["node"] = nodes[task["rank"]]
        data = {"tasks": tasks, "gpu_from_slurm": j.cluster.worker_devices != "cpu"}
        (self.plan.run_dir / PLAN_FILE).write_text(json.dumps(data, indent=1) + "\n")

    def _start_step(self, tasks: list[int], node: str | None = None,
                    spread: list[str] = ()) -> dict[int, TaskHandle]:
        """A step running `tasks` of the plan (on `node` when given, else as `spread`'s
        srun options distribute them), every task tracked."""
        step = SlurmStep(self.plan.run_dir, tasks, self.options, node, spread)
        S = self.plan.job.cluster.servers
        for t in tasks:
            role, rank = ("server", t) if t < S else ("worker", t - S)
            step.handles[t] = TaskHandle(step, t, role=role, rank=rank,
                                         log_path=self.log_path(role, rank), sink=self.sink)
            self.track(step.handles[t])
        step.start_reading()
        self.steps.append(step)
        return step.handles
