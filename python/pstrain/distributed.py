"""pstrain.DistributedSolver: a ps-train job driven step by step from Python,
with caffe.Solver's interface (docs/python.md, "Several GPUs and hosts from
Python").

    solver = pstrain.DistributedSolver('solver.prototxt', workers=4, mode='ssp', staleness=2)
    solver.set_input_arrays(X, y)          # nets that read from MemoryData
    with solver:                           # starts the shards and workers; stops them all on exit
        r = solver.step(1000)              # every worker runs 1000 more iterations, then waits
        w = solver.net.params['ip1'][0].data

How it maps onto a job: the keyword arguments are a job file's sections, and
the job runs through the same runner as `ps-train` (runner.Job.run on a
thread of this process), so the run folder, logs, metrics, plots, restarts,
CURVE keys, checkpoints and launchers are ps-train's. Its servers start with
a step gate (ps-server --step-gate): no worker computes iteration t until the
driver raised the gate above t. `step(n)` raises it to iter + n and waits
until every worker's clock is there (wait_for_clock), then pulls the shards'
weights into `net` through a control client (role "control": the
orchestrator's key, no worker state).

The driver holds its own copy of the solver (pstrain.caffe, on the CPU):
`net` and `test_nets` are its nets, `test()` runs them on the pulled weights.
Its net's weights, after `weights=` and whatever the script changed before the
first step, are the job's initial weights (worker 0 loads them, as a job's
`weights:`).
"""
from __future__ import annotations

import atexit
import dataclasses
import os
import pathlib
import queue
import shutil
import tempfile
import threading
import time
import weakref
from typing import Any, Callable

from . import runfolder
from .config import DataConfig, apply_overrides, load_yaml, parse_job
from .errors import JobError
from .interrupt import InterruptLatch
from .runner import Job, RunControl, RunResult
from .solver import SolverText

START_TIMEOUT_S = 180.0     # servers listening, once the job thread started
FINISH_TIMEOUT_S = 120.0    # the job's own end after the last step (final test, snapshot)
SNAPSHOT_TIMEOUT_S = 300.0  # snapshot(): the checkpoint written once the gate rose
POLL_S = 0.5                # how often a wait looks at the job thread and the callbacks
CLIENT_TIMEOUT_S = 10.0     # the control client's wait for a silent shard (then: is the job alive?)


@dataclasses.dataclass
class StepResult:
    """What `step(n)` and `solve()` return.

    iter: the iteration every worker reached (the workers' common clock).
    version: the servers' version then (global steps applied: = iter in bsp).
    loss: worker 0's smoothed loss at its latest display line (None without one).
    test: worker 0's test outputs when a test ran during the step ({} otherwise),
      {name: value}, e.g. {'accuracy': 0.87, 'loss': 0.35}.
    images_per_second: of the whole job during the step (every worker's images).
    staleness: the largest clock gap a shard saw between workers, and the
      histogram of applied gradients by staleness ([k]: k steps stale), over the shards.
    seconds: the step's wall time."""

    iter: int
    version: int
    loss: float | None
    test: dict[str, float]
    images_per_second: float
    staleness: dict[str, Any]
    seconds: float


class DistributedSolver:
    """caffe.Solver's interface over a parameter-server job: several workers
    (CPU processes or GPUs, on this host, a hostfile's hosts or Slurm's) and
    shards; every consistency mode and async-SGD method a job file takes.

    solver: the solver prototxt. workers, servers: process counts. devices: GPU
    ids, one per worker ('cpu' or None: see below), e.g. [0, 1, 2, 3]. mode: bsp,
    ssp or asp; staleness: the ssp bound. hosts: 'local', 'slurm', or a hostfile's
    path. weights: .caffemodel files loaded into `net` now (by layer name, as
    `caffe train -weights`). name, output: the run folder output/name (a free
    name-2, name-3 ... when it exists, unless overwrite). quiet: print nothing
    (else ps-train's progress lines). Every other keyword is a job file section
    (cluster, consistency, transport, restart, remote, security, engine,
    solver_overrides): a dict merged into what the keywords above say.

    devices=None reads CAFFE_GPU_ID (e.g. "0,1", what blog posts set together
    with CAFFE_MODE=GPU, which BVLC Caffe ignores) once, here: GPU workers on
    those ids when it is set and CAFFE_MODE is not CPU, else the CPU."""

    def __init__(self, solver: str | os.PathLike, *, workers: int | None = None,
                 servers: int = 1, devices: Any = None, mode: str = "bsp",
                 staleness: int | None = None, hosts: str | os.PathLike = "local",
                 weights: Any = None, name: str | None = None,
                 output: str | os.PathLike = "runs", overwrite: bool = False,
                 quiet: bool = True, **sections: Any):
        data = _job_dict(solver, workers=workers, servers=servers, devices=devices, mode=mode,
                         staleness=staleness, hosts=hosts, weights=weights, name=name,
                         output=output, sections=sections)
        source = f"DistributedSolver({os.fspath(solver)!r})"
        config = parse_job(data, source, pathlib.Path.cwd())
        self._setup(Job(config, source=source, step_gate=True), overwrite=overwrite,
                    quiet=quiet, resume=False)

    @classmethod
    def from_yaml(cls, job: str | os.PathLike, overrides: dict | list | None = None, *,
                  overwrite: bool = False, quiet: bool = True) -> "DistributedSolver":
        """A job file (with overrides, as ps-train --set takes them) driven step by step."""
        path = pathlib.Path(job)
        data = apply_overrides(load_yaml(path), overrides, str(path))
        config = parse_job(data, str(path), path.resolve().parent)
        self = cls.__new__(cls)
        self._setup(Job(config, source=str(path), step_gate=True), overwrite=overwrite,
                    quiet=quiet, resume=False)
        return self

    # -- set-up --------------------------------------------------------------

    def _setup(self, job: Job, *, overwrite: bool, quiet: bool, resume: bool) -> None:
        from . import caffe  # the compiled engine: only a DistributedSolver needs it here
        self._caffe = caffe
        self._job = job
        self._overwrite = overwrite
        self._quiet = quiet
        self._resume = resume
        self._callbacks: list[Callable[[dict], None]] = []
        self._events: queue.Queue[dict] = queue.Queue()
        self._records: list[dict] = []
        self._thread: threading.Thread | None = None
        self._control: RunControl | None = None
        self._client = None
        self._attempt = 0
        self._gate = 0
        self._iter = 0
        self._version = 0
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._latch = InterruptLatch()   # Ctrl-C during a wait (pstrain/interrupt.py)
        self._arrays: dict[str, tuple[pathlib.Path, pathlib.Path]] = {}
        c = job.config.consistency
        if c.easgd is not None or c.local_sgd is not None:
            which = "easgd" if c.easgd is not None else "local_sgd"
            raise JobError(f"{job.source}: consistency.{which}: a DistributedSolver steps "
                           f"iterations, and these methods' workers count exchanges; run "
                           f"this job with ps-train")
        plan = job.plan()             # every check of ps-train's, before anything starts
        self.max_iter = plan.max_iter
        self._batch = plan.batch
        self._private = pathlib.Path(tempfile.mkdtemp(prefix="pstrain-driver-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._private, True)
        # The driver's own solver, from the plan's copies (absolute paths, as the
        # workers see them): its nets are `net` and `test_nets`.
        for copy_name, (_, text) in plan.nets.items():
            (self._private / copy_name).write_text(text.replace(str(plan.run_dir),
                                                                str(self._private)))
        solver_file = self._private / "solver.prototxt"
        solver_file.write_text(plan.solver_text.replace(str(plan.run_dir), str(self._private)))
        self._solver_text = SolverText.read(solver_file)
        caffe.init_log(1)
        self._local = caffe.get_solver(str(solver_file))
        # The job's weights (weights= or its weights:, else the solver's own): worker 0
        # starts from this net, whatever the script does to it first.
        for w in plan.initial_weights:
            self._local.net.copy_from(str(w))

    # -- caffe.Solver's interface ---------------------------------------------

    @property
    def net(self):
        """The training net with the shards' weights as of the last step (a
        pstrain.caffe Net; before the first step, the initial weights)."""
        return self._local.net

    @property
    def test_nets(self) -> list:
        return self._local.test_nets

    @property
    def iter(self) -> int:
        """The iteration every worker has reached (the servers' version in bsp)."""
        return self._iter

    @property
    def param(self):
        return self._local.param

    @property
    def run_dir(self) -> pathlib.Path:
        """The job's run folder (known once it started)."""
        plan = self._control.plan if self._control and self._control.plan else None
        return plan.run_dir if plan else self._job.config.run_dir

    def add_callback(self, callback: Callable[[dict], None]) -> None:
        """Calls `callback(record)` with each metrics record (a dict, as in
        metrics.jsonl: train, test, snapshot, restart, stall, ...), on the
        thread that runs step/solve, as the records arrive."""
        if not callable(callback):
            raise TypeError("add_callback takes a function of one metrics record (a dict)")
        self._callbacks.append(callback)

    def set_input_arrays(self, data, labels, layer: str | None = None) -> None:
        """The samples of a MemoryData layer (`layer`: its name; default the training
        net's only MemoryData layer): numpy arrays (N, channels, height, width) and N
        labels, or np.load(..., mmap_mode='r') arrays, whose file is used as it is.
        Every worker reads its own share (with W workers of batch b, worker w reads
        rows [(t*W + w)*b, (t*W + w + 1)*b) modulo N at step t: bsp equals one worker
        of batch W*b over the same rows). Test nets with a MemoryData layer of the
        same name read the same arrays. Before the first step."""
        import numpy as np
        if self._thread is not None:
            raise RuntimeError("set_input_arrays: the job has started; give the arrays "
                               "before the first step")
        layer = self._memory_layer(layer)
        top = self.net.top_names[layer][0]
        shape = tuple(self.net.blobs[top].data.shape)
        data_shape, label_shape = np.shape(data), np.shape(labels)
        if len(data_shape) != 4 or tuple(data_shape[1:]) != shape[1:]:
            raise ValueError(f"set_input_arrays: layer '{layer}' takes arrays of shape "
                             f"(N, {', '.join(map(str, shape[1:]))}), got data of shape "
                             f"{data_shape}")
        n = data_shape[0]
        if label_shape[:1] != (n,) or any(d != 1 for d in label_shape[1:]):
            raise ValueError(f"set_input_arrays: layer '{layer}': {n} samples but labels of "
                             f"shape {label_shape} (need ({n},))")
        workers = self._job.config.cluster.workers
        if n < shape[0] * workers:
            raise ValueError(f"set_input_arrays: layer '{layer}': {n} samples, fewer than one "
                             f"global batch ({workers} workers x batch {shape[0]} = "
                             f"{workers * shape[0]})")
        index = len(self._arrays)
        paths = (_npy_file(data, self._private / f"memory-{index}.data.npy"),
                 _npy_file(labels, self._private / f"memory-{index}.labels.npy"))
        self._arrays[layer] = paths
        # The driver's nets read them too (test(), forward in the script), in whole batches.
        for net in [self.net] + list(self.test_nets):
            if layer in net.layer_dict and net.layer_dict[layer].type == "MemoryData":
                b = net.blobs[net.top_names[layer][0]].data.shape[0]
                m = n - n % b
                net.set_input_arrays(np.ascontiguousarray(data[:m], dtype=np.float32),
                                     np.ascontiguousarray(np.reshape(labels, (n,))[:m],
                                                          dtype=np.float32))

    def step(self, iters: int) -> StepResult:
        """Every worker runs `iters` more iterations and waits; `net` then holds the
        shards' weights. Starts the job first when it has not started."""
        if not isinstance(iters, int) or iters < 0:
            raise ValueError(f"step: iterations must be an integer >= 0, got {iters!r}")
        target = self._iter + iters
        if target > self.max_iter:
            raise ValueError(f"step({iters}): iteration {target} is past the solver's max_iter "
                             f"{self.max_iter} (a job's workers stop there); raise max_iter "
                             f"(solver_overrides={{'max_iter': N}}) to train longer")
        self.start()
        t0 = time.monotonic()
        seen = len(self._records)
        before = self._iter
        with self._latch:
            self._open_gate(target)
            clock, version = self._wait_for_clock(target)
            self._iter, self._version = clock, version
            self._pull()
        seconds = time.monotonic() - t0
        return self._result_since(seen, before, seconds)

    def solve(self) -> StepResult:
        """Runs to the solver's max_iter, then lets the job end as ps-train's does
        (final test and snapshot); `net` holds the final weights."""
        result = self.step(self.max_iter - self._iter)
        self.close()
        return result

    def test(self) -> list[dict[str, float]]:
        """Runs each test net test_iter times on `net`'s current weights (here, in
        this process) and returns, per test net, the mean of each output, as
        Caffe's solver reports a test."""
        import numpy as np
        iters = [int(v) for v in self._solver_text.get("test_iter")]
        results = []
        for i, net in enumerate(self.test_nets):
            self._local.share_weights(net)
            sums: dict[str, float] = {}
            count = iters[i] if i < len(iters) else (iters[-1] if iters else 1)
            for _ in range(count):
                out = net.forward()
                for k, v in out.items():
                    sums[k] = sums.get(k, 0.0) + float(np.mean(v))
            results.append({k: v / count for k, v in sums.items()})
        return results

    def snapshot(self) -> pathlib.Path:
        """A checkpoint of iteration `iter`, as ps-train writes one (the shards'
        .state files, worker 0's .caffemodel, the manifest; `restore` and
        `ps-train --resume` take it). Returns the .caffemodel's path. The workers
        go on to the next iteration's start to write it (they compute it; the next
        step counts from `iter` as before)."""
        if self._iter == 0:
            raise RuntimeError("snapshot: nothing trained yet (iteration 0); its weights are "
                               "the initial ones (save net with net.save)")
        self.start()
        g = self._iter
        seen = len(self._records)
        self._guard(lambda: self._client.set_gate(g, checkpoint=True), "asking for a snapshot")
        self._open_gate(g + 1)
        deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
        with self._latch:
            while time.monotonic() < deadline:
                for record in self._records[seen:]:
                    if record.get("event") == "snapshot" and record.get("iter") == g:
                        return pathlib.Path(record["path"])
                seen = len(self._records)
                self._check_running(f"waiting for the snapshot at iteration {g}")
                self._dispatch(POLL_S)
        raise RuntimeError(f"snapshot: worker 0 wrote no checkpoint of iteration {g} in "
                           f"{SNAPSHOT_TIMEOUT_S:.0f} s (see {self.run_dir / 'logs'})")

    def restore(self, path: str | os.PathLike) -> None:
        """Continues the run whose folder holds checkpoint `path` (a .caffemodel,
        .manifest or the run folder): the job resumes from that folder's newest
        complete checkpoint, as ps-train --resume does. Before the first step."""
        if self._thread is not None:
            raise RuntimeError("restore: the job has started; restore before the first step")
        p = pathlib.Path(path).resolve()
        run = p if p.is_dir() else p.parent.parent
        manifest = runfolder.newest_checkpoint(run)
        if manifest is None:
            raise JobError(f"restore: {path}: no complete checkpoint (*.manifest) in "
                           f"{run / 'snapshots'}")
        config = dataclasses.replace(self._job.config, output=run.parent, name=run.name,
                                     weights=[])
        self._job = Job(config, source=self._job.source, step_gate=True)
        self._resume = True
        self._iter = runfolder.checkpoint_iteration(manifest) or 0
        self._gate = self._iter

    # -- the job's life ------------------------------------------------------

    def __enter__(self) -> "DistributedSolver":
        self.start()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(finish=kind is None)

    def start(self) -> None:
        """Starts the servers and workers (step does it when needed)."""
        if self._closed:
            raise RuntimeError("this DistributedSolver has finished; make a new one")
        if self._thread is not None:
            return
        config = self._job.config
        if self._arrays:
            data = dataclasses.replace(config.data or DataConfig(), memory_data={
                layer: list(paths) for layer, paths in self._arrays.items()})
            config = dataclasses.replace(config, data=data)
        initial = None
        if not self._resume:
            initial = self._private / "initial.caffemodel"
            self.net.save(str(initial))
            config = dataclasses.replace(config, weights=[])  # they are in the net already
        self._job = Job(config, source=self._job.source, step_gate=True, initial_model=initial)
        self._control = RunControl()
        self._thread = threading.Thread(target=self._run_job, name="pstrain-job", daemon=True)
        self._thread.start()
        _running.add(self)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._control.ready.wait(POLL_S):
            self._dispatch(0)
            self._check_running("starting the servers")
            if time.monotonic() > deadline:
                self.close(finish=False)
                raise RuntimeError(f"the servers did not start in {START_TIMEOUT_S:.0f} s")
        self._connect()

    def close(self, finish: bool = True) -> RunResult | None:
        """Ends the job: at max_iter (finish) it ends as ps-train's does (final test,
        snapshot, status ok); before it, every process is stopped (status
        "stopped"). Returns the run's result (summary, metrics, run folder)."""
        if self._closed or self._thread is None:
            self._closed = True
            return self._result
        self._closed = True
        try:
            if finish and self._iter >= self.max_iter and self._error is None and \
                    self._thread.is_alive():
                self._open_gate(self.max_iter + 1)
                self._thread.join(FINISH_TIMEOUT_S)
            if self._thread.is_alive():
                self._control.stop(f"stopped by the driver (DistributedSolver) at iteration "
                                   f"{self._iter}")
                self._thread.join()
            self._dispatch(0)
        finally:
            self._client = None
            _running.discard(self)
            self._finalizer()
        return self._result

    @property
    def result(self) -> RunResult | None:
        """The run's result once the job ended (summary.json's content and more)."""
        return self._result

    def _run_job(self) -> None:
        try:
            self._result = self._job.run(quiet=self._quiet, overwrite=self._overwrite,
                                         resume=self._resume, progress="lines",
                                         on_event=self._events.put, control=self._control)
        except BaseException as e:  # reported on the driver's thread
            self._error = e

    def _connect(self) -> None:
        control = self._control
        plan = control.plan
        job = plan.job
        self._client = self._caffe._core.PsClient(
            self.net, control.endpoints, rank=0, world_size=job.cluster.workers,
            mode=job.consistency.mode, job_key=plan.wire_job_key,
            keys=str(plan.keys_dir) if plan.keys_dir is not None else "",
            chunk_bytes=job.transport.chunk_bytes, timeout_s=CLIENT_TIMEOUT_S, role="control")
        self._attempt = control.attempt
        if self._attempt > 1:          # a whole-job restart: the gate starts again at its clock
            self._gate = 0

    def _open_gate(self, gate: int) -> None:
        if gate > self._gate:
            self._guard(lambda: self._client.set_gate(gate), f"opening the gate to {gate}")
            self._gate = gate

    def _wait_for_clock(self, target: int) -> tuple[int, int]:
        while True:
            self._check_running(f"waiting for every worker to reach iteration {target}")
            if self._control.attempt != self._attempt:   # the job restarted from a checkpoint
                self._connect()
                self._open_gate(max(target, self._gate))
            try:
                clock, version = self._client.wait_for_clock(target, timeout_s=POLL_S)
                self._dispatch(0)
                return clock, version
            except RuntimeError as e:
                if not str(e).startswith("waited "):
                    self._check_running(f"waiting for iteration {target}")
                    if self._control.attempt == self._attempt:
                        raise
            self._dispatch(0)

    def _pull(self) -> None:
        self._guard(lambda: self._client.pull(self._iter), "pulling the weights")
        self._guard(self._client.wait_pull, "pulling the weights")

    def _guard(self, call: Callable[[], Any], doing: str) -> Any:
        """call(), a request to the shards; when it fails and the job has ended, the
        job's own reason is raised instead (a worker that failed for good, ...)."""
        try:
            return call()
        except RuntimeError:
            self._thread.join(2 * POLL_S)
            self._check_running(doing)
            raise

    def _check_running(self, doing: str) -> None:
        self._latch.check()
        if self._error is not None:
            error, self._error = self._error, None
            self.close(finish=False)
            raise error
        if not self._thread.is_alive():
            self._dispatch(0)
            summary = self._result.summary if self._result else {}
            self.close(finish=False)
            raise RuntimeError(f"the job ended while {doing}: {summary.get('status')}: "
                               f"{summary.get('message') or 'see ' + str(self.run_dir)}")

    def _dispatch(self, wait: float) -> None:
        """Hands the records that arrived to the callbacks, on this thread."""
        try:
            record = self._events.get(timeout=wait) if wait > 0 else self._events.get_nowait()
        except queue.Empty:
            return
        while True:
            self._records.append(record)
            for callback in self._callbacks:
                callback(record)
            try:
                record = self._events.get_nowait()
            except queue.Empty:
                return

    def _result_since(self, seen: int, before: int, seconds: float) -> StepResult:
        new = self._records[seen:]
        worker0 = [r for r in self._records if r.get("role") == "worker" and r.get("rank") == 0]
        train = [r for r in worker0 if r.get("event") == "train"]
        tests = [r for r in new if r.get("role") == "worker" and r.get("rank") == 0
                 and r.get("event") == "test"]
        test: dict[str, float] = {}
        if tests:
            test = {k: v for k, v in tests[-1].items()
                    if isinstance(v, (int, float)) and k not in ("time", "rank", "iter")}
        stats = self._guard(self._client.stats, "asking the shards for statistics")
        histogram: list[int] = []
        for s in stats:
            for k, n in enumerate(s["staleness_histogram"]):
                histogram += [0] * (k + 1 - len(histogram))
                histogram[k] += n
        workers = self._job.config.cluster.workers
        images = (self._iter - before) * workers * self._batch
        return StepResult(
            iter=self._iter, version=self._version,
            loss=train[-1].get("loss") if train else None, test=test,
            images_per_second=images / seconds if seconds > 0 else 0.0,
            staleness={"max": max((s["staleness_max"] for s in stats), default=0),
                       "histogram": histogram},
            seconds=seconds)

    def _memory_layer(self, layer: str | None) -> str:
        names = [n for n, l in self.net.layer_dict.items() if l.type == "MemoryData"]
        if layer is None:
            if len(names) != 1:
                raise ValueError(f"set_input_arrays: the training net has "
                                 f"{len(names) or 'no'} MemoryData layers"
                                 f"{' (' + ', '.join(names) + ')' if names else ''}; "
                                 f"{'name one with layer=' if names else 'add one'}")
            return names[0]
        if layer not in names:
            raise ValueError(f"set_input_arrays: the training net has no MemoryData layer "
                             f"'{layer}' (its MemoryData layers: {', '.join(names) or 'none'})")
        return layer


# -- helpers -------------------------------------------------------------------

_running: "weakref.WeakSet[DistributedSolver]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """A script that ends without close() (or `with`) leaves nothing running."""
    for solver in list(_running):
        try:
            solver.close(finish=False)
        except Exception:
            pass


def _npy_file(array, path: pathlib.Path) -> pathlib.Path:
    """The .npy file that holds `array`: its own file when it is np.load's memory
    map of a whole C-order .npy, else one written (privately) at `path`."""
    import numpy as np
    if isinstance(array, np.memmap) and getattr(array, "filename", None):
        source = pathlib.Path(array.filename)
        if source.suffix == ".npy" and array.flags.c_contiguous:
            try:
                whole = np.load(source, mmap_mode="r")
                if whole.shape == array.shape and whole.dtype == array.dtype and \
                        whole.offset == array.offset:
                    return source
            except (OSError, ValueError):
                pass
    np.save(path, np.ascontiguousarray(array))
    return path


def _job_dict(solver, *, workers, servers, devices, mode, staleness, hosts, weights, name,
              output, sections: dict[str, Any]) -> dict[str, Any]:
    """The job file a DistributedSolver's keywords say."""
    solver = pathlib.Path(os.fspath(solver))
    gpus = _devices(devices)
    if workers is None:
        workers = len(gpus) if isinstance(gpus, list) else 1
    cluster: dict[str, Any] = {"workers": workers, "servers": servers, "worker_devices": gpus}
    if os.fspath(hosts) in ("local", "slurm"):
        cluster["hosts"] = os.fspath(hosts)
    else:
        cluster["hosts"], cluster["hostfile"] = "hostfile", str(pathlib.Path(hosts).resolve())
    consistency: dict[str, Any] = {"mode": mode}
    if staleness is not None:
        consistency["staleness"] = staleness
    elif mode != "ssp":
        consistency["staleness"] = 0
    data: dict[str, Any] = {"name": name or solver.stem, "solver": str(solver.resolve()),
                            "output": str(pathlib.Path(os.fspath(output)).resolve())}
    if weights is not None:    # the job's weights: (Caffe's -weights syntax, checked by the plan)
        data["weights"] = (os.fspath(weights) if isinstance(weights, (str, os.PathLike))
                           else [os.fspath(w) for w in weights])
    for key, value in sections.items():
        if key in ("cluster", "consistency") and isinstance(value, dict):
            (cluster if key == "cluster" else consistency).update(value)
        else:
            data[key] = value
    data["cluster"], data["consistency"] = cluster, consistency
    return data


def _devices(devices: Any):
    """devices= as a job's cluster.worker_devices; None reads CAFFE_GPU_ID."""
    if devices is None:
        ids = os.environ.get("CAFFE_GPU_ID", "").strip()
        if not ids or os.environ.get("CAFFE_MODE", "").strip().upper() == "CPU":
            return "cpu"
        try:
            return [int(i) for i in ids.split(",")]
        except ValueError:
            raise ValueError(f"CAFFE_GPU_ID={ids!r}: expected GPU ids like 0,1") from None
    if devices in ("cpu", "auto"):
        return devices
    if isinstance(devices, int):
        return [devices]
    return [int(d) for d in devices]
