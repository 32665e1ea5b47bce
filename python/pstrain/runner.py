"""Job (the API's entry point) and the run: start the servers, then the workers,
watch every process, restart a worker whose failure may pass (a retryable exit
or a death by signal, see exitcodes), fail the job at once on any other worker
failure, a server failure or a signal, and leave a complete run folder behind.

Processes are started, moved, stopped and their checkpoints collected through
the job's launcher (launch.py's interface, chosen by cluster.hosts in
launchers.py); nothing here asks which launcher it is."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from . import caffe_schema, exitcodes, plots, programs, resume as resume_check, runfolder
from . import tensorboard
from .config import JobConfig, apply_overrides, load_yaml, parse_job
from .errors import JobError
from .launch import CannotRelocate
from .launcher import ProcessHandle
from .launchers import launcher_for
from .metrics import MetricsLog, read_records, summarize, to_record
from .plan import Plan, make_plan
from .progress import Progress, SilentProgress, make_progress

SHUTDOWN_GRACE_S = 30.0    # servers and other workers after worker 0 finished


@dataclasses.dataclass
class RunResult:
    summary: dict[str, Any]
    metrics: list[dict]
    snapshot: pathlib.Path | None
    run_dir: pathlib.Path

    @property
    def status(self) -> str:
        return self.summary["status"]

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class RunControl:
    """A run seen and stopped from another thread (pstrain.DistributedSolver drives
    a job this way): `ready` is set once every server of an attempt listens, with
    `endpoints`, `plan` and `attempt` (1, then 2, ... after a whole-job restart);
    `stop(message)` ends the run (status "stopped") at the watch loop's next turn."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.endpoints: list[str] = []
        self.plan: Plan | None = None
        self.attempt = 0
        self.stop_message: str | None = None

    def started(self, plan: Plan, endpoints: list[str]) -> None:
        self.plan, self.endpoints = plan, list(endpoints)
        self.attempt += 1
        self.ready.set()

    def stop(self, message: str) -> None:
        self.stop_message = message


class Job:
    """A validated job. Build it from a job file (`Job.from_yaml`) or in code
    (`Job(JobConfig(...))`, relative paths against the current folder).

    step_gate: the servers hold every pull at a gate a driver raises (ps-server
    --step-gate), as pstrain.DistributedSolver does; a job run without its
    driver would wait at iteration 0. initial_model: a .caffemodel the run starts
    from (the driver's net), copied into the run folder; a fresh run only."""

    def __init__(self, config: JobConfig, *, source: str = "<job>", step_gate: bool = False,
                 initial_model: pathlib.Path | None = None):
        self.source = source
        self.config = parse_job(config.to_dict(), source, pathlib.Path.cwd())
        self.step_gate = step_gate
        self.initial_model = initial_model

    @classmethod
    def from_yaml(cls, path: str | pathlib.Path,
                  overrides: dict[str, Any] | list[str] | None = None) -> "Job":
        path = pathlib.Path(path)
        data = apply_overrides(load_yaml(path), overrides, str(path))
        # Parsed against the job file's folder: every path in the config is absolute.
        return cls(parse_job(data, str(path), path.resolve().parent), source=str(path))

    @classmethod
    def from_run_dir(cls, run_dir: str | pathlib.Path,
                     overrides: dict[str, Any] | list[str] | None = None) -> "Job":
        """The job a run folder was made by (its job.resolved.yaml)."""
        path = pathlib.Path(run_dir) / runfolder.MARKER
        if not path.exists():
            raise JobError(f"{run_dir}: not a run folder (no {runfolder.MARKER})")
        return cls.from_yaml(path, overrides)

    def plan(self, *, resume_manifest: pathlib.Path | None = None) -> Plan:
        return _plan(self.config, self.source, resume_manifest, step_gate=self.step_gate,
                     initial_model=self.initial_model)

    def dry_run(self, *, overwrite: bool = False) -> str:
        """The resolved job and every process's command line; starts nothing. Names
        the run folder a run would use: output/name, or the first free name-2,
        name-3, ... when that exists (unless overwrite)."""
        config = self.config
        note = f"# run folder: {config.run_dir}"
        if not overwrite:
            name = runfolder.free_name(config.output, config.name)
            if name != config.name:
                config = dataclasses.replace(config, name=name)
                note = (f"# run folder: {config.run_dir} ({self.config.run_dir} exists; "
                        f"--overwrite would replace it)")
        elif config.run_dir.exists():
            note += " (exists: --overwrite replaces it)"
        plan = _plan(config, self.source, None, step_gate=self.step_gate,
                     initial_model=self.initial_model)
        return note + "\n" + plan.describe() + "\n" + caffe_schema.check_in_engine(plan)

    def run(self, *, quiet: bool = False, resume: bool = False, timeout: float | None = None,
            overwrite: bool = False, progress: str = "auto",
            on_event: Callable[[dict], None] | None = None,
            control: RunControl | None = None) -> RunResult:
        """Runs the job to the end. Raises JobError for bad input (nothing started).

        resume: continue from the newest complete checkpoint in the run folder.
        overwrite: replace an existing run folder output/name; without it a new run
          goes to the first free output/name-2, name-3, ... (and is named so).
        timeout: give up (status failed) after this many seconds.
        quiet: print nothing (stdout and stderr). Otherwise progress: "auto" (a bar on
          a terminal, plain lines elsewhere) or "lines".
        on_event: called on the calling thread with each metrics record (a dict, as
          in metrics.jsonl) as it arrives.
        control: a RunControl to watch and stop the run from another thread."""
        if progress not in ("auto", "lines"):
            raise JobError(f"progress: must be 'auto' or 'lines', got {progress!r}")
        say = (lambda text: None) if quiet else (lambda text: print(text, flush=True))
        config = self.config
        if not resume and not overwrite:
            name = runfolder.free_name(config.output, config.name)
            if name != config.name:
                config = dataclasses.replace(config, name=name)
                say(f"[{name}] {self.config.run_dir} exists (overwrite replaces it); "
                    f"this run goes to {config.run_dir}")
        manifest = None
        if resume:
            resume_check.check_weights(config, self.source)
            resume_check.check_job(config, self.source)
            manifest = runfolder.newest_checkpoint(config.run_dir)
            if manifest is None:
                raise JobError(f"{config.run_dir}: no complete checkpoint (*.manifest) in "
                               f"{config.run_dir / 'snapshots'} to resume from")
        driven = {"step_gate": self.step_gate, "initial_model": self.initial_model}
        plan = _plan(config, self.source, manifest, **driven)
        if plan.missing_sources:
            _prepare_data(config, plan, say)
            plan = _plan(config, self.source, manifest, preparing=False, **driven)
        if resume:
            resume_check.check_files(plan)
        for warning in plan.warnings:
            say(f"[{config.name}] warning: {warning}")
        if plan.initial_weights and manifest is None:
            say(f"[{config.name}] initial weights (worker 0, copied by layer name): "
                f"{', '.join(str(w) for w in plan.initial_weights)}")
        if manifest is not None:
            say(f"[{config.name}] resuming from the checkpoint at iteration "
                f"{runfolder.checkpoint_iteration(manifest)}: {manifest}")
        with _private_files():
            runfolder.create(plan, resume=resume, overwrite=overwrite)
            if config.security.auth == "none" and config.transport.kind == "ipc":
                say(f"[{config.name}] security: none: no CURVE; servers listen on Unix "
                    f"sockets in {config.run_dir / 'sockets'} (mode 0700: only this user "
                    f"can connect)")
            elif config.security.auth == "none":
                say(f"[{config.name}] security: none: no CURVE, servers bind "
                    f"{config.transport.interface}; any local user can connect to them "
                    f"(for experiments on one machine)")
            shown = SilentProgress() if quiet else make_progress(config.name, plan.max_iter,
                                                                 quiet=progress == "lines")
            deadline = None if timeout is None else time.monotonic() + timeout
            server_restarts = 0
            while True:
                left = None if deadline is None else max(1.0, deadline - time.monotonic())
                run = _Run(plan, progress=shown, timeout=left, on_event=on_event,
                           server_restarts=server_restarts, control=control)
                result = run.execute()
                if not run.server_lost or result.ok:
                    return _said(result, quiet)
                # A server was lost: the whole job again from the newest complete checkpoint.
                manifest = runfolder.newest_checkpoint(config.run_dir)
                limit = config.restart.max_server_restarts
                if manifest is None or server_restarts >= limit:
                    why = ("no complete checkpoint to restart from" if manifest is None else
                           f"no server restarts left (restart.max_server_restarts = {limit})")
                    result.summary["message"] += f"; {why}"
                    run.write_summary(result.summary)
                    return _said(result, quiet)
                server_restarts += 1
                say(f"[{config.name}] {result.summary['message']}; restarting the job from "
                    f"{manifest} ({server_restarts}/{limit})")
                plan = _plan(config, self.source, manifest, preparing=False, **driven)
                shown = SilentProgress() if quiet else make_progress(config.name, plan.max_iter,
                                                                     quiet=progress == "lines")


def _said(result: RunResult, quiet: bool) -> RunResult:
    """Says once (on stderr) why a run ended other than ok, or what went wrong
    after all; the command line's end line does not repeat it."""
    message, status = result.summary.get("message"), result.status
    if message and not quiet:
        head = "" if message.startswith(status) else f"{status}: "
        print(f"[{result.summary['name']}] {head}{message}", file=sys.stderr, flush=True)
    return result


@contextlib.contextmanager
def _private_files():
    """umask 077 while a run writes its folder and its processes run (they
    inherit it): logs, snapshots and keys are readable by their owner only."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _plan(config: JobConfig, source: str, manifest: pathlib.Path | None,
          preparing: bool | None = None, step_gate: bool = False,
          initial_model: pathlib.Path | None = None) -> Plan:
    """The job's plan with its launcher's layout. `preparing` (default: the job has
    data.prepare): data sources may be missing, data.prepare makes them."""
    if preparing is None:
        preparing = config.data is not None and config.data.prepare is not None
    layout = launcher_for(config.cluster.hosts).layout(config, source)
    return make_plan(config, source, layout=layout, resume_manifest=manifest,
                     preparing_data=preparing, step_gate=step_gate, initial_model=initial_model)


def _prepare_data(job: JobConfig, plan: Plan, say: Callable[[str], None]) -> None:
    """Converts Fashion-MNIST with scripts/prepare_data.sh (data.prepare)."""
    script = programs.REPO_ROOT / "scripts" / "prepare_data.sh"
    build = programs.find_program("ps-data").parent.parent
    if not script.exists():
        raise JobError(f"{plan.source}: data.prepare: {script} not found; convert the data with "
                       f"ps-data and set data: null")
    say(f"[{job.name}] preparing {job.data.prepare if job.data else ''}: bash {script} {build}")
    done = subprocess.run(["bash", str(script), str(build)], capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        raise JobError(f"{plan.source}: data.prepare: {script} failed: "
                       f"{(done.stderr or done.stdout).strip()[-500:]}")


class _Run:
    """One execution of a plan. Events from the reader threads arrive on a queue
    and are handled on the calling thread only."""

    def __init__(self, plan: Plan, *, progress: Progress, timeout: float | None,
                 on_event: Callable[[dict], None] | None, server_restarts: int = 0,
                 control: RunControl | None = None):
        self.plan = plan
        self.control = control
        self.launcher = launcher_for(plan.job.cluster.hosts)(plan, self._sink)
        self.server_lost = False          # a server failed in a way a restart may cure
        self.server_restarts = server_restarts
        self.job = plan.job
        self.timeout = timeout
        self.events: queue.Queue[tuple[ProcessHandle, dict, float]] = queue.Queue()
        self.metrics = MetricsLog(plan.run_dir / "metrics.jsonl")
        self.progress = progress
        self.on_event = on_event
        self.servers: list[ProcessHandle] = []
        self.workers: dict[int, ProcessHandle] = {}
        self.finished: set[int] = set()     # worker ranks that exited 0
        self.restarts = 0
        self.last_iter: dict[int, int] = {}
        self.interrupted = False
        self.endpoints: list[str] = []

    # -- processes ---------------------------------------------------------

    def _sink(self, handle: ProcessHandle, event: dict) -> None:
        self.events.put((handle, event, time.time()))

    def _start_servers(self) -> None:
        self.servers = self.launcher.start_servers()
        self.endpoints = [h.endpoint for h in self.servers]
        if self.control is not None:
            self.control.started(self.plan, self.endpoints)

    def _start_worker(self, rank: int) -> None:
        if rank in self.workers:
            log = runfolder.log_path(self.plan.run_dir, "worker", rank)
            with open(log, "a") as f:
                f.write(f"--- ps-train: restart {self.restarts} of worker {rank} ---\n")
        self.workers[rank] = self.launcher.start_worker(rank, self.endpoints)

    # -- events --------------------------------------------------------------

    def _drain(self, wait: float) -> None:
        try:
            item = self.events.get(timeout=wait)
        except queue.Empty:
            return
        while True:
            handle, event, now = item
            consumed = self._on_host_event(handle, event, now)
            record = None if consumed else to_record(event, handle.role, handle.rank, now)
            if record is not None:
                if handle.role == "worker" and isinstance(record.get("iter"), int):
                    self.last_iter[handle.rank] = record["iter"]
                self.metrics.add(record)
                self.progress.event(record)
                if self.on_event is not None:
                    self.on_event(record)
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                return

    def _on_host_event(self, handle: ProcessHandle, event: dict, now: float) -> bool:
        """Stall warnings name the host; snapshots written on a host are copied here.

        True when the event became a record of its own (a server's stall report
        becomes the silent worker's stall record)."""
        kind = event.get("event")
        if kind == "stall" and handle.role == "server":
            # ps-server's report of a worker silent past its bound (ShardLoop's
            # on_silence): worker, clock and silent_s as fields.
            rank, clock, silent_s = int(event["worker"]), int(event["clock"]), event["silent_s"]
            where = self.workers[rank].where if rank in self.workers else f"worker-{rank}"
            stall = {"time": round(now, 3), "role": "worker", "rank": rank,
                     "iter": self.last_iter.get(rank), "event": "stall", "clock": clock,
                     "silent_s": float(silent_s), "host": self.workers[rank].host
                     if rank in self.workers else None, "reported_by": handle.name}
            self.metrics.add(stall)
            if self.on_event is not None:
                self.on_event(stall)
            self.progress.notice(f"stall: {where} (rank {rank}, last clock {clock}) has "
                                 f"been silent for {silent_s} s ({handle.name} noticed)")
            return True
        if kind == "snapshot" and event.get("path"):
            try:
                self.launcher.collect_checkpoint(handle, event)
            except JobError as e:
                self.progress.notice(f"snapshot at iteration {event.get('iter')} not copied "
                                     f"back: {e}")
        return False

    def _retryable(self, h: ProcessHandle, rc: int) -> bool:
        return exitcodes.is_retryable(rc, remote=h.remote)

    # -- the watch loop ------------------------------------------------------

    def execute(self) -> RunResult:
        t0 = time.time()
        train_start = t0
        status, message = "failed", ""
        restore = self._install_signals()
        try:
            self._start_servers()
            train_start = time.time()
            for r in range(self.job.cluster.workers):
                self._start_worker(r)
            status, message = self._watch(t0)
        except KeyboardInterrupt:
            status, message = "interrupted", "interrupted"
        except RuntimeError as e:
            status, message = "failed", str(e)
        finally:
            self.launcher.stop()
            restore()
        train_end = time.time()
        for h in self.launcher.started:
            h.join_output()
        self._drain(0)
        self.progress.close()   # the end and its reason are said by Job.run (_said)
        self.metrics.close()
        return self._finish(status, message, t0, train_start, train_end)

    def _watch(self, t0: float) -> tuple[str, str]:
        w0_done_at: float | None = None
        early_server_exit: float | None = None
        while True:
            self._drain(0.2)
            now = time.monotonic()
            if self.interrupted:
                return "interrupted", "interrupted by a signal; every process stopped"
            if self.control is not None and self.control.stop_message is not None:
                return "stopped", self.control.stop_message
            if self.timeout is not None and time.time() - t0 > self.timeout:
                return "failed", f"the job did not finish in {self.timeout:.0f} s"
            for rank, h in list(self.workers.items()):
                rc = h.poll()
                if rc is None or rank in self.finished:
                    continue
                if rc == 0:
                    self.finished.add(rank)
                    if rank == 0:
                        w0_done_at = now
                    continue
                h.join_output(2)
                why = self.plan.user_paths(h.describe_exit())
                if not self._retryable(h, rc):
                    return "failed", f"{why}; not restarted, it would fail again (see {h.log_path})"
                if self.restarts >= self.job.restart.max_worker_restarts:
                    return "failed", (f"{why}; no worker restarts left "
                                      f"(restart.max_worker_restarts = "
                                      f"{self.job.restart.max_worker_restarts})")
                self.restarts += 1
                restart = {"time": round(time.time(), 3), "role": "worker", "rank": rank,
                           "iter": self.last_iter.get(rank), "event": "restart", "exit": rc,
                           "restarts": self.restarts}
                try:
                    placed = self.launcher.relocate(rank, h, rc)
                except CannotRelocate as e:
                    return "failed", f"{why}; {e}"
                where = ""
                if placed is not None:
                    where = f" on {placed.label}"
                    restart["host"] = placed.address
                self.metrics.add(restart)
                if self.on_event is not None:
                    self.on_event(restart)
                self.progress.notice(f"{why}; restarting it{where} "
                                     f"({self.restarts}/{self.job.restart.max_worker_restarts})")
                self._start_worker(rank)
            exits = [h.poll() for h in self.servers]
            for h, rc in zip(self.servers, exits):
                if rc is not None and rc != 0:
                    h.join_output(2)
                    self.server_lost = self._retryable(h, rc)
                    return "failed", (f"{self.plan.user_paths(h.describe_exit())}; stopping the "
                                      f"job (see {h.log_path})")
            if all(rc == 0 for rc in exits):
                if w0_done_at is not None:
                    return "ok", ""
                early_server_exit = early_server_exit or now
                if now - early_server_exit > SHUTDOWN_GRACE_S:
                    return "failed", "the servers stopped before worker 0 finished"
            elif w0_done_at is not None and now - w0_done_at > SHUTDOWN_GRACE_S:
                late = [h.name for h, rc in zip(self.servers, exits) if rc is None]
                return "failed", f"{', '.join(late)} did not exit after worker 0's shutdown"

    def _install_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def on_signal(signum: int, frame: Any) -> None:
            self.interrupted = True

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for s, handler in old.items():
                signal.signal(s, handler)
        return restore

    def _start_iteration(self) -> int:
        manifest = self.plan.resume_manifest
        return (runfolder.checkpoint_iteration(manifest) or 0) if manifest else 0

    def write_summary(self, summary: dict) -> None:
        (self.plan.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    def _finish(self, status: str, message: str, t0: float, train_start: float,
                train_end: float) -> RunResult:
        run_dir = self.plan.run_dir
        records = read_records(run_dir / "metrics.jsonl")
        if status == "ok" and self.finished != set(self.workers):
            message = "some workers were still running after worker 0 finished; stopped"
        summary = summarize(records, name=self.job.name, status=status,
                            mode=self.job.consistency.mode,
                            staleness=self.job.consistency.staleness,
                            workers=self.job.cluster.workers, servers=self.job.cluster.servers,
                            batch=self.plan.batch, wall_seconds=time.time() - t0,
                            train_seconds=train_end - train_start,
                            worker_restarts=self.restarts, run_dir=run_dir, message=message,
                            start_iteration=self._start_iteration())
        summary["started_at"] = round(t0, 3)
        summary["resumed_from"] = (str(self.plan.resume_manifest)
                                   if self.plan.resume_manifest else None)
        try:
            plot = plots.plot_run(records, run_dir / "plots" / "training.png",
                                  f"{self.job.name} ({self.job.consistency.mode}, "
                                  f"{self.job.cluster.workers} workers)")
            summary["plot"] = str(plot) if plot else None
        except Exception as e:  # a plotting failure must not lose the run's results
            summary["plot"] = None
            summary["plot_error"] = str(e)
        try:
            summary.update(tensorboard.export(records, run_dir))
        except OSError as e:
            summary["tensorboard_error"] = str(e)
        summary["server_restarts"] = self.server_restarts
        if self.launcher.remote:
            summary["hosts"] = {h.name: h.host
                                for h in self.servers + list(self.workers.values())}
        self.write_summary(summary)
        snapshot = pathlib.Path(summary["snapshot"]) if summary["snapshot"] else None
        return RunResult(summary=summary, metrics=records, snapshot=snapshot, run_dir=run_dir)
