"""What the terminal shows while a job runs: a tqdm bar (iteration of worker 0 of
max_iter, loss, last test accuracy with its iteration, images/s, ETA) on a terminal, or plain log lines,
one per display interval, when quiet or when the output is a file or a pipe (a bar's
carriage-return updates would pile up into one unreadable line there)."""
from __future__ import annotations

import sys
from typing import TextIO, Union

from .metrics import accuracy_of


class LineProgress:
    """One plain line per training display, test and notice of worker 0."""

    def __init__(self, name: str, total: int):
        self.name, self.total = name, total

    def event(self, record: dict) -> None:
        if record.get("role") != "worker" or record.get("rank") != 0:
            return
        kind, it = record.get("event"), record.get("iter")
        if kind == "train":
            print(f"[{self.name}] iter {it}/{self.total} loss {record.get('loss', 0):.4f} "
                  f"images/s {record.get('images_per_second', 0):.0f}", flush=True)
        elif kind == "test":
            acc = accuracy_of(record)
            acc_text = f"accuracy {acc:.4f} " if acc is not None else ""
            print(f"[{self.name}] test at iter {it}: {acc_text}loss {record.get('loss', 0):.4f}",
                  flush=True)
        elif kind == "snapshot":
            print(f"[{self.name}] snapshot {record.get('path')}", flush=True)

    def notice(self, text: str) -> None:
        print(f"[{self.name}] {text}", flush=True)

    def close(self) -> None:
        pass


class SilentProgress:
    """Shows nothing (the API's quiet=True); the run's results are in its folder."""

    def event(self, record: dict) -> None:
        pass

    def notice(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class BarProgress:
    """A tqdm bar on stderr; notices are written above it."""

    def __init__(self, name: str, total: int):
        from tqdm import tqdm
        self._tqdm = tqdm
        self.bar = tqdm(total=total, desc=name, unit="it", dynamic_ncols=True, file=sys.stderr)
        self.loss: float | None = None
        self.accuracy: float | None = None
        self.accuracy_iter: int | None = None
        self.images_per_second: float | None = None

    def event(self, record: dict) -> None:
        if record.get("role") != "worker" or record.get("rank") != 0:
            return
        kind = record.get("event")
        if kind == "train":
            self.loss = record.get("loss")
            self.images_per_second = record.get("images_per_second")
        elif kind == "test":
            self.accuracy, self.accuracy_iter = accuracy_of(record), record.get("iter")
        elif kind != "done":      # train events stop short of max_iter (Caffe's count)
            return
        it = record.get("iter") or 0
        if it > self.bar.n:
            self.bar.update(it - self.bar.n)
        post = {}
        if self.loss is not None:
            post["loss"] = f"{self.loss:.4f}"
        if self.accuracy is not None:
            post["acc"] = f"{self.accuracy:.4f}@{self.accuracy_iter}"
        if self.images_per_second is not None:
            post["img/s"] = f"{self.images_per_second:.0f}"
        self.bar.set_postfix(post, refresh=True)

    def notice(self, text: str) -> None:
        self._tqdm.write(text, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


Progress = Union[LineProgress, BarProgress, SilentProgress]


def make_progress(name: str, total: int, *, quiet: bool,
                  stream: TextIO | None = None) -> Progress:
    """The bar only where it can redraw in place: not quiet, and `stream` (default
    stderr, where the bar draws) is a terminal. Otherwise plain lines."""
    stream = sys.stderr if stream is None else stream
    is_terminal = getattr(stream, "isatty", lambda: False)()
    if quiet or not is_terminal:
        return LineProgress(name, total)
    return BarProgress(name, total)
