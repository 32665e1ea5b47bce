"""cluster.hosts: slurm: every process as a task of one `srun` step inside the
allocation ps-train runs in (sbatch or salloc).

Tasks 0..S-1 are the servers, S..S+W-1 the workers (SLURM_PROCID; Slurm's
own distribution puts them on nodes, SLURM_NODEID / SLURM_LOCALID say where).
Each task runs slurmnode.py, which starts the program once ps-train has sent
what it needs over the step's stdin (srun --input=all): server 0's endpoint
to the other servers, every server's endpoint to the workers. The step's
output comes back labelled (srun --label) and is split into one handle per
task, so logs, metrics and the watch loop are as for local processes. A
restarted worker is a new one-task step on the node it ran on (--overlap).
The run folder must be on a filesystem every node of the allocation sees (as
usual on Slurm clusters).
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

from . import runfolder
from .caffelog import CaffeLog
from .errors import JobError
from .launcher import EventSink, ProcessHandle, _die_with_parent, caffe_log_path

_LABEL = re.compile(r"^\s*(\d+): ?(.*)$", re.S)
_WORKER_ON = re.compile(r'"message":"worker \d+ on ([^"]+)"')
PLAN_FILE = "slurm_tasks.json"


def check_allocation(servers: int, workers: int, source: str) -> None:
    """Raises JobError unless ps-train runs inside an allocation with srun."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise JobError(f"{source}: cluster.hosts: slurm: not inside a Slurm allocation "
                       f"(SLURM_JOB_ID is not set); run ps-train from an sbatch script or salloc")
    if shutil.which("srun") is None:
        raise JobError(f"{source}: cluster.hosts: slurm: srun not found on PATH")
    ntasks = os.environ.get("SLURM_NTASKS")
    if ntasks and ntasks.isdigit() and int(ntasks) < servers + workers:
        raise JobError(f"{source}: cluster.hosts: slurm: the allocation has {ntasks} tasks for "
                       f"{servers} servers and {workers} workers; ask for --ntasks="
                       f"{servers + workers}")


class SlurmStep:
    """One srun step running some tasks of the plan; its output split per task."""

    def __init__(self, run_dir: pathlib.Path, tasks: list[int], options: list[str],
                 node: str | None = None):
        self.tasks = tasks
        cmd = ["srun", f"--ntasks={len(tasks)}", "--label", "--unbuffered", "--input=all",
               "--kill-on-bad-exit=0", f"--job-name=pstrain-{run_dir.name}"]
        if node is not None:
            cmd += ["--nodes=1", f"--nodelist={node}", "--overlap"]
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
    """A ProcessHandle for one task of a SlurmStep (no process of its own here)."""

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


class SlurmLauncher:
    """The runner's side of a Slurm job: write the task plan, start steps."""

    def __init__(self, plan):
        self.plan = plan
        self.options = list(plan.job.remote.srun_options)
        self.steps: list[SlurmStep] = []
        self.nodes: dict[int, str] = {}          # worker rank -> the node it ran on

    def write_tasks(self) -> None:
        j = self.plan.job
        tasks = [{"role": "server", "rank": k, "argv": self.plan.server_command(k, "@COORDINATOR@")}
                 for k in range(j.cluster.servers)]
        tasks += [{"role": "worker", "rank": r, "argv": self.plan.worker_command(r, ["@SERVERS@"])}
                  for r in range(j.cluster.workers)]
        data = {"tasks": tasks, "gpu_from_slurm": j.cluster.worker_devices != "cpu"}
        (self.plan.run_dir / PLAN_FILE).write_text(json.dumps(data, indent=1) + "\n")

    def start(self, tasks: list[int], sink: EventSink, node: str | None = None
              ) -> dict[int, TaskHandle]:
        step = SlurmStep(self.plan.run_dir, tasks, self.options, node)
        S = self.plan.job.cluster.servers
        for t in tasks:
            role, rank = ("server", t) if t < S else ("worker", t - S)
            step.handles[t] = TaskHandle(step, t, role=role, rank=rank,
                                         log_path=runfolder.log_path(self.plan.run_dir, role,
                                                                     rank), sink=sink)
        step.start_reading()
        self.steps.append(step)
        return step.handles

    def stop(self) -> None:
        for step in self.steps:
            step.stop()
        for step in self.steps:
            step.join(10)
