"""Running PSTrain processes on other hosts over OpenSSH.

Nothing is assumed shared between the hosts but the programs and the data
(at the paths the job names; remote.program_dir moves the programs). Each host
gets its own copy of the run folder, `remote.workdir` (default: the same path
as the run folder here):

  - every command runs under umask 077, as the processes ps-train starts here
    (an ssh session's umask is the host's default, often 022: the shards'
    checkpoints and the staged copies would be readable by every user there);
  - stage(): before the processes start, one `ssh HOST 'mkdir ...; tar -x'`
    per host writes the solver and net copies (their paths rewritten to that
    host's folder) and, when resuming, the checkpoint its servers restore;
  - command(): each process is one ssh session. Its stdout and stderr come back
    over the session (logs and metrics land in the run folder here). A small
    sh wrapper on the host starts the program and watches the session's stdin:
    when the session ends for any reason (ps-train stopped or killed, ssh
    killed, the connection lost) the program gets SIGTERM, and SIGKILL 5 s
    later;
  - fetch(): snapshots written on a host are copied back with `ssh HOST cat`.

The environment that decides how the CPU libraries compute (FORWARDED_ENV_PREFIXES:
OpenBLAS's core type and cache sizes, OpenMP's, oneDNN's and MKL's settings) is
passed on to every remote process, as srun passes the environment on: without
it, OpenBLAS on another host may pick another kernel, and bsp across hosts
would no longer equal bsp on one host bit for bit.

ssh runs with BatchMode=yes (never a password prompt), the user's own keys and
~/.ssh/config, and keep-alives that end a session whose host stops answering
within SERVER_ALIVE_S; remote.ssh_options come after these and override them.
"""
from __future__ import annotations

import io
import os
import pathlib
import shlex
import subprocess
import tarfile
import time

from .config import RemoteConfig
from .errors import JobError
from .hosts import Host

SERVER_ALIVE_INTERVAL_S = 5
SERVER_ALIVE_COUNT = 4
SERVER_ALIVE_S = SERVER_ALIVE_INTERVAL_S * SERVER_ALIVE_COUNT   # a silent host's session ends
CONNECT_TIMEOUT_S = 10
SSH_LOST = 255            # ssh's exit status when the connection failed or was lost

# Runs "$@" with the session's stdin watched (see the module comment); exits with
# the program's status (128+N when killed by signal N).
# (A background job's stdin is /dev/null unless redirected: the watcher reads fd 3.)
_WRAPPER = r"""
exec 3<&0
"$@" </dev/null 3<&- &
child=$!
setsid sh -c 'cat >/dev/null; kill -TERM "$1" 2>/dev/null; sleep 5; kill -KILL "$1" 2>/dev/null' \
  pstrain-watch "$child" <&3 >/dev/null 2>&1 3<&- &
exec 3<&-
watch=$!
trap 'kill -TERM "$child" 2>/dev/null' HUP INT TERM
while :; do
  wait "$child"; rc=$?
  kill -0 "$child" 2>/dev/null || break
done
kill -TERM -- "-$watch" 2>/dev/null
exit "$rc"
"""


class Remote:
    """The ssh side of one job: command lines, staging, fetching."""

    def __init__(self, config: RemoteConfig, run_dir: pathlib.Path, name: str):
        self.config = config
        self.run_dir = run_dir
        self.name = name

    def ssh_base(self, host: Host) -> list[str]:
        return [self.config.ssh, "-o", "BatchMode=yes", "-o",
                f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o",
                f"ServerAliveInterval={SERVER_ALIVE_INTERVAL_S}", "-o",
                f"ServerAliveCountMax={SERVER_ALIVE_COUNT}", "-T",
                *self.config.ssh_options, host.name]

    def workdir(self, host: Host) -> str:
        """This host's copy of the run folder (an absolute path on that host)."""
        return self.config.workdir.format(run_dir=str(self.run_dir), host=host.address,
                                          name=self.name)

    def to_host(self, text: str, host: Host) -> str:
        """`text` (a command argument, a prototxt) with the run folder's path made host's."""
        return text.replace(str(self.run_dir), self.workdir(host))

    def to_local(self, path: str, host: Host) -> str:
        """A path a process on `host` printed, as the run folder here names it."""
        remote = self.workdir(host)
        if path == remote or path.startswith(remote.rstrip("/") + "/"):
            return str(self.run_dir) + path[len(remote.rstrip("/")):]
        return path

    def program(self, local: pathlib.Path) -> str:
        if self.config.program_dir:
            return str(pathlib.Path(self.config.program_dir) / local.name)
        return str(local)

    def command(self, host: Host, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
        """The ssh command line that runs argv (a local command line) on `host`, with
        `env` and the forwarded part of this environment (forwarded_environment)."""
        args = [self.program(pathlib.Path(argv[0]))] + [self.to_host(a, host) for a in argv[1:]]
        env = {**forwarded_environment(), **(env or {})}
        prefix = ["env"] + [f"{k}={v}" for k, v in env.items()] if env else []
        line = (f"umask 077 && cd {shlex.quote(self.workdir(host))} && "
                f"exec sh -c {shlex.quote(_WRAPPER)} "
                f"pstrain-run " + shlex.join(prefix + args))
        return self.ssh_base(host) + [line]

    def run(self, host: Host, command: str, *, stdin: bytes | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(self.ssh_base(host) + [command], input=stdin,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise JobError(f"ssh {host.name}: '{command}' took over {timeout:.0f} s") from e

    def reachable(self, host: Host) -> bool:
        """Whether `ssh HOST true` succeeds (within CONNECT_TIMEOUT_S or so)."""
        try:
            return self.run(host, "true", timeout=CONNECT_TIMEOUT_S + 5).returncode == 0
        except JobError:
            return False

    def stage(self, host: Host, files: dict[str, bytes], private: set[str] = frozenset()) -> None:
        """Writes files (paths relative to the host's workdir) there, with
        snapshots/ and logs/ folders, every file owner-only (0600: tar as root
        keeps the archive's modes, whatever the umask), those in `private` (secret
        keys) in folders of mode 0700. Raises JobError naming the host."""
        buffer = io.BytesIO()
        now = int(time.time())
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for folder in sorted({str(pathlib.PurePosixPath(rel).parent) for rel in private}):
                info = tarfile.TarInfo(folder)
                info.type, info.mtime, info.mode = tarfile.DIRTYPE, now, 0o700
                tar.addfile(info)
            for rel, data in files.items():
                info = tarfile.TarInfo(rel)
                info.size, info.mtime = len(data), now
                info.mode = 0o600
                tar.addfile(info, io.BytesIO(data))
        folder = shlex.quote(self.workdir(host))
        done = self.run(host, f"umask 077 && mkdir -p {folder}/snapshots && "
                              f"tar -x -m -C {folder} -f -",
                        stdin=buffer.getvalue())
        if done.returncode != 0:
            raise JobError(f"ssh {host.name}: cannot stage the run folder {self.workdir(host)}: "
                           f"{_why(done)}")

    def fetch(self, host: Host, path: str) -> bytes:
        """The bytes of `path` on `host`. Raises JobError naming host and path."""
        done = self.run(host, f"cat -- {shlex.quote(path)}")
        if done.returncode != 0:
            raise JobError(f"ssh {host.name}: cannot read {path}: {_why(done)}")
        return done.stdout


# Environment variables that change what the CPU libraries compute or how.
FORWARDED_ENV_PREFIXES = ("OPENBLAS_", "OMP_", "GOMP_", "ONEDNN_", "DNNL_", "MKL_")


def forwarded_environment() -> dict[str, str]:
    """This process's variables that remote processes get too (FORWARDED_ENV_PREFIXES)."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(FORWARDED_ENV_PREFIXES)}


def _why(done: subprocess.CompletedProcess) -> str:
    text = (done.stderr or b"").decode(errors="replace").strip()
    if done.returncode == SSH_LOST:
        return f"ssh failed ({text or 'exit 255'})"
    return text or f"exit {done.returncode}"
