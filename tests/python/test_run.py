"""Jobs end to end on Fashion-MNIST: the Python API and its run folder, a killed
worker that is restarted, Ctrl-C that leaves nothing running, and compare."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from ps_train_util import (ROOT, base_job, leftover_processes, records, run_killing_worker,
                           wait_for, write_job)
from pstrain import (ClusterConfig, ConsistencyConfig, Job, JobConfig, compare, start_server,
                     start_worker)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, fashion_mnist):
    """A 60-iteration job (1 server, 2 workers, ssp) built in code and run."""
    tmp = tmp_path_factory.mktemp("api")
    config = JobConfig(
        name="tiny", solver=ROOT / "configs/nets/lenet_solver.prototxt",
        solver_overrides={"max_iter": 60, "test_interval": 30, "test_iter": 10, "snapshot": 30,
                          "display": 10},
        cluster=ClusterConfig(servers=1, workers=2),
        consistency=ConsistencyConfig(mode="ssp", staleness=2), output=tmp / "runs")
    result = Job(config).run(quiet=True, timeout=240)
    assert not leftover_processes(str(result.run_dir))
    return result


def test_api_run_folder(tiny_run):
    r = tiny_run
    s = r.summary
    assert r.ok, s
    assert s["status"] == "ok" and s["mode"] == "ssp" and s["staleness"] == 2
    assert s["workers"] == 2 and s["servers"] == 1 and s["iterations"] == 60
    assert s["wall_seconds"] > 0 and s["images_per_second"] > 0
    assert 0.3 < s["final_test_accuracy"] <= 1 and s["final_test_loss"] > 0
    assert s["final_test_iteration"] == 60 and s["start_iteration"] == 0
    assert 0 <= s["staleness_max"] <= 3            # the clock gap never exceeds s + 1
    assert sum(s["staleness_histogram"]) == 120    # 60 iterations x 2 workers
    assert s["worker_restarts"] == 0
    assert r.snapshot == r.run_dir / "snapshots" / "tiny_iter_60.caffemodel"
    assert r.snapshot.exists() and s["snapshot"] == str(r.snapshot)
    assert pathlib.Path(s["deploy_prototxt"]).exists()
    assert (r.run_dir / "snapshots" / "tiny_iter_30.manifest").exists()
    assert (r.run_dir / "plots" / "training.png").stat().st_size > 1000
    for log in ("server-0", "worker-0", "worker-1"):
        assert (r.run_dir / "logs" / f"{log}.log").stat().st_size > 0
    assert json.loads((r.run_dir / "summary.json").read_text()) == s
    assert "name: tiny" in (r.run_dir / "job.resolved.yaml").read_text()
    solver = (r.run_dir / "solver.prototxt").read_text()
    assert f'snapshot_prefix: "{r.run_dir}/snapshots/tiny"' in solver
    assert "max_iter: 60" in solver


def test_metrics_records(tiny_run):
    lines = (tiny_run.run_dir / "metrics.jsonl").read_text().splitlines()
    recs = [json.loads(l) for l in lines]
    assert recs == tiny_run.metrics
    for rec in recs:
        assert {"time", "role", "rank", "iter", "event"} <= rec.keys()
        assert abs(rec["time"] - time.time()) < 3600
    # Caffe's display: iteration i (0-based) when i % display == 0, its loss
    # smoothed over average_loss; both rates, as ps-net train reports them.
    train = [r for r in recs if r["event"] == "train"]
    assert {(r["rank"], r["iter"]) for r in train} == {(w, i) for w in (0, 1)
                                                      for i in range(0, 60, 10)}
    assert all(r["loss"] > 0 and r["images_per_second"] > 0 and "staleness" in r
               and r["bytes_sent"] > 0 and r["lr"] > 0 for r in train)
    for r in train:
        assert abs(r["images_per_second"] - r["iters_per_second"] * 64) < 1e-6 * r["images_per_second"]
    tests = [r for r in recs if r["event"] == "test"]
    assert [t["iter"] for t in tests] == [0, 30, 60]
    assert all("accuracy" in t for t in tests)
    assert any(r["role"] == "server" and r["event"] == "done" for r in recs)


def test_compare_writes_png(tiny_run, tmp_path, capsys):
    from pstrain.cli import main
    out = tmp_path / "cmp.png"
    assert main(["compare", str(tiny_run.run_dir), str(tiny_run.run_dir), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert out.stat().st_size > 1000
    assert "t(85%) s" in text and "t(88%) s" in text and "final acc @iter" in text
    assert f"{tiny_run.summary['final_test_accuracy']:.4f} @60" in text
    assert "staleness histograms" in text and "tiny" in text
    assert "figure:" in compare([tiny_run.run_dir], tmp_path / "one.png")


def test_compare_csv_and_json_with_thresholds(tiny_run, tmp_path, capsys):
    import csv
    from pstrain.cli import main
    run = str(tiny_run.run_dir)
    assert main(["compare", run, run, "--out", str(tmp_path / "c.png"),
                 "--thresholds", "0.2,0.875", "--csv"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.strip().splitlines()))
    assert len(rows) == 2 and {"t(20%) s", "t(87.5%) s", "run", "mode"} <= rows[0].keys()
    assert float(rows[0]["t(20%) s"]) >= 0 and rows[0]["mode"] == "ssp"
    assert main(["compare", run, "--out", str(tmp_path / "j.png"), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert "t(85%) s" in row and "t(88%) s" in row and row["iterations"] == 60
    assert row["final_test_accuracy"] == tiny_run.summary["final_test_accuracy"]
    assert main(["compare", run, "--thresholds", "nope"]) == 2


def test_run_plot_has_every_panel(tiny_run):
    import matplotlib.pyplot as plt
    from pstrain.plots import PANELS, figure_of
    fig = figure_of(tiny_run.metrics, "tiny")
    axes = dict(zip(PANELS, fig.axes))
    assert len(fig.axes) == len(PANELS)
    assert len(axes["loss_iter"].get_lines()) == 2 and len(axes["throughput"].get_lines()) == 2
    lo, _ = axes["accuracy_iter"].get_ylim()
    initial = tiny_run.summary["initial_test_accuracy"]
    assert lo > initial or initial > 0.3        # the untrained test is off the fitted axis
    assert len(axes["staleness_histogram"].patches) >= 1
    plt.close(fig)


def test_a_rerun_keeps_the_earlier_run_folder(tiny_run, tmp_path, capfd):
    events = []
    capfd.readouterr()
    again = Job.from_run_dir(tiny_run.run_dir).run(quiet=True, timeout=240,
                                                    on_event=events.append)
    out = capfd.readouterr()
    assert out.out == "" and out.err == "", "quiet=True prints nothing"
    assert again.ok, again.summary
    assert again.run_dir == tiny_run.run_dir.parent / "tiny-2"
    assert again.summary["name"] == "tiny-2"
    assert again.snapshot == again.run_dir / "snapshots" / "tiny-2_iter_60.caffemodel"
    assert (tiny_run.run_dir / "summary.json").exists(), "the earlier run is kept"
    assert events == again.metrics                    # on_event saw every record, in order

    png = tmp_path / "x.png"                          # compare takes str paths too
    text = compare([str(tiny_run.run_dir), str(again.run_dir)], str(png))
    assert png.stat().st_size > 1000
    assert "tiny-2" in text

    third = Job.from_run_dir(tiny_run.run_dir, ["solver_overrides.max_iter=20"])
    shown = third.run(progress="lines", timeout=240)
    assert shown.run_dir.name == "tiny-3"
    assert f"this run goes to {shown.run_dir}" in capfd.readouterr().out
    replaced = Job.from_run_dir(shown.run_dir, ["solver_overrides.max_iter=10"]).run(
        quiet=True, overwrite=True, timeout=240)
    assert replaced.run_dir == shown.run_dir and replaced.summary["iterations"] == 10
    assert sorted(p.name for p in tiny_run.run_dir.parent.iterdir()) == ["tiny", "tiny-2",
                                                                        "tiny-3"]


def test_compare_figure_has_a_title(tiny_run):
    from pstrain.compare import load_run, title
    assert title([load_run(tiny_run.run_dir)]) == ("ps-train compare: tiny (ssp s=2, 2 workers)")


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_killed_worker_is_restarted(tmp_path, fashion_mnist, kind):
    """Over ipc the replaced worker also takes over the server's shared-memory
    ring that the killed one held slots of (docs/wire-protocol.md)."""
    job = base_job(tmp_path, name="restart")
    job["transport"] = {"kind": kind} if kind == "ipc" else job["transport"]
    job["solver_overrides"].update(max_iter=80, test_interval=0, snapshot=0)
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 60}
    job_obj = Job.from_yaml(write_job(tmp_path, job))
    run_dir = job_obj.config.run_dir
    r = run_killing_worker(job_obj, rank=1)
    assert r.summary["status"] == "ok", r.summary
    assert r.summary["worker_restarts"] >= 1
    assert r.summary["iterations"] == 80
    restarts = [x for x in r.metrics if x["event"] == "restart"]
    assert restarts and restarts[0]["rank"] == 1 and restarts[0]["exit"] == -signal.SIGKILL
    assert "restart 1 of worker 1" in (run_dir / "logs/worker-1.log").read_text()
    assert not leftover_processes(str(run_dir))
    if kind == "ipc":  # the payloads went through the rings, before and after the kill
        done = [x for x in r.metrics if x["event"] == "done" and x.get("role") == "server"]
        assert done and done[0]["shared_memory_bytes_received"] > 0.9 * done[0]["bytes_received"]


def test_sigint_stops_everything(tmp_path, fashion_mnist):
    job = base_job(tmp_path, name="interrupt")
    # Only the iteration-0 test happens before the interrupt.
    job["solver_overrides"].update(max_iter=5000, test_interval=4000, test_iter=2, snapshot=0)
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 50}
    path = write_job(tmp_path, job)
    run_dir = tmp_path / "runs" / "interrupt"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.Popen([sys.executable, "-m", "pstrain", str(path), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for(lambda: any(r["event"] == "train" for r in records(run_dir)), 120,
                 "the first training event")
        assert len(leftover_processes(str(run_dir))) == 3
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for p in leftover_processes(str(run_dir)):   # never leave a stray behind
            os.kill(int(p.split(":")[0]), signal.SIGKILL)
    assert proc.returncode == 130, err
    assert (out + err).count("interrupted by a signal; every process stopped") == 1, out + err
    assert not leftover_processes(str(run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["iterations"] < 5000
    # The iteration-0 test (before any training) is no final result, and the end line says so.
    assert summary["final_test_accuracy"] is None and summary["final_test_iteration"] is None
    assert summary["initial_test_accuracy"] is not None
    assert "no test after training began (iteration-0 test accuracy" in out
    assert "interrupted" in (run_dir / "logs/server-0.log").read_text()


def test_start_processes_by_hand(tmp_path, fashion_mnist):
    solver = tmp_path / "solver.prototxt"
    solver.write_text(f'net: "{ROOT}/configs/nets/lenet_train_test.prototxt"\n'
                      f'base_lr: 0.01\nmomentum: 0.9\nlr_policy: "fixed"\nmax_iter: 5\n'
                      f'display: 5\nsnapshot_after_train: false\nrandom_seed: 1\n')
    server = start_server(solver, workers=1, job_key=7, cwd=ROOT)
    try:
        assert server.endpoint.startswith("tcp://127.0.0.1:")
        worker = start_worker(solver, [server.endpoint], job_key=7, cwd=ROOT)
        with worker:
            assert worker.wait(120) == 0
        assert server.wait(30) == 0
        worker.join_output()
        assert [e["iter"] for e in worker.events if e["event"] == "train"] == [0]
        assert [e["iter"] for e in worker.events if e["event"] == "done"] == [5]
    finally:
        server.kill()


def test_resume_continues_from_the_newest_checkpoint(tmp_path, fashion_mnist, capsys):
    job = base_job(tmp_path, name="resume")
    job["solver_overrides"].update(max_iter=40, snapshot=20, test_interval=20)
    path = write_job(tmp_path, job)
    first = Job.from_yaml(path).run(quiet=True, timeout=240)
    assert first.ok and first.summary["iterations"] == 40
    from pstrain.cli import main
    capsys.readouterr()
    assert main([str(path), "--resume", str(first.run_dir), "--quiet",
                 "--set", "solver_overrides.max_iter=60"]) == 0
    end_line = capsys.readouterr().out.strip().splitlines()[-1]
    s = json.loads((first.run_dir / "summary.json").read_text())
    assert s["status"] == "ok", s
    assert s["resumed_from"].endswith("resume_iter_40.manifest")
    assert s["iterations"] == 60 and s["start_iteration"] == 40
    assert pathlib.Path(s["snapshot"]).name == "resume_iter_60.caffemodel"
    tests = [r["iter"] for r in records(first.run_dir) if r["event"] == "test"]
    assert tests == [0, 20, 40, 40, 60]           # metrics.jsonl continues
    # Throughput counts only the 20 iterations this part trained, over its own time.
    images = 20 * s["workers"] * s["batch_per_worker"]
    assert s["images_per_second"] == pytest.approx(images / s["train_seconds"], rel=0.01)
    # Every reported accuracy carries its iteration.
    assert s["final_test_iteration"] == 60
    assert f"test accuracy {s['final_test_accuracy']:.4f} at iteration 60" in end_line
    # compare counts time from the first part's start: the first test (before the
    # resume) is reached at a time >= 0, and the run's wall time spans both parts.
    from pstrain.compare import load_run
    run = load_run(first.run_dir)
    assert 0 <= run.time_to(0.01) < run.wall_seconds
    # (Each part's own wall_seconds also counts its processes' start and end, which
    # the records do not see: the span is compared with the second part alone.)
    assert run.wall_seconds > s["wall_seconds"]


def test_a_dead_server_fails_the_job(tmp_path, fashion_mnist):
    job = base_job(tmp_path, name="deadserver")
    job["solver_overrides"].update(max_iter=2000, test_interval=0, snapshot=0)
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 50}
    job_obj = Job.from_yaml(write_job(tmp_path, job))
    run_dir = job_obj.config.run_dir
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(r=job_obj.run(quiet=True, timeout=240)))
    thread.start()
    try:
        wait_for(lambda: any(r["event"] == "train" for r in records(run_dir)), 120,
                 "the first training event")
        server = [p for p in leftover_processes(str(run_dir)) if "ps-server" in p]
        os.kill(int(server[0].split(":")[0]), signal.SIGKILL)
    finally:
        thread.join(120)
    assert not thread.is_alive()
    s = result["r"].summary
    assert s["status"] == "failed"
    assert s["message"].startswith("server-0 was killed by signal 9")
    assert not leftover_processes(str(run_dir))


def test_run_folder_has_tensorboard_events_and_csv(tiny_run):
    """Every worker and the server get a TensorBoard run; TensorBoard's reader sees the
    same losses and test accuracies as metrics.jsonl."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    folder = tiny_run.run_dir / "tensorboard"
    assert sorted(p.name for p in folder.iterdir()) == ["server-0", "worker-0", "worker-1"]
    assert tiny_run.summary["tensorboard"] == str(folder)
    for rank in (0, 1):
        acc = accumulator.EventAccumulator(str(folder / f"worker-{rank}"))
        acc.Reload()
        expected = [(r["iter"], r["loss"]) for r in tiny_run.metrics
                    if r["event"] == "train" and r["role"] == "worker" and r["rank"] == rank]
        seen = [(e.step, e.value) for e in acc.Scalars("train/loss")]
        assert seen == [(i, pytest.approx(v, rel=1e-6)) for i, v in expected]
        assert {"train/lr", "train/images_per_second", "train/staleness",
                "train/bytes_sent"} <= set(acc.Tags()["scalars"])
    acc = accumulator.EventAccumulator(str(folder / "worker-0"))
    acc.Reload()
    tests = [(r["iter"], r["accuracy"]) for r in tiny_run.metrics
             if r["event"] == "test" and r["rank"] == 0]
    assert [(e.step, e.value) for e in acc.Scalars("test/accuracy")] == \
        [(i, pytest.approx(a, rel=1e-6)) for i, a in tests]
    rows = (tiny_run.run_dir / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("time,role,rank,event,iter")
    assert len(rows) > 1 + len(tests)
