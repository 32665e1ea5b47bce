"""ps-train compare: overlays runs (test accuracy and every worker's training loss
against wall time and against samples seen) and tabulates time-to-accuracy and
staleness. The iteration-0 test (the untrained net) is a marker of its own, not
the start of the accuracy line, so the axis fits the trained part."""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import pathlib
from typing import Any

from .errors import JobError
from .metrics import accuracy_of, read_records, run_span

THRESHOLDS = (0.85, 0.88)  # the default: Fashion-MNIST LeNet's good and very good
SWEEP_FILE = "sweep.json"  # a sweep folder's list of runs (sweep.py writes it)


@dataclasses.dataclass
class RunCurves:
    label: str
    summary: dict
    start: float                            # the run's start (metrics.run_span): times are >= 0
    samples_per_iter: int
    tests: list[dict]
    train: list[dict]                       # worker 0's
    train_by_rank: dict[int, list[dict]] = dataclasses.field(default_factory=dict)
    wall_seconds: float | None = None       # the whole run's, every part of a resumed one

    def __post_init__(self) -> None:
        if self.wall_seconds is None:
            self.wall_seconds = self.summary.get("wall_seconds")

    def time_to(self, accuracy: float) -> float | None:
        for r in self.tests:
            if (accuracy_of(r) or 0) >= accuracy:
                return r["time"] - self.start
        return None


def load_run(run_dir: pathlib.Path) -> RunCurves:
    summary_path = run_dir / "summary.json"
    if not summary_path.exists():
        raise JobError(f"{run_dir}: not a finished run folder (no summary.json)")
    summary = json.loads(summary_path.read_text())
    records = read_records(run_dir / "metrics.jsonl")
    w0 = [r for r in records if r.get("role") == "worker" and r.get("rank") == 0]
    by_rank: dict[int, list[dict]] = {}
    for r in records:
        if (r.get("role") == "worker" and r.get("event") == "train"
                and r.get("loss") is not None and isinstance(r.get("rank"), int)):
            by_rank.setdefault(r["rank"], []).append(r)
    start, end = run_span(records, summary)
    per_iter = (summary.get("workers") or 1) * (summary.get("batch_per_worker") or 1)
    label = summary.get("name") or run_dir.name
    return RunCurves(label=label, summary=summary, start=start, samples_per_iter=per_iter,
                     tests=[r for r in w0 if r.get("event") == "test" and accuracy_of(r) is not None],
                     train=[r for r in w0 if r.get("event") == "train" and r.get("loss") is not None],
                     train_by_rank=dict(sorted(by_rank.items())),
                     wall_seconds=round(end - start, 3))


def read_sweep(folder: pathlib.Path) -> list[tuple[dict, int, RunCurves]]:
    """The runs of a sweep folder (sweep.py): (grid point, seed, curves) each."""
    path = folder / SWEEP_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise JobError(f"{folder}: not a sweep folder ({SWEEP_FILE}: {e})") from e
    runs = []
    for entry in data.get("runs", []):
        run_dir = pathlib.Path(entry["run_dir"])
        if not run_dir.is_absolute():
            run_dir = folder / run_dir
        runs.append((entry["point"], int(entry["seed"]), load_run(run_dir)))
    return runs


def is_sweep(folder: pathlib.Path) -> bool:
    return (pathlib.Path(folder) / SWEEP_FILE).is_file()


def point_label(point: dict[str, Any]) -> str:
    """{"consistency.mode": "bsp", "cluster.workers": 4} -> "mode=bsp,workers=4"."""
    return ",".join(f"{k.split('.')[-1]}={label_value(v)}" for k, v in point.items()) or "base"


def label_value(v: Any) -> str:
    """A value in a label: a mapping as its values joined ("{mode: ssp, staleness: 2}": ssp/2)."""
    if isinstance(v, dict):
        return "/".join(f"{k}:{label_value(x)}" if not isinstance(x, str) else x
                        for k, x in v.items())
    return str(v)


def final_accuracy(summary: dict) -> str:
    """The final test accuracy and its iteration ("0.8495 @500"), or "-"."""
    acc = summary.get("final_test_accuracy")
    if acc is None:
        return "-"
    it = summary.get("final_test_iteration")
    return f"{acc:.4f} @{it}" if it is not None else f"{acc:.4f}"


def threshold_label(accuracy: float) -> str:
    """The column of a threshold: "t(85%) s", "t(87.5%) s"."""
    return f"t({accuracy * 100:g}%) s"


def parse_thresholds(text: str) -> tuple[float, ...]:
    """"0.85,0.88" -> (0.85, 0.88); JobError unless each is a fraction in (0, 1]."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise JobError(f"--thresholds {text!r}: give fractions, e.g. 0.85,0.88") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise JobError(f"--thresholds {text!r}: each must be an accuracy in (0, 1]")
    return values


def rows(runs: list[RunCurves], thresholds: tuple[float, ...] = THRESHOLDS) -> list[dict]:
    """The table as records: numbers stay numbers (None where there is none);
    time-to-accuracy under threshold_label's keys, in wall seconds."""
    out = []
    for run in runs:
        s = run.summary
        row = {"run": run.label, "mode": s.get("mode"),
               "staleness": "inf" if s.get("mode") == "asp" else s.get("staleness"),
               "workers": s.get("workers"), "iterations": s.get("iterations"),
               "wall_seconds": run.wall_seconds,
               "images_per_second": s.get("images_per_second")}
        for a in thresholds:
            v = run.time_to(a)
            row[threshold_label(a)] = round(v, 3) if v is not None else None
        row.update({"final_test_accuracy": s.get("final_test_accuracy"),
                    "final_test_iteration": s.get("final_test_iteration"),
                    "staleness_max": s.get("staleness_max")})
        out.append(row)
    return out


def table(runs: list[RunCurves], thresholds: tuple[float, ...] = THRESHOLDS) -> str:
    def t(v: float | None) -> str:
        return f"{v:.1f}" if v is not None else "-"

    head = ["run", "mode", "s", "workers", "iters", "wall s", "img/s"] + \
        [threshold_label(a) for a in thresholds] + ["final acc @iter", "max gap"]
    rows = [head]
    for run in runs:
        s = run.summary
        rows.append([run.label, str(s.get("mode")),
                     "inf" if s.get("mode") == "asp" else str(s.get("staleness")),
                     str(s.get("workers")), str(s.get("iterations")), t(run.wall_seconds),
                     t(s.get("images_per_second"))] + [t(run.time_to(a)) for a in thresholds] +
                    [final_accuracy(s), str(s.get("staleness_max"))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


def histograms(runs: list[RunCurves]) -> str:
    lines = ["staleness histograms (gradients applied with staleness k = 0, 1, 2, ...; server 0):"]
    for run in runs:
        h = run.summary.get("staleness_histogram")
        if not h:
            lines.append(f"  {run.label}: not available")
            continue
        total = sum(h) or 1
        parts = ", ".join(f"{k}: {n} ({100 * n / total:.0f}%)" for k, n in enumerate(h) if n)
        lines.append(f"  {run.label}: {parts}")
    return "\n".join(lines)


def title(runs: list[RunCurves]) -> str:
    """The figure's title: the runs compared, each with its mode and workers."""
    parts = []
    for run in runs:
        s = run.summary
        mode = s.get("mode")
        if mode == "ssp":
            mode = f"ssp s={s.get('staleness')}"
        parts.append(f"{run.label} ({mode}, {s.get('workers')} workers)")
    return "ps-train compare: " + " vs ".join(parts)


def figure_of(runs: list[RunCurves]) -> "Any":
    """The overlay figure (matplotlib, Agg): accuracy and loss against wall time
    (left) and samples (right)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    later = [accuracy_of(r) or 0 for run in runs for r in run.tests if r.get("iter")]
    low = max(0.0, min(later) - 0.03) if later else None
    for index, run in enumerate(runs):
        colour = f"C{index % 10}"
        trained = [r for r in run.tests if r.get("iter")]
        untrained = [r for r in run.tests if not r.get("iter")]
        for col, x_of in enumerate([lambda r: r["time"] - run.start,
                                    lambda r: r["iter"] * run.samples_per_iter]):
            ax = axes[0][col]
            ax.plot([x_of(r) for r in trained], [accuracy_of(r) for r in trained],
                    marker="o", ms=3, color=colour, label=run.label)
            for r in untrained:  # a marker of its own; named when below the axis
                a = accuracy_of(r) or 0.0
                if low is not None and a < low:
                    ax.plot([x_of(r)], [low], marker="v", ms=6, color=colour, ls="none",
                            clip_on=False)
                    ax.annotate(f"{run.label} @0: {a:.3f}", xy=(x_of(r), low),
                                xytext=(4, 4 + 10 * index), textcoords="offset points",
                                fontsize=7, color=colour)
                else:
                    ax.plot([x_of(r)], [a], marker="x", ms=5, color=colour, ls="none")
            for rank, train in run.train_by_rank.items():
                axes[1][col].plot([x_of(r) for r in train], [r["loss"] for r in train],
                                  lw=1 if rank == 0 else 0.7, ls="-" if rank == 0 else "--",
                                  alpha=1.0 if rank == 0 else 0.6, color=colour,
                                  label=run.label if rank == 0 else f"{run.label} worker {rank}")
    if low is not None:  # zoom past the untrained first test
        for col in range(2):
            axes[0][col].set_ylim(low, min(1.0, max(later) + 0.01))
    for row, ylabel in enumerate(["test accuracy", "training loss (every worker)"]):
        for col, xlabel in enumerate(["wall time (s)", "samples (iter x workers x batch)"]):
            ax = axes[row][col]
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(title(runs))
    fig.tight_layout()
    return fig


def save_figure(fig, out: pathlib.Path) -> pathlib.Path:
    """Writes `fig` to `out` (100 dpi, folders made) and closes it; returns `out`."""
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot(runs: list[RunCurves], out: pathlib.Path) -> pathlib.Path:
    return save_figure(figure_of(runs), out)


def to_csv(records: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(records[0]) if records else [],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return buffer.getvalue()


def compare(run_dirs: list[str | pathlib.Path], out: str | pathlib.Path,
            thresholds: tuple[float, ...] = THRESHOLDS, fmt: str = "text") -> str:
    """Writes the overlay PNG to `out`; returns the table: as text with the
    staleness histograms (fmt "text"), or as CSV or JSON (fmt "csv", "json";
    the table alone, one row a run)."""
    runs: list[RunCurves] = []
    for d in run_dirs:
        d = pathlib.Path(d)
        if is_sweep(d):  # a sweep folder: all its runs, labelled by point
            for point, seed, run in read_sweep(d):
                run.label = f"{point_label(point)} s{seed}"
                runs.append(run)
        else:
            runs.append(load_run(d))
    out = pathlib.Path(out)
    plot(runs, out)
    if fmt == "csv":
        return to_csv(rows(runs, thresholds))
    if fmt == "json":
        return json.dumps(rows(runs, thresholds), indent=2)
    return f"{table(runs, thresholds)}\n\n{histograms(runs)}\n\nfigure: {out}"
