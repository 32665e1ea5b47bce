"""A Ctrl-C that a long wait never loses.

Python raises KeyboardInterrupt wherever the main thread happens to run Python
code when the signal's handler runs, and one raised inside a finalizer (a
`__del__`, a weakref callback: garbage collection runs them at any allocation)
is printed as "Exception ignored" and dropped. A DistributedSolver's driver
waits in a loop for seconds at a time, creating objects as it goes, so a
Ctrl-C could be dropped that way and the step run to its end. InterruptLatch
puts in a handler that also sets a flag, and the wait loop's `check()` raises
KeyboardInterrupt from the flag.
"""
from __future__ import annotations

import signal
import threading
from typing import Any


class InterruptLatch:
    """`with InterruptLatch() as latch:` ... `latch.check()` in the loop. Takes
    SIGINT over only on the main thread and only from Python's default handler
    (a script's own handler stays); the previous handler is back on exit."""

    def __init__(self) -> None:
        self.hit = False
        self._previous: Any = None

    def __enter__(self) -> "InterruptLatch":
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.hit = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raises KeyboardInterrupt when a Ctrl-C came since the last check."""
        if self.hit:
            self.hit = False
            raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> bool:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        return False
