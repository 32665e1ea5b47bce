"""Research methods as job keys: consistency.backup_workers, staleness_lr and
dc_asgd are validated like every key and reach the servers as flags; short
real jobs with each of them train and report what the servers dropped."""
from __future__ import annotations

import json
import pathlib
import re
import struct
import subprocess
import time

import numpy as np
import pytest
import zmq

from pb_wire import field_bytes, field_varint, fields
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


# One ps-server driven by hand over its wire protocol (proto/pstrain.proto), so
# that every gradient's staleness is known: worker 0 pulls once (version 0), then
# pushes three gradients without pulling again; they are applied at versions 0,
# 1 and 2, so their staleness is 0, 1 and 2.
HELLO, HELLO_ACK, INIT_PUSH, INIT_ACK, PULL, PULL_REPLY, PUSH, PUSH_ACK = 1, 2, 3, 4, 5, 6, 7, 8
SHUTDOWN, ERROR = 11, 13
LR = 0.5
W0 = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
GRADS = [np.array(g, np.float32) for g in ([0.5, -1.0, 2.0, 0.25], [1.0, 0.5, -0.5, 2.0],
                                            [-1.5, 1.0, 0.75, -0.5])]


def header(kind: int, key: int, clock: int | None = None, with_chunk: bool = False,
           params: bool = False) -> bytes:
    out = field_varint(1, kind) + field_varint(2, 1) + field_varint(3, 0)  # a worker, rank 0
    if clock is not None:
        out += field_varint(4, clock)
    if with_chunk:
        out += field_bytes(6, field_varint(1, 0) + field_varint(2, len(W0)))
    if params:
        out += field_bytes(10, field_bytes(1, b"w") + field_varint(2, len(W0)))
    if kind == HELLO:
        out += field_varint(11, 1)
    return out + field_varint(14, key)


def served_weights_after_three_pushes(tmp_path: pathlib.Path, build_dir: pathlib.Path,
                                      flags: list[str]) -> np.ndarray:
    solver = tmp_path / "sgd.prototxt"
    solver.write_text(f'type: "SGD" base_lr: {LR} lr_policy: "fixed" momentum: 0 max_iter: 1000 '
                      f'snapshot: 0\n')
    key = 0x5EED
    log_path = tmp_path / f"server{'_'.join(flags)}.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [str(build_dir / "bin/ps-server"), "--bind", "tcp://127.0.0.1:0", "--workers", "1",
             "--mode", "asp", "--job-key", str(key), "--solver", str(solver),
             "--idle-exit-s", "60"] + flags, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    context = zmq.Context()
    try:
        deadline = time.monotonic() + 60
        endpoint = None
        while endpoint is None:
            assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()
            m = re.search(r"listening on (tcp://\S+)", log_path.read_text())
            endpoint = m.group(1) if m else None
            time.sleep(0.02)
        worker = context.socket(zmq.DEALER)
        worker.setsockopt(zmq.LINGER, 0)
        worker.setsockopt(zmq.RCVTIMEO, 30000)
        worker.connect(endpoint)

        def ask(frames: list[bytes], want: int) -> list[bytes]:
            worker.send_multipart(frames)
            reply = worker.recv_multipart()
            kind = fields(reply[0])[1][-1]
            assert kind == want, (kind, fields(reply[0]).get(9), log_path.read_text())
            return reply

        ask([header(HELLO, key)], HELLO_ACK)
        ask([header(INIT_PUSH, key, with_chunk=True, params=True), W0.tobytes()], INIT_ACK)
        pulled = ask([header(PULL, key, clock=0)], PULL_REPLY)
        assert np.frombuffer(pulled[1], np.float32).tolist() == W0.tolist()
        for clock, g in enumerate(GRADS):
            ask([header(PUSH, key, clock=clock, with_chunk=True), g.tobytes()], PUSH_ACK)
        final = ask([header(PULL, key, clock=len(GRADS))], PULL_REPLY)
        worker.send_multipart([header(SHUTDOWN, key)])
        worker.recv_multipart()
        assert server.wait(30) == 0, log_path.read_text()
        worker.close()
        return np.frombuffer(final[1], np.float32).copy()
    finally:
        context.destroy(linger=0)
        if server.poll() is None:
            server.kill()
            server.wait()


def expected_weights(staleness_lr: bool = False, dc: dict | None = None) -> np.ndarray:
    """server/update_methods.hpp's formulas, by hand: gradient k has staleness k;
    staleness_lr scales it by 1 / max(1, k); DC-ASGD adds lambda * g * g * (w_now -
    w_pulled), lambda per value with the adaptive variant."""
    w = W0.astype(np.float64)
    mean_square = np.zeros_like(w)
    for staleness, g in enumerate(GRADS):
        g = g.astype(np.float64)
        if dc is not None:
            lam = dc["lambda"]
            if dc.get("adaptive"):
                m = dc["momentum"]
                mean_square = m * mean_square + (1 - m) * g * g
                lam = lam / (np.sqrt(mean_square) + dc["epsilon"])
            g = g + lam * g * g * (w - W0)
        scale = 1 / max(1, staleness) if staleness_lr else 1.0
        w = w - LR * scale * g
    return w


@pytest.mark.parametrize("consistency, expected", [
    ({"mode": "asp"}, expected_weights()),
    ({"mode": "asp", "staleness_lr": True}, expected_weights(staleness_lr=True)),
    ({"mode": "ssp", "staleness": 5, "dc_asgd": {"lambda": 0.5}},
     expected_weights(dc={"lambda": 0.5})),
    ({"mode": "asp", "dc_asgd": {"lambda": 0.5, "adaptive": True, "momentum": 0.5,
                                 "epsilon": 0.25}},
     expected_weights(dc={"lambda": 0.5, "adaptive": True, "momentum": 0.5, "epsilon": 0.25})),
], ids=["asp", "staleness_lr", "dc_asgd", "dc_asgd_adaptive"])
def test_each_method_flag_changes_the_servers_update_as_documented(tmp_path, build_dir,
                                                                   consistency, expected):
    """ps-train's flags for the job's method (Plan.method_flags, what the servers are
    started with) reach the shard: the weights after three pushes of staleness 0, 1, 2
    are the method's, and differ from plain asp's (a server ignoring a flag fails)."""
    plan = Job.from_yaml(write_job(tmp_path, base_job(tmp_path, consistency=consistency))).plan()
    flags = plan.method_flags()
    weights = served_weights_after_three_pushes(tmp_path, build_dir, flags)
    assert weights == pytest.approx(expected, rel=1e-5, abs=1e-6), (flags, weights, expected)
    if consistency != {"mode": "asp"}:
        assert np.abs(expected - expected_weights()).max() > 0.05, "the case must tell apart"


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
    rows = json.loads(compare([out], tmp_path / "c.png", fmt="json"))
    assert [r["run"] for r in rows] == ["mode=bsp s1", "mode=bsp s2", "mode=asp s1",
                                        "mode=asp s2"]
    assert not leftover_processes(str(out))


def test_sweep_seeds_change_the_initial_weights(tmp_path, fashion_mnist):
    """Seed k is solver_overrides.random_seed = k: with base_lr 0 a run's final
    weights are its initial ones, so the snapshots show that seeds 1 and 2 start
    from different weights and that seed 1 starts from the same ones at every
    grid point."""
    from pstrain.caffe.proto import caffe_pb2
    job = base_job(tmp_path, name="seeds")
    job["solver_overrides"].update(base_lr=0, max_iter=2, test_interval=0, snapshot=0)
    out = tmp_path / "sweep"
    assert main(["sweep", str(write_job(tmp_path, job)), "--grid", "consistency.mode=bsp,asp",
                 "--seeds", "2", "--out", str(out)]) == 0
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    weights = {}
    for r in runs:
        model = caffe_pb2.NetParameter.FromString(
            next((pathlib.Path(r["run_dir"]) / "snapshots").glob("*_iter_2.caffemodel"))
            .read_bytes())
        weights[(r["point"]["consistency.mode"], r["seed"])] = [
            (layer.name, list(blob.data)) for layer in model.layer for blob in layer.blobs]
    assert len(weights) == 4 and all(len(w) == 8 for w in weights.values())  # LeNet: 8 blobs
    assert weights[("bsp", 1)] == weights[("asp", 1)]
    assert weights[("bsp", 2)] == weights[("asp", 2)]
    conv1 = {seed: weights[("bsp", seed)][0] for seed in (1, 2)}
    assert conv1[1][0] == conv1[2][0] == "conv1"
    differ = sum(a != b for a, b in zip(conv1[1][1], conv1[2][1]))
    assert differ > 0.99 * len(conv1[1][1]), differ   # xavier draws: every value differs
    assert not leftover_processes(str(out))


def test_compression_cuts_the_bytes_pushed(tmp_path, fashion_mnist):
    """Same job, same iterations: the servers' received payload bytes shrink by
    the encoding's factor (fp16 1/2, top-k 1% as index + value pairs ~1/50,
    sign 1 bit a value + a scale ~1/32); the job still trains."""
    pushed = {}
    for method in ("none", "fp16", "topk", "sign"):
        job = base_job(tmp_path, name=f"c-{method}", consistency={"mode": "bsp"})
        job["transport"]["compression"] = {"method": method, "ratio": 0.01}
        job["transport"]["host_aggregation"] = False    # each worker's pushes compressed
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


# A net whose gradient never changes: the loss is sum_j w_j * x_j (an InnerProduct
# with loss_weight 1 over a constant input x), so every push carries g = x and,
# with plain SGD from w = 0, the final weights are -lr times the sum of what the
# server decoded from the pushes.
EF_X = [0.53, -0.61, 0.72, -0.84, 0.95, -1.03, 1.14, -1.26, 1.31, -1.42, 0.67, -0.98]
EF_LR, EF_STEPS = 0.01, 100


def constant_gradient_solver(tmp_path: pathlib.Path) -> pathlib.Path:
    tops = " ".join(f'top: "x{j}"' for j in range(len(EF_X)))
    shapes = " ".join("shape { dim: 1 dim: 1 }" for _ in EF_X)
    fillers = " ".join(f'data_filler {{ type: "constant" value: {v} }}' for v in EF_X)
    bottoms = " ".join(f'bottom: "x{j}"' for j in range(len(EF_X)))
    net = tmp_path / "constant_gradient.prototxt"
    net.write_text(
        f'name: "constant_gradient"\n'
        f'layer {{ name: "x" type: "DummyData" {tops} dummy_data_param {{ {fillers} {shapes} }} }}\n'
        f'layer {{ name: "concat" type: "Concat" {bottoms} top: "x" concat_param {{ axis: 1 }} }}\n'
        f'layer {{ name: "ip" type: "InnerProduct" bottom: "x" top: "loss" loss_weight: 1 '
        f'inner_product_param {{ num_output: 1 bias_term: false '
        f'weight_filler {{ type: "constant" value: 0 }} }} }}\n')
    solver = tmp_path / "constant_gradient_solver.prototxt"
    solver.write_text(f'net: "{net}"\nbase_lr: {EF_LR}\nlr_policy: "fixed"\nmomentum: 0\n'
                      f'max_iter: {EF_STEPS}\nsnapshot: 0\ndisplay: 0\n'
                      f'snapshot_prefix: "{tmp_path}/cg"\n')
    return solver


def decoded_sum(tmp_path: pathlib.Path, method: str, error_feedback: bool) -> np.ndarray:
    """The sum over EF_STEPS pushes of what the server decoded: -w_final / lr."""
    from pstrain.caffe.proto import caffe_pb2
    name = f"ef-{method}-{'on' if error_feedback else 'off'}"
    job = base_job(tmp_path, name=name, solver=str(constant_gradient_solver(tmp_path)),
                   solver_overrides={"max_iter": EF_STEPS, "snapshot": 0, "display": 0},
                   consistency={"mode": "bsp"})
    job["cluster"]["workers"] = 1
    job["transport"]["compression"] = {"method": method, "ratio": 0.25,
                                       "error_feedback": error_feedback}
    result = Job.from_yaml(write_job(tmp_path, job, f"{name}.yaml")).run(quiet=True, timeout=120)
    assert result.summary["status"] == "ok", result.summary
    assert result.summary["iterations"] == EF_STEPS
    model = caffe_pb2.NetParameter.FromString(result.snapshot.read_bytes())
    weights = next(l for l in model.layer if l.name == "ip").blobs[0].data
    return -np.array(weights, np.float64) / EF_LR


@pytest.mark.parametrize("method", ["topk", "sign"])
def test_error_feedback_makes_the_applied_updates_track_the_gradients(tmp_path, fashion_mnist,
                                                                     method):
    """docs/config-reference.md: with error_feedback the worker keeps the residual
    e = v - decode(encode(v)) and encodes v = g + e next time, so after T pushes of
    the same g the server has applied T * g - e_T: the difference stays bounded
    (here under n * max|g|, whatever T). Without it the same lossy code is applied
    T times and the difference grows with T. error_feedback is the default
    (docs/experiments.md runs top-k and sign with it)."""
    x = np.array(EF_X, np.float32).astype(np.float64)
    truth = EF_STEPS * x
    bound = len(EF_X) * np.abs(x).max()             # 17.0; the drift without feedback: 46 to 142
    with_feedback = decoded_sum(tmp_path, method, True)
    without = decoded_sum(tmp_path, method, False)
    assert np.abs(with_feedback - truth).max() < bound, (with_feedback, truth)
    assert np.all(np.sign(with_feedback) == np.sign(x)), with_feedback   # every value moved
    if method == "topk":
        # k = round(0.25 * 12) = 3: the same three largest |g| every time, the rest never.
        sent = np.argsort(-np.abs(x))[:3]
        assert without[sent] == pytest.approx(truth[sent], rel=1e-4)
        assert np.delete(without, sent).tolist() == [0.0] * 9
    else:
        # sign: mean |g| * sign(g) every time.
        assert without == pytest.approx(EF_STEPS * np.abs(x).mean() * np.sign(x), rel=1e-4)
    assert np.abs(without - truth).max() > 2 * bound
    defaults = Job.from_yaml(write_job(tmp_path, base_job(
        tmp_path, transport={"compression": method}), "default.yaml")).config
    assert defaults.transport.compression.error_feedback is True


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
