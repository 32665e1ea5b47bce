"""ps-train sweep: one job over a grid of key values and several seeds, run one
after another, then a report folder with mean and spread over the seeds.

    ps-train sweep JOB.yaml --grid consistency.mode=bsp,ssp --grid cluster.workers=2,4
                   --seeds 3 [--set key=value ...] [--out DIR] [--thresholds 0.85,0.88]

Each grid point and seed is an ordinary run folder DIR/runs/<name>-<point>-s<seed>
(seed k sets solver_overrides.random_seed = k: the initial weights and the
straggler's jitter). DIR/sweep.json lists every run with its point and seed, and
is rewritten after each run, so an interrupted sweep keeps what it finished.
DIR/report/ holds table.md and table.csv (per point: final test accuracy and
time-to-accuracy, mean and sample standard deviation over the seeds, and bytes
pushed to the servers) and curves.png (test accuracy against wall time, every
seed, one colour a point). `ps-train compare DIR` reads a sweep folder as all its
runs.
"""
from __future__ import annotations

import itertools
import json
import math
import pathlib
import re
from typing import Any, Callable

import yaml

from .compare import (SWEEP_FILE, THRESHOLDS, RunCurves, label_value, point_label, read_sweep,
                      save_figure, threshold_label, to_csv)
from .config import apply_overrides, load_yaml, parse_job
from .errors import JobError
from .metrics import accuracy_of
from .runner import Job


def parse_grid(items: list[str]) -> list[tuple[str, list[Any]]]:
    """["a.b=1,2", "c=x,y"] -> [("a.b", [1, 2]), ("c", ["x", "y"])]; values read as YAML."""
    grid: list[tuple[str, list[Any]]] = []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not raw.strip():
            raise JobError(f"--grid {item!r}: expected dotted.key=value1,value2,...")
        if any(key == k for k, _ in grid):
            raise JobError(f"--grid {key}: given twice")
        try:
            values = [yaml.safe_load(v) for v in _split_top(raw)]
        except yaml.YAMLError as e:
            raise JobError(f"--grid {key}: cannot read {raw!r}: {e}") from e
        grid.append((key, values))
    return grid


def _split_top(text: str) -> list[str]:
    """Splits at commas outside {} and []: "{mode: bsp},{mode: ssp, staleness: 2}" is two."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "{["
        depth -= ch in "}]"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _folder_part(point: dict[str, Any]) -> str:
    text = "-".join(f"{k.split('.')[-1]}{label_value(v)}" for k, v in point.items()) or "base"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def run_sweep(job_path: pathlib.Path, grid: list[tuple[str, list[Any]]], seeds: int, *,
              overrides: list[str] | None = None, out: pathlib.Path | None = None,
              thresholds: tuple[float, ...] = THRESHOLDS, timeout: float | None = None,
              say: Callable[[str], None] = print) -> pathlib.Path:
    """Runs every grid point with seeds 1..seeds; returns the sweep folder.
    Every point is validated (a dry plan) before the first run starts."""
    if seeds < 1:
        raise JobError(f"--seeds must be at least 1, got {seeds}")
    base = load_yaml(job_path)
    base = apply_overrides(base, overrides or [], str(job_path))
    if not isinstance(base, dict) or not isinstance(base.get("name"), str):
        raise JobError(f"{job_path}: name: is required")
    if out is None:  # beside the runs the job would make: <output>/<name>-sweep
        out = parse_job(base, str(job_path), job_path.resolve().parent).output / \
            f"{base['name']}-sweep"
    out = pathlib.Path(out).resolve()
    keys = [k for k, _ in grid]
    points = [dict(zip(keys, combo)) for combo in itertools.product(*[v for _, v in grid])]
    jobs = []
    for point in points:
        for seed in range(1, seeds + 1):
            data = apply_overrides(base, {**point, "solver_overrides.random_seed": seed,
                                          "output": str(out / "runs"),
                                          "name": f"{base['name']}-{_folder_part(point)}-s{seed}"},
                                   str(job_path))
            # Parsed as Job.from_yaml does: paths relative to the job file's folder.
            job = Job(parse_job(data, str(job_path), job_path.resolve().parent),
                      source=str(job_path))
            job.plan()  # every file and key checked before anything runs
            jobs.append((point, seed, job))
    entries: list[dict] = []
    for i, (point, seed, job) in enumerate(jobs):
        say(f"[sweep {i + 1}/{len(jobs)}] {point_label(point)} seed {seed}")
        result = job.run(quiet=True, overwrite=True, timeout=timeout)
        entries.append({"point": point, "seed": seed, "run_dir": str(result.run_dir),
                        "status": result.summary.get("status")})
        (out / SWEEP_FILE).write_text(json.dumps(
            {"job": str(job_path), "grid": [[k, v] for k, v in grid], "seeds": seeds,
             "runs": entries}, indent=2))
        acc = result.summary.get("final_test_accuracy")
        say(f"[sweep {i + 1}/{len(jobs)}] {result.summary.get('status')}, "
            f"final accuracy {acc if acc is not None else '-'}")
    write_report(out, thresholds)
    return out


def mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None with fewer than 1 or 2 values)."""
    if not values:
        return None, None
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, None
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def summary_rows(runs: list[tuple[dict, int, RunCurves]],
                 thresholds: tuple[float, ...] = THRESHOLDS) -> list[dict]:
    """One record per grid point (in sweep order)."""
    by_point: dict[str, list[tuple[dict, RunCurves]]] = {}
    for point, _, run in runs:
        by_point.setdefault(point_label(point), []).append((point, run))
    rows = []
    for label, group in by_point.items():
        ok = [run for _, run in group if run.summary.get("status") == "ok"]
        row: dict[str, Any] = {"point": label, "seeds": len(group), "ok": len(ok)}
        acc = mean_sd([run.summary["final_test_accuracy"] for run in ok
                       if run.summary.get("final_test_accuracy") is not None])
        row["final_acc_mean"], row["final_acc_sd"] = acc
        for a in thresholds:
            times = [run.time_to(a) for run in ok]
            reached = [t for t in times if t is not None]
            m, sd = mean_sd(reached)
            key = threshold_label(a)
            row[f"{key} mean"], row[f"{key} sd"] = m, sd
            row[f"{key} reached"] = f"{len(reached)}/{len(ok)}"
        wall = mean_sd([run.summary["wall_seconds"] for run in ok
                        if run.summary.get("wall_seconds") is not None])
        row["wall_s_mean"], row["wall_s_sd"] = wall
        pushed = mean_sd([run.summary["bytes_pushed"] for run in ok
                          if run.summary.get("bytes_pushed") is not None])
        row["bytes_pushed_mean"] = pushed[0]
        dropped = [run.summary.get("backup_dropped") or 0 for run in ok]
        row["backup_dropped_mean"] = sum(dropped) / len(dropped) if dropped else None
        rows.append(row)
    return rows


def _pm(m: float | None, sd: float | None, digits: int) -> str:
    if m is None:
        return "-"
    return f"{m:.{digits}f}" + (f" ± {sd:.{digits}f}" if sd is not None else "")


def markdown(rows: list[dict], thresholds: tuple[float, ...] = THRESHOLDS) -> str:
    head = ["point", "runs ok", "final test accuracy"] + \
        [f"{threshold_label(a)} (reached)" for a in thresholds] + ["wall s", "MB pushed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["point"], f"{r['ok']}/{r['seeds']}",
                 _pm(r["final_acc_mean"], r["final_acc_sd"], 4)]
        for a in thresholds:
            key = threshold_label(a)
            cells.append(f"{_pm(r[f'{key} mean'], r[f'{key} sd'], 1)} ({r[f'{key} reached']})")
        cells.append(_pm(r["wall_s_mean"], r["wall_s_sd"], 1))
        mb = r["bytes_pushed_mean"]
        cells.append(f"{mb / 1e6:.1f}" if mb is not None else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_sweep(runs: list[tuple[dict, int, RunCurves]], out: pathlib.Path) -> pathlib.Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    colours: dict[str, Any] = {}
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    later = []
    for point, seed, run in runs:
        label = point_label(point)
        first = label not in colours
        colours.setdefault(label, cycle[len(colours) % len(cycle)])
        xs = [r["time"] - run.start for r in run.tests]
        ys = [accuracy_of(r) for r in run.tests]
        later += [y for r, y in zip(run.tests, ys) if r.get("iter")]
        ax.plot(xs, ys, color=colours[label], marker="o", ms=3, lw=1, alpha=0.8,
                label=label if first else None)
    if later:
        ax.set_ylim(max(0.0, min(later) - 0.03), min(1.0, max(later) + 0.01))
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("test accuracy (worker 0)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    seeds = len({seed for _, seed, _ in runs})
    ax.set_title(f"ps-train sweep: {len(colours)} points x {seeds} seeds (one line a run)")
    fig.tight_layout()
    return save_figure(fig, out)


def write_report(folder: pathlib.Path, thresholds: tuple[float, ...] = THRESHOLDS) -> str:
    """Writes folder/report/{table.md,table.csv,curves.png}; returns the markdown table."""
    runs = read_sweep(folder)
    if not runs:
        raise JobError(f"{folder}: the sweep has no finished run")
    rows = summary_rows(runs, thresholds)
    report = folder / "report"
    report.mkdir(parents=True, exist_ok=True)
    text = markdown(rows, thresholds)
    (report / "table.md").write_text(text + "\n")
    (report / "table.csv").write_text(to_csv(rows))
    plot_sweep(runs, report / "curves.png")
    return text
