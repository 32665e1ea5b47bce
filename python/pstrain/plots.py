"""The run's figure, one panel a question: training loss per worker and test
accuracy (against iterations and wall time), throughput per worker, learning
rate, and staleness (the server's histogram and each worker's iteration minus the
model version it read; below 0 when the worker is behind the others)."""
from __future__ import annotations

import pathlib
from typing import Any, Callable

from .metrics import accuracy_of

# The panels of figure_of, in order (row by row, two a row).
PANELS = ("loss_iter", "loss_time", "accuracy_iter", "accuracy_time",
          "throughput", "lr", "staleness_histogram", "staleness_workers")


def _workers(records: list[dict], event: str, key: str) -> dict[int, list[dict]]:
    """Each worker's records of one event that carry a number under key, by rank."""
    out: dict[int, list[dict]] = {}
    for r in records:
        if (r.get("role") == "worker" and r.get("event") == event
                and isinstance(r.get(key), (int, float))):
            out.setdefault(r.get("rank"), []).append(r)
    return dict(sorted(out.items()))


def accuracy_limits(accuracies: list[tuple[int, float]]) -> tuple[float, float] | None:
    """The accuracy axis fitted to the tests after iteration 0 (the untrained
    first test would squash the rest into a line); None with no such test."""
    later = [a for it, a in accuracies if it > 0]
    if not later:
        return None
    lo, hi = min(later), max(later)
    pad = max(0.01, 0.1 * (hi - lo))
    return max(0.0, lo - pad), min(1.0, hi + pad)


def _per_worker(ax: Any, by_rank: dict[int, list[dict]], x_of: Callable[[dict], float],
                key: str, **style: Any) -> None:
    for rank, rs in by_rank.items():
        ax.plot([x_of(r) for r in rs], [r[key] for r in rs], label=f"worker {rank}", **style)
    if len(by_rank) > 1:
        ax.legend(fontsize=7)


def _accuracy(ax: Any, tests: list[dict], x_of: Callable[[dict], float]) -> None:
    """The tests after iteration 0 as a line; the iteration-0 test (the untrained net)
    as a marker of its own, or a note where it lies below the fitted axis, never as
    the start of the line (which would be a near-vertical segment off the axis)."""
    points = [(r.get("iter") or 0, accuracy_of(r)) for r in tests]
    limits = accuracy_limits(points)
    trained = [(x_of(r), a) for r, (it, a) in zip(tests, points) if it > 0]
    first = [(x_of(r), a) for r, (it, a) in zip(tests, points) if it == 0]
    if limits is None:  # only the iteration-0 test
        ax.plot([x for x, _ in first], [a for _, a in first], marker="o", ms=4, ls="none")
        return
    ax.plot([x for x, _ in trained], [a for _, a in trained], marker="o", ms=4)
    ax.set_ylim(*limits)
    if first and first[0][1] < limits[0]:  # below the axis: a mark at its foot and the value
        ax.plot([first[0][0]], [limits[0]], marker="v", ms=6, color="C3", ls="none",
                clip_on=False)
        ax.set_ylim(*limits)
        ax.annotate(f"iteration 0: {first[0][1]:.3f}", xy=(first[0][0], limits[0]),
                    xytext=(4, 4), textcoords="offset points", fontsize=7, color="C3")
    elif first:
        ax.plot([first[0][0]], [first[0][1]], marker="x", ms=5, color="C0", ls="none")


def _staleness_histogram(ax: Any, records: list[dict]) -> None:
    histogram = next((r["staleness_histogram"] for r in records
                      if r.get("role") == "server" and r.get("event") == "done"
                      and r.get("rank") == 0 and r.get("staleness_histogram")), None)
    ax.set_xlabel("staleness k (server 0)")
    ax.set_ylabel("gradients applied")
    if histogram:
        ax.bar(range(len(histogram)), histogram, color="C2")
        ax.set_xticks(range(len(histogram)))
    else:
        ax.text(0.5, 0.5, "no histogram (server did not finish)", ha="center",
                transform=ax.transAxes, fontsize=8)


# A worker's `staleness` is its iteration minus the version (global steps: all
# workers' pushes / W, their mean progress) of the weights it read. Below 0 the
# worker is behind the others, not an error (docs/config-reference.md, metrics.jsonl).
STALENESS_NOTE = "< 0: behind the others (its weights hold more steps than its iterations)"


def _staleness_workers(ax: Any, by_rank: dict[int, list[dict]]) -> None:
    _per_worker(ax, by_rank, lambda r: r["iter"], "staleness", marker=".", lw=1,
                drawstyle="steps-post")
    ax.set(xlabel="iteration", ylabel="staleness (iter - model version)")
    if any(r["staleness"] < 0 for rs in by_rank.values() for r in rs):
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_title(STALENESS_NOTE, fontsize=8, color="0.3")


def figure_of(records: list[dict], title: str) -> Any:
    """The run's matplotlib Figure (axes in PANELS order), or None when there is
    nothing to plot. The caller closes it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    train = _workers(records, "train", "loss")
    tests = [r for r in records if r.get("role") == "worker" and r.get("rank") == 0
             and r.get("event") == "test" and accuracy_of(r) is not None]
    if not train and not tests:
        return None
    start = min(r["time"] for r in records)
    fig, grid = plt.subplots(4, 2, figsize=(12, 14))
    axes = dict(zip(PANELS, grid.flat))
    x_axes = [("iteration", lambda r: r["iter"]), ("wall time (s)", lambda r: r["time"] - start)]
    for (xlabel, x_of), suffix in zip(x_axes, ("iter", "time")):
        ax = axes[f"loss_{suffix}"]
        _per_worker(ax, train, x_of, "loss", lw=1)
        ax.set(xlabel=xlabel, ylabel="training loss (smoothed)")
        ax = axes[f"accuracy_{suffix}"]
        _accuracy(ax, tests, x_of)
        ax.set(xlabel=xlabel, ylabel="test accuracy (worker 0)")
    _per_worker(axes["throughput"], _workers(records, "train", "images_per_second"),
                lambda r: r["iter"], "images_per_second", marker=".", lw=1)
    axes["throughput"].set(xlabel="iteration", ylabel="images/s per worker")
    lr = next(iter(_workers(records, "train", "lr").values()), [])
    axes["lr"].plot([r["iter"] for r in lr], [r["lr"] for r in lr], marker=".", lw=1)
    axes["lr"].set(xlabel="iteration", ylabel="learning rate (worker 0)")
    _staleness_histogram(axes["staleness_histogram"], records)
    _staleness_workers(axes["staleness_workers"], _workers(records, "train", "staleness"))
    axes["staleness_workers"].yaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes.values():
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_run(records: list[dict], out: pathlib.Path, title: str) -> pathlib.Path | None:
    """Writes out (PNG, matplotlib Agg); None when there is nothing to plot."""
    fig = figure_of(records, title)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
