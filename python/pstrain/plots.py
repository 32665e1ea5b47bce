"""The run's figure: training loss and test accuracy against iterations and wall time."""
from __future__ import annotations

import pathlib

from .metrics import accuracy_of


def plot_run(records: list[dict], out: pathlib.Path, title: str) -> pathlib.Path | None:
    """Writes out (PNG, matplotlib Agg); None when there is nothing to plot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w0 = [r for r in records if r.get("role") == "worker" and r.get("rank") == 0]
    train = [r for r in w0 if r.get("event") == "train" and r.get("loss") is not None]
    tests = [r for r in w0 if r.get("event") == "test" and accuracy_of(r) is not None]
    if not train and not tests:
        return None
    start = min(r["time"] for r in records)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for col, (label, x_of) in enumerate([("iteration", lambda r: r["iter"]),
                                         ("wall time (s)", lambda r: r["time"] - start)]):
        ax = axes[0][col]
        ax.plot([x_of(r) for r in train], [r["loss"] for r in train], lw=1)
        ax.set_xlabel(label)
        ax.set_ylabel("training loss (worker 0)")
        ax.grid(alpha=0.3)
        ax = axes[1][col]
        ax.plot([x_of(r) for r in tests], [accuracy_of(r) for r in tests], marker="o", ms=3)
        ax.set_xlabel(label)
        ax.set_ylabel("test accuracy")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
