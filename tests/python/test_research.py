"""Research methods as job keys: consistency.backup_workers, staleness_lr and
dc_asgd are validated like every key and reach the servers as flags; short
real jobs with each of them train and report what the servers dropped."""
from __future__ import annotations

import pathlib

import pytest

from ps_train_util import base_job, leftover_processes, write_job
from pstrain import Job
from pstrain.cli import main


def error_of(capsys, tmp_path, job: dict) -> str:
    path = write_job(tmp_path, job)
    assert main([str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ps-train: {path}: ")
    return err[len(f"ps-train: {path}: "):]


@pytest.mark.parametrize("consistency, message", [
    ({"mode": "ssp", "backup_workers": 1},
     "consistency.backup_workers: applies to mode bsp only (mode is ssp)"),
    ({"mode": "bsp", "backup_workers": 2},
     "consistency.backup_workers: must be less than cluster.workers (2), got 2"),
    ({"mode": "bsp", "backup_workers": -1},
     "consistency.backup_workers: must be an integer >= 0, got -1"),
    ({"mode": "bsp", "staleness_lr": True},
     "consistency.staleness_lr: applies to modes ssp and asp only (bsp gradients are never "
     "stale)"),
    ({"mode": "asp", "staleness_lr": "yes"},
     "consistency.staleness_lr: must be true or false, got 'yes'"),
    ({"mode": "asp", "dc_asgd": {"lamda": 1}},
     "unknown key 'consistency.dc_asgd.lamda'; did you mean 'consistency.dc_asgd.lambda'?"),
    ({"mode": "asp", "dc_asgd": {"lambda": 0}},
     "consistency.dc_asgd.lambda: must be a number > 0, got 0"),
    ({"mode": "asp", "dc_asgd": {"momentum": 1.0}},
     "consistency.dc_asgd.momentum: must be a number >= 0 and < 1, got 1.0"),
    ({"mode": "bsp", "dc_asgd": {}},
     "consistency.dc_asgd: applies to modes ssp and asp only (bsp gradients are never stale)"),
    ({"mode": "asp", "staleness_per_worker": [1, 2]},
     "consistency.staleness_per_worker: applies to mode ssp only (mode is asp)"),
    ({"mode": "ssp", "staleness_per_worker": [1, 2, 3]},
     "consistency.staleness_per_worker: must be a list of 2 integers >= 0 (one per worker), "
     "got [1, 2, 3]"),
    ({"mode": "ssp", "staleness_per_worker": [1, -1]},
     "consistency.staleness_per_worker: must be a list of 2 integers >= 0 (one per worker), "
     "got [1, -1]"),
    ({"mode": "ssp", "staleness_per_worker": [0, 2], "local_sgd": {"tau": 2}},
     "consistency.local_sgd: cannot be combined with consistency.staleness_per_worker"),
    ({"mode": "asp", "backup_worker": 1},
     "unknown key 'consistency.backup_worker'; did you mean 'consistency.backup_workers'?"),
])
def test_bad_method_keys(capsys, tmp_path, consistency, message):
    assert error_of(capsys, tmp_path, base_job(tmp_path, consistency=consistency)) == message
    assert not (tmp_path / "runs").exists()


def test_method_flags_reach_the_servers_only(tmp_path, fashion_mnist):
    job = base_job(tmp_path, consistency={"mode": "asp", "staleness_lr": True,
                                          "dc_asgd": {"lambda": 2, "adaptive": True}})
    text = Job.from_yaml(write_job(tmp_path, job)).dry_run()
    server = next(l for l in text.splitlines() if "ps-server" in l)
    workers = [l for l in text.splitlines() if "ps-worker" in l]
    assert "--staleness-lr --dc-lambda 2.0 --dc-adaptive --dc-momentum 0.95 --dc-epsilon 1e-07" \
        in server
    assert workers and not any("--dc-" in w or "--staleness-lr" in w for w in workers)
    assert "lambda: 2" in text  # the resolved job reads back as a job file
    job = base_job(tmp_path, consistency={"mode": "bsp", "backup_workers": 1})
    job["cluster"]["workers"] = 3
    server = next(l for l in Job.from_yaml(write_job(tmp_path, job)).dry_run().splitlines()
                  if "ps-server" in l)
    assert "--backup-workers 1" in server


def test_staleness_per_worker_reaches_the_servers_only(tmp_path, fashion_mnist):
    job = base_job(tmp_path, consistency={"mode": "ssp", "staleness_per_worker": [0, 3]})
    text = Job.from_yaml(write_job(tmp_path, job)).dry_run()
    servers = [l for l in text.splitlines() if "ps-server" in l]
    workers = [l for l in text.splitlines() if "ps-worker" in l]
    assert servers and all("--staleness-per-worker 0,3" in l for l in servers)
    assert workers and not any("--staleness-per-worker" in w for w in workers)
    assert "staleness_per_worker:" in text  # the resolved job reads back as a job file


def run_job(tmp_path, name: str, workers: int, consistency: dict, straggler=None):
    job = base_job(tmp_path, name=name, consistency=consistency)
    job["solver_overrides"].update(max_iter=60, test_interval=60, test_iter=20, snapshot=0)
    job["cluster"].update(workers=workers, straggler=straggler)
    result = Job.from_yaml(write_job(tmp_path, job, f"{name}.yaml")).run(quiet=True, timeout=240)
    assert not leftover_processes(str(result.run_dir))
    s = result.summary
    assert s["status"] == "ok", s
    assert s["iterations"] == 60
    assert s["final_test_accuracy"] > 0.5, s  # 60 steps of LeNet: ~0.65-0.7
    return s


def test_bsp_with_a_backup_worker_drops_the_stragglers_gradients(tmp_path, fashion_mnist):
    s = run_job(tmp_path, "backup", 3, {"mode": "bsp", "backup_workers": 1},
                straggler={"rank": 2, "delay_ms": 60})
    # Every step applied W - b = 2 gradients; the rest were dropped, chunk by chunk
    # (LeNet is one 1 MiB-chunk-per-parameter shard: 8 chunks a push).
    assert s["backup_dropped"] > 0
    assert s["bytes_pushed"] > 0
    assert s["staleness_histogram"] == [60 * 2]


def test_asp_with_staleness_aware_rate_and_dc_asgd(tmp_path, fashion_mnist):
    s = run_job(tmp_path, "dcasgd", 2, {"mode": "asp", "staleness_lr": True,
                                        "dc_asgd": {"lambda": 2, "adaptive": True}})
    assert s["backup_dropped"] == 0


def test_mean_and_sample_spread():
    from pstrain.sweep import mean_sd, parse_grid
    assert mean_sd([]) == (None, None)
    assert mean_sd([0.8]) == (0.8, None)
    m, sd = mean_sd([0.80, 0.84, 0.88])
    assert m == pytest.approx(0.84) and sd == pytest.approx(0.04)
    assert parse_grid(["consistency.mode=bsp,ssp", "cluster.workers=2,4"]) == \
        [("consistency.mode", ["bsp", "ssp"]), ("cluster.workers", [2, 4])]
    with pytest.raises(Exception, match="expected dotted.key=value1,value2"):
        parse_grid(["consistency.mode"])


def test_sweep_runs_the_grid_and_reports(tmp_path, fashion_mnist, capsys):
    import json
    from pstrain.compare import compare
    job = base_job(tmp_path, name="sw")
    job["solver_overrides"].update(max_iter=30, test_interval=15, test_iter=10, snapshot=0)
    path = write_job(tmp_path, job)
    out = tmp_path / "sweep"
    code = main(["sweep", str(path), "--grid", "consistency.mode=bsp,asp", "--seeds", "2",
                 "--out", str(out), "--thresholds", "0.3"])
    assert code == 0
    text = capsys.readouterr().out
    data = json.loads((out / "sweep.json").read_text())
    assert [(r["point"]["consistency.mode"], r["seed"]) for r in data["runs"]] == \
        [("bsp", 1), ("bsp", 2), ("asp", 1), ("asp", 2)]
    assert all(r["status"] == "ok" for r in data["runs"])
    table = (out / "report" / "table.md").read_text()
    assert "| mode=bsp | 2/2 | 0." in table and "| mode=asp | 2/2 | 0." in table
    assert " ± " in table and "(2/2)" in table  # spread over 2 seeds; both reached 30%
    assert table.strip() in text
    assert (out / "report" / "curves.png").stat().st_size > 10000
    csv_text = (out / "report" / "table.csv").read_text()
    assert csv_text.startswith("point,seeds,ok,final_acc_mean,final_acc_sd")
    # Seeds change the initial weights: the two bsp runs differ.
    runs = [json.loads((pathlib.Path(r["run_dir"]) / "summary.json").read_text())
            for r in data["runs"]]
    assert runs[0]["final_test_accuracy"] != runs[1]["final_test_accuracy"]
    rows = json.loads(compare([out], tmp_path / "c.png", fmt="json"))
    assert [r["run"] for r in rows] == ["mode=bsp s1", "mode=bsp s2", "mode=asp s1",
                                        "mode=asp s2"]
    assert not leftover_processes(str(out))


def test_compression_cuts_the_bytes_pushed(tmp_path, fashion_mnist):
    """Same job, same iterations: the servers' received payload bytes shrink by
    the encoding's factor (fp16 1/2, top-k 1% as index + value pairs ~1/50,
    sign 1 bit a value + a scale ~1/32); the job still trains."""
    pushed = {}
    for method in ("none", "fp16", "topk", "sign"):
        job = base_job(tmp_path, name=f"c-{method}", consistency={"mode": "bsp"})
        job["transport"]["compression"] = {"method": method, "ratio": 0.01}
        job["solver_overrides"].update(max_iter=40, test_interval=40, test_iter=20, snapshot=0)
        result = Job.from_yaml(write_job(tmp_path, job, f"{method}.yaml")).run(quiet=True,
                                                                               timeout=240)
        assert not leftover_processes(str(result.run_dir))
        s = result.summary
        assert s["status"] == "ok", s
        pushed[method] = s["bytes_pushed"]
        floor = 0.5 if method in ("none", "fp16") else 0.2  # 40 steps; top-k/sign learn slower
        assert s["final_test_accuracy"] > floor, (method, s["final_test_accuracy"])
    # LeNet: 431,080 values; the servers also received worker 0's uncompressed
    # initial weights once. Then 40 iterations x 2 workers of pushes.
    init = 431080 * 4
    assert pushed["none"] == pytest.approx(init + 80 * 431080 * 4, rel=1e-3), pushed
    ratio = {m: (pushed[m] - init) / (pushed["none"] - init) for m in pushed}
    assert ratio["fp16"] == pytest.approx(0.5, abs=1e-3), ratio
    assert ratio["topk"] == pytest.approx(0.02, abs=0.002), ratio
    assert ratio["sign"] == pytest.approx(1 / 32, abs=0.002), ratio


@pytest.mark.parametrize("key, value", [("easgd", {"tau": 4, "alpha": 0.2}),
                                        ("local_sgd", {"tau": 4})])
def test_elastic_and_local_sgd_train_locally_and_exchange(tmp_path, fashion_mnist, key, value):
    job = base_job(tmp_path, name=key, consistency={"mode": "bsp", key: value})
    job["solver_overrides"].update(max_iter=60, test_interval=60, test_iter=20, snapshot=0)
    result = Job.from_yaml(write_job(tmp_path, job, f"{key}.yaml")).run(quiet=True, timeout=240)
    assert not leftover_processes(str(result.run_dir))
    s = result.summary
    assert s["status"] == "ok", s
    assert s["iterations"] == 60
    assert s["final_test_accuracy"] > 0.5, s  # the center after 15 exchanges
    done = next(r for r in result.metrics if r.get("event") == "done" and r.get("role") == "server")
    assert done["version"] == 15 and done["pushes_applied"] == 2 * 15  # one push per exchange
    # The pushes carried the whole net once per exchange: 15 x 2 x 431,080 floats.
    assert s["bytes_pushed"] == pytest.approx((15 * 2 + 1) * 431080 * 4, rel=1e-3)


def test_elastic_needs_max_iter_a_multiple_of_tau(capsys, tmp_path, fashion_mnist):
    job = base_job(tmp_path, consistency={"mode": "bsp", "local_sgd": {"tau": 7}})
    assert error_of(capsys, tmp_path, job) == (
        "consistency.local_sgd.tau: max_iter (60) and snapshot (30) must be multiples of tau (7)")
