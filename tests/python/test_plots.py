"""The run's figure from synthetic metrics records: its panels, one line a
worker, and an accuracy axis fitted to the tests after iteration 0."""
from __future__ import annotations

import pytest

from pstrain.compare import RunCurves, figure_of as compare_figure, parse_thresholds, \
    threshold_label
from pstrain.errors import JobError
from pstrain.plots import PANELS, figure_of, plot_run


def synthetic(workers: int = 3) -> list[dict]:
    recs = []
    for it in range(0, 100, 10):
        for w in range(workers):
            recs.append({"time": 1000.0 + it + w * 0.1, "role": "worker", "rank": w, "iter": it,
                         "event": "train", "loss": 2.0 / (1 + it) + w, "lr": 0.01 * 0.9 ** it,
                         "images_per_second": 500.0 + w, "staleness": w % 2})
    for it, acc in ((0, 0.08), (50, 0.80), (100, 0.85)):
        recs.append({"time": 1000.0 + it, "role": "worker", "rank": 0, "iter": it,
                     "event": "test", "accuracy": acc, "loss": 1.0})
    recs.append({"time": 1101.0, "role": "server", "rank": 0, "iter": None, "event": "done",
                 "staleness_histogram": [100, 50, 20]})
    return recs


def test_figure_has_a_panel_for_each_question():
    import matplotlib.pyplot as plt
    fig = figure_of(synthetic(), "t")
    axes = dict(zip(PANELS, fig.axes))
    assert len(fig.axes) == len(PANELS) == 8
    for name in ("loss_iter", "loss_time", "throughput", "staleness_workers"):
        assert len(axes[name].get_lines()) == 3, name          # one line a worker
    assert len(axes["lr"].get_lines()) == 1
    assert len(axes["staleness_histogram"].patches) == 3       # one bar per k
    assert "images/s" in axes["throughput"].get_ylabel()
    assert "learning rate" in axes["lr"].get_ylabel()
    plt.close(fig)


def test_accuracy_axis_fits_the_trained_tests():
    import matplotlib.pyplot as plt
    fig = figure_of(synthetic(), "t")
    for name in ("accuracy_iter", "accuracy_time"):
        ax = dict(zip(PANELS, fig.axes))[name]
        lo, hi = ax.get_ylim()
        assert 0.08 < lo < 0.80 and 0.85 < hi <= 1.0
        line = ax.get_lines()[0]
        # The line holds the trained tests only: no near-vertical segment from the
        # untrained iteration-0 test below the axis; that one is noted instead.
        assert line.get_marker() == "o" and list(line.get_ydata()) == [0.80, 0.85]
        assert all(lo <= y <= hi for l in ax.get_lines() for y in l.get_ydata())
        assert any("iteration 0: 0.080" in t.get_text() for t in ax.texts)
    plt.close(fig)


def test_only_the_iteration_0_test_keeps_the_default_axis(tmp_path):
    recs = [r for r in synthetic(1) if r["event"] != "test" or r["iter"] == 0]
    fig = figure_of(recs, "t")
    ax = dict(zip(PANELS, fig.axes))["accuracy_iter"]
    lo, hi = ax.get_ylim()
    assert lo <= 0.08 <= hi
    assert plot_run(recs, tmp_path / "p.png", "t").stat().st_size > 1000
    assert plot_run([], tmp_path / "none.png", "t") is None


def test_thresholds_parse():
    assert parse_thresholds("0.85,0.88") == (0.85, 0.88)
    assert threshold_label(0.875) == "t(87.5%) s" and threshold_label(0.85) == "t(85%) s"
    for bad in ("", "x", "1.5", "0"):
        with pytest.raises(JobError):
            parse_thresholds(bad)


def test_compare_overlays_every_workers_loss_and_keeps_iteration_0_off_the_line():
    import matplotlib.pyplot as plt
    runs = []
    for label, workers in (("a", 3), ("b", 2)):
        recs = synthetic(workers)
        by_rank = {}
        for r in recs:
            if r["event"] == "train":
                by_rank.setdefault(r["rank"], []).append(r)
        runs.append(RunCurves(label=label, summary={"mode": "ssp", "staleness": 2,
                                                    "workers": workers},
                              start=1000.0, samples_per_iter=64,
                              tests=[r for r in recs if r["event"] == "test"],
                              train=by_rank[0], train_by_rank=by_rank))
    fig = compare_figure(runs)
    (acc_time, acc_samples), (loss_time, loss_samples) = fig.axes[:2], fig.axes[2:]
    for ax in (loss_time, loss_samples):
        labels = [l.get_label() for l in ax.get_lines()]
        assert labels == ["a", "a worker 1", "a worker 2", "b", "b worker 1"]
    for ax in (acc_time, acc_samples):
        lo, hi = ax.get_ylim()
        assert 0.08 < lo and all(lo <= y <= hi for l in ax.get_lines() for y in l.get_ydata())
        assert sum("@0: 0.080" in t.get_text() for t in ax.texts) == 2
    plt.close(fig)


def resumed_run(folder) -> None:
    """A run folder as a resumed run leaves it: metrics.jsonl holds both parts (the
    second began 140 s after the first ended), summary.json the second part's
    started_at and wall_seconds."""
    import json
    part1 = [(1000.0, 0, 0.10), (1020.0, 20, 0.86), (1040.0, 40, 0.89)]
    part2 = [(1200.0, 40, 0.89), (1240.0, 60, 0.91)]
    recs = []
    for t, it, acc in part1 + part2:
        recs.append({"time": t, "role": "worker", "rank": 0, "iter": it, "event": "test",
                     "accuracy": acc, "loss": 1.0})
        recs.append({"time": t + 0.5, "role": "worker", "rank": 0, "iter": it, "event": "train",
                     "loss": 1.0 / (1 + it)})
    folder.mkdir()
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (folder / "summary.json").write_text(json.dumps({
        "name": "resumed", "status": "ok", "mode": "ssp", "staleness": 2, "workers": 2,
        "batch_per_worker": 64, "iterations": 60, "start_iteration": 40,
        "started_at": 1195.0, "wall_seconds": 50.0, "final_test_accuracy": 0.91,
        "final_test_iteration": 60, "staleness_max": 2}))


def test_compare_counts_a_resumed_run_from_its_first_part(tmp_path):
    import json
    import matplotlib.pyplot as plt
    from pstrain.compare import compare, load_run
    resumed_run(tmp_path / "resumed")
    run = load_run(tmp_path / "resumed")
    assert run.time_to(0.85) == 20.0 and run.time_to(0.9) == 240.0
    row = json.loads(compare([tmp_path / "resumed"], tmp_path / "c.png", (0.85, 0.9),
                             "json"))[0]
    assert row["t(85%) s"] == 20.0 and row["t(90%) s"] == 240.0
    assert row["wall_seconds"] == 245.0           # the whole run, every part of it
    fig = compare_figure([run])
    for ax in (fig.axes[0], fig.axes[2]):         # accuracy and loss against wall time
        xs = [x for line in ax.get_lines() for x in line.get_xdata()]
        assert xs and min(xs) >= 0, xs
        assert ax.get_xlim()[0] >= -0.06 * max(xs)   # only matplotlib's margin below 0
    plt.close(fig)


def test_a_negative_staleness_is_explained_on_its_panel():
    """ssp/asp: a worker behind the others reads weights whose version (the
    workers' mean progress) is past its own iteration: staleness -1, which the
    panel explains where it shows it."""
    import matplotlib.pyplot as plt
    recs = synthetic(2)
    for r in recs:
        if r["event"] == "train" and r["rank"] == 0:
            r["staleness"] = -1
    ax = dict(zip(PANELS, figure_of(recs, "t").axes))["staleness_workers"]
    assert ax.get_title().startswith("< 0: behind the others"), ax.get_title()
    plt.close("all")
    ax = dict(zip(PANELS, figure_of(synthetic(2), "t").axes))["staleness_workers"]
    assert not ax.get_title()                     # nothing to explain without one
    plt.close("all")
