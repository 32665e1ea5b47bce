"""The launchers by the `cluster.hosts` name that selects them (launch.py's
interface). A new launcher is registered here with one entry."""
from __future__ import annotations

from .errors import JobError
from .hostrun import HostLauncher
from .launch import Launcher
from .localrun import LocalLauncher
from .slurm import SlurmLauncher

LAUNCHERS: dict[str, type[Launcher]] = {
    launcher.name: launcher for launcher in (LocalLauncher, HostLauncher, SlurmLauncher)}


def launcher_for(hosts: str) -> type[Launcher]:
    """The launcher of cluster.hosts `hosts`; JobError for a name none has."""
    try:
        return LAUNCHERS[hosts]
    except KeyError:
        raise JobError(f"cluster.hosts: no launcher is named {hosts!r} (known: "
                       f"{', '.join(LAUNCHERS)})") from None
