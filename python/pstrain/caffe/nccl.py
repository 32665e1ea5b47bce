"""Caffe's NCCL for python/train.py, over a bsp parameter-server job.

Caffe's train.py starts one process per GPU, each with
set_solver_count(n) / set_solver_rank(r), and joins them with
NCCL(solver, uid): bcast() gives every solver rank 0's weights, and as a
solver callback it all-reduces the gradients before each update. Here the
same calls make the processes the workers of a bsp job of PSTrain's
parameter server (docs/python.md, "Caffe's train.py on several processes"):

* new_uid() makes a private rendezvous: a fresh directory (mode 0700) whose
  path is the uid.
* NCCL(solver, uid) on rank 0 starts one ps-server shard (bsp, n workers,
  the solver's own parameters, so the shard applies the solver's rule) bound
  to an ipc socket inside that directory, tied to rank 0's process by
  PR_SET_PDEATHSIG, and writes server.json there; the other ranks wait for
  that file. Each rank connects its solver.net with a pstrain._core.PsClient.
* bcast(): rank 0's weights become the shard's, every rank pulls them.
* on_gradients_ready (the solver callback): push this iteration's gradients,
  pull the weights the shard computed from every rank's; `applies_update`
  tells the solver to apply no update of its own (the shard did).

With one solver (solver_count() == 1) nothing is started and every call does
nothing, as Caffe's NCCL with one GPU.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import multiprocessing.util
import os
import pathlib
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import weakref
from typing import Any

from google.protobuf import text_format

from ..programs import find_program
from .proto import caffe_pb2

# Inside the rendezvous directory.
_SOCKET = "ps-server.ipc"
_SERVER_FILE = "server.json"  # {"endpoint", "job_key", "pid"} or {"error"}, written by rank 0
_SOLVER_FILE = "solver.prototxt"
_LOG_FILE = "server.log"
# A Unix socket's path must fit sockaddr_un's 108 bytes (with the "ipc://"
# ZeroMQ drops and the terminating zero, to spare).
_MAX_SOCKET_PATH = 100
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.02


def new_uid() -> bytes:
    """A fresh rendezvous for one job: a private directory (mode 0700) under
    the temporary folder (or /tmp where that path is too long for a socket);
    its path, as bytes as Caffe's uid is. Call it once, in the parent, and hand
    the same uid to every process's NCCL(solver, uid)."""
    root = tempfile.gettempdir()
    if len(os.path.join(root, "pstrain-nccl-xxxxxxxx", _SOCKET)) > _MAX_SOCKET_PATH:
        root = "/tmp"
    return os.fsencode(tempfile.mkdtemp(prefix="pstrain-nccl-", dir=root))


class NCCL:
    """Caffe's NCCL(solver, uid): the solvers of set_solver_count(n) processes
    train as one, each on its share of every global batch (see the module's
    text). `timeout_s` bounds the rendezvous, and each wait for the other
    ranks' gradients (a rank that tests while the others wait counts too)."""

    def __init__(self, solver: Any, uid: bytes | str, *, timeout_s: float = 600.0) -> None:
        core = _core_module()
        self.solver = solver
        self.uid = uid
        self.rank = core.solver_rank()
        self.count = core.solver_count()
        self.timeout_s = timeout_s
        # Read once by solver.add_callback: several processes -> the shard updates.
        self.applies_update = self.count > 1
        self._client = None
        self._broadcast = False
        self._in_step = False
        self._clock = 0
        if self.count == 1:
            _remove_unused(uid)
            return
        self._where = f"NCCL rank {self.rank} of {self.count} (uid {_text(uid)})"
        if self.rank >= self.count:
            raise ValueError(f"{self._where}: the rank is out of range (set_solver_rank)")
        if solver.iter != 0:
            raise ValueError(
                f"{self._where}: the solver is at iteration {solver.iter}; a job across processes "
                "starts at iteration 0 (the shard's learning-rate schedule and solver history "
                "would restart there): resume a parameter-server job with ps-train --resume")
        directory = _rendezvous(uid, self._where)
        if self.rank == 0:
            server = _ServerProcess.start(solver, directory, self.count, timeout_s, self._where)
            endpoint, job_key = server.endpoint, server.job_key
        else:
            server = None
            endpoint, job_key = _wait_for_server(directory, timeout_s, self._where)
        try:
            self._client = core.PsClient(solver.net, [endpoint], rank=self.rank,
                                         world_size=self.count, mode="bsp", job_key=job_key,
                                         timeout_s=timeout_s)
            self._client.hello()
        except Exception as e:
            if server is not None:
                server.stop(None)
            raise RuntimeError(f"{self._where}: connecting to the parameter server at "
                               f"{endpoint} failed: {e}") from e
        if server is not None:
            # Stops the server when this object goes, or at the latest when the
            # process ends normally: weakref.finalize runs at interpreter exit,
            # multiprocessing's Finalize where a forked child skips that.
            self._end = weakref.finalize(self, server.stop, self._client)
            multiprocessing.util.Finalize(self, self._end, exitpriority=0)

    @staticmethod
    def new_uid() -> bytes:
        return new_uid()

    def bcast(self) -> None:
        """Every rank starts from rank 0's weights: rank 0's become the
        shard's, and every rank pulls them into its net."""
        if self._client is None or self._broadcast:
            return
        with self._naming("bcast"):
            if self.rank == 0:
                self._client.init_push()
            self._client.pull(0)
            self._client.wait_pull()
        self._broadcast = True

    def on_start(self) -> None:
        """Solver callback, before each iteration's forward (a script that
        skipped bcast gets it here, before the first)."""
        if self._client is None:
            return
        self.bcast()
        self._in_step = True

    def on_gradients_ready(self) -> None:
        """Solver callback, when the iteration's gradients are in the diffs:
        they go to the shard, and the weights it computes from every rank's
        come back before the solver goes on (it applies no update itself)."""
        if self._client is None:
            return
        with self._naming(f"iteration {self._clock}"):
            # The pull first: the shard holds it until every rank's push is in.
            self._client.pull(self._clock + 1)
            self._client.push(self._clock)
            self._client.wait_pull()
        self._clock += 1
        self._in_step = False

    def __call__(self, layer: int) -> None:
        """solver.net.after_backward(nccl) (solver.param.layer_wise_reduce):
        the gradients go to the shard together, in on_gradients_ready, so
        per layer there is nothing to do; it checks that the object is a
        solver callback too, as train.py makes it."""
        if self._client is not None and not self._in_step:
            raise RuntimeError(f"{self._where}: solver.net.after_backward(nccl) without "
                               "solver.add_callback(nccl): the gradients are exchanged in the "
                               "solver callback; add it as train.py does")

    @contextlib.contextmanager
    def _naming(self, what: str):
        try:
            yield
        except Exception as e:
            raise RuntimeError(f"{self._where}, {what}: {e}") from e


def _core_module():
    from .pycaffe import _core
    return _core


def _text(uid: Any) -> str:
    return os.fsdecode(uid) if isinstance(uid, (bytes, str)) else repr(uid)


def _rendezvous(uid: Any, where: str) -> pathlib.Path:
    """The directory `uid` names, after checking that it is one new_uid made
    for this user: a real directory (not a link), owned by us, closed to
    everyone else (the ipc socket inside is then ours alone)."""
    if not isinstance(uid, (bytes, str)):
        raise ValueError(f"{where}: the uid must be caffe.NCCL.new_uid()'s bytes, got "
                         f"{type(uid).__name__}")
    path = pathlib.Path(os.fsdecode(uid))
    problem = None
    try:
        info = path.lstat()
    except OSError as e:
        problem = f"it names no directory ({e.strerror})"
    else:
        if not path.is_absolute() or not stat.S_ISDIR(info.st_mode):
            problem = "it is not an absolute path of a directory"
        elif info.st_uid != os.getuid():
            problem = "the directory belongs to another user"
        elif info.st_mode & 0o077:
            problem = f"the directory's mode is {stat.S_IMODE(info.st_mode):o}, not 700"
    if problem:
        raise ValueError(f"{where}: the uid is not a rendezvous of caffe.NCCL.new_uid(): {problem}")
    return path


def _remove_unused(uid: Any) -> None:
    """One solver: the rendezvous new_uid made is not needed; removes it when
    it is one (an empty private directory of ours), else leaves everything."""
    try:
        path = _rendezvous(uid, "")
        path.rmdir()
    except (ValueError, OSError):
        pass


def _wait_for_server(directory: pathlib.Path, timeout_s: float, where: str) -> tuple[str, int]:
    """Ranks > 0: rank 0's server.json, once it is there."""
    deadline = time.monotonic() + timeout_s
    path = directory / _SERVER_FILE
    while True:
        try:
            found = json.loads(path.read_text())
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{where}: no parameter server appeared in the rendezvous within "
                    f"{timeout_s:g} s; rank 0 must make NCCL(solver, uid) with the same uid "
                    "(caffe.NCCL.new_uid() in the parent)") from None
            time.sleep(_POLL_S)
            continue
        if "error" in found:
            raise RuntimeError(f"{where}: rank 0 could not start the parameter server: "
                               f"{found['error']}")
        return found["endpoint"], int(found["job_key"])


def _publish(directory: pathlib.Path, content: dict) -> None:
    """Writes server.json whole (a reader never sees half of it)."""
    partial = directory / (_SERVER_FILE + ".partial")
    partial.write_text(json.dumps(content))
    os.replace(partial, directory / _SERVER_FILE)


def _server_solver(solver: Any, directory: pathlib.Path) -> pathlib.Path:
    """The solver's parameters for the shard: the update rule, lr policy and
    the rest as this solver runs them, with no shard checkpoints (the
    processes snapshot as Caffe's do; a checkpoint would wait for a
    manifest no one writes)."""
    param = caffe_pb2.SolverParameter()
    text_format.Parse(solver._solver_prototxt(), param)
    param.snapshot = 0
    param.snapshot_after_train = False
    param.snapshot_prefix = str(directory / "shard")
    path = directory / _SOLVER_FILE
    path.write_text(text_format.MessageToString(param))
    return path


class _ServerProcess:
    """Rank 0's ps-server: started, tied to this process, stopped."""

    def __init__(self, proc: subprocess.Popen, directory: pathlib.Path, endpoint: str,
                 job_key: int) -> None:
        self.proc = proc
        self.directory = directory
        self.endpoint = endpoint
        self.job_key = job_key

    @classmethod
    def start(cls, solver: Any, directory: pathlib.Path, workers: int, timeout_s: float,
              where: str) -> "_ServerProcess":
        try:
            server = cls._launch(solver, directory, workers, timeout_s, where)
        except Exception as e:
            _publish(directory, {"error": str(e)})  # the other ranks fail now, not at their timeout
            raise
        _publish(directory, {"endpoint": server.endpoint, "job_key": server.job_key,
                             "pid": server.proc.pid})
        return server

    @classmethod
    def _launch(cls, solver: Any, directory: pathlib.Path, workers: int, timeout_s: float,
                where: str) -> "_ServerProcess":
        job_key = secrets.randbits(62) + 1
        log_path = directory / _LOG_FILE
        cmd = [str(find_program("ps-server")), "--shard", "0", "--num-servers", "1",
               "--workers", str(workers), "--bind", f"ipc://{directory / _SOCKET}",
               "--solver", str(_server_solver(solver, directory)), "--mode", "bsp",
               "--job-key", str(job_key), "--json"]
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_die_with(os.getpid()))
        deadline = time.monotonic() + timeout_s
        while True:
            endpoint = _listening(log_path)
            if endpoint:
                return cls(proc, directory, endpoint, job_key)
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
                raise RuntimeError(f"{where}: ps-server did not start (exit status "
                                   f"{proc.returncode}): {' / '.join(tail) or 'no output'}")
            time.sleep(_POLL_S)

    def stop(self, client: Any) -> None:
        """At the end of the job: the shard is asked to exit, then made to;
        the rendezvous is removed."""
        if self.proc.poll() is None and client is not None:
            with contextlib.suppress(Exception):
                client.shutdown()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def _listening(log_path: pathlib.Path) -> str | None:
    """The endpoint of the server's "listening" event, once its log has it."""
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("event") == "listening":
                    return event["endpoint"]
    return None


def _die_with(parent: int):
    """The child's last step before exec: the kernel kills it (SIGKILL) when
    the thread that started it ends, the process included, however it ends;
    if that already happened, it exits at once."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def tie() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)
    return tie
