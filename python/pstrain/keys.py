"""CURVE key pairs for a job: one per process, written into the run folder's
keys/ (mode 0700), each secret key readable by its owner only (0600).

    keys/control.key, control.pub        the orchestrator (STATS, SHUTDOWN)
    keys/server-K.key, server-K.pub      server shard K
    keys/worker-R.key, worker-R.pub      worker rank R

Keys are ZeroMQ's 40-character Z85 text, one line a file, made by libzmq's
zmq_curve_keypair (libsodium underneath) through ctypes: no extra Python
dependency. The programs get the folder (--keys DIR), never a key: nothing
secret appears on a command line. common/transport/curve.hpp reads them.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import pathlib

from .errors import JobError

_LIBZMQ: ctypes.CDLL | None = None


def _libzmq() -> ctypes.CDLL:
    global _LIBZMQ
    if _LIBZMQ is None:
        name = ctypes.util.find_library("zmq") or "libzmq.so.5"
        try:
            _LIBZMQ = ctypes.CDLL(name)
        except OSError as e:
            raise JobError(f"security: curve needs libzmq ({name}): {e}") from e
    return _LIBZMQ


def keypair() -> tuple[str, str]:
    """A new (public, secret) CURVE key pair, each 40 Z85 characters."""
    public, secret = ctypes.create_string_buffer(41), ctypes.create_string_buffer(41)
    if _libzmq().zmq_curve_keypair(public, secret) != 0:
        raise JobError("security: curve: libzmq cannot make CURVE keys (built without "
                       "libsodium?); use security: none on one machine")
    return public.value.decode(), secret.value.decode()


def peer_names(servers: int, workers: int) -> list[str]:
    return (["control"] + [f"server-{k}" for k in range(servers)] +
            [f"worker-{r}" for r in range(workers)])


def _write(path: pathlib.Path, text: str) -> None:
    """Writes a file readable by its owner only, whatever the umask."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")


def make_keys(folder: pathlib.Path, servers: int, workers: int) -> pathlib.Path:
    """Writes a fresh key pair for every process of the job into `folder`
    (created mode 0700; key files of an earlier run there are replaced)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    for old in list(folder.glob("*.key")) + list(folder.glob("*.pub")):
        old.unlink()
    for name in peer_names(servers, workers):
        public, secret = keypair()
        _write(folder / f"{name}.key", secret)
        _write(folder / f"{name}.pub", public)
    return folder


def read_pair(folder: pathlib.Path, name: str) -> tuple[str, str]:
    """(public, secret) of `name` ("control", "worker-1") in a keys folder."""
    return ((folder / f"{name}.pub").read_text().strip(),
            (folder / f"{name}.key").read_text().strip())
