"""MemoryData fed from .npy files in the programs (--memory-data LAYER=DATA.npy,LABELS.npy).

An MLP over numpy.save'd arrays: `ps-net train --memory-data` for 20 iterations
ends at the weights pstrain.caffe's SGDSolver reaches on the same arrays given
through Net.set_input_arrays (from the same start, within 1e-5 relative); bsp
with 2 ps-workers of batch 4 (ps-server and ps-worker started by hand, as
tests/e2e/ps_job.py does) ends at the weights of 1 worker of batch 8; `ps-net
test` gives pstrain.caffe's loss on the files and `ps-net time` runs on them; a
bad file or flag is one line on stderr naming it.

Needs the compiled extension (pstrain._core) and build/bin/ps-net, ps-server,
ps-worker."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from pstrain_testing import ROOT, find_build_dir

sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from ps_job import run_job  # noqa: E402

ITERS = 20


def mlp(batch: int) -> str:
    return f"""name: "mlp"
layer {{ name: "mem" type: "MemoryData" top: "data" top: "label"
  memory_data_param {{ batch_size: {batch} channels: 1 height: 2 width: 3 }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param {{ num_output: 8 weight_filler {{ type: "gaussian" std: 0.5 }}
                        bias_filler {{ type: "constant" value: 0.1 }} }} }}
layer {{ name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param {{ num_output: 3 weight_filler {{ type: "gaussian" std: 0.5 }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
"""


@pytest.fixture(scope="module")
def caffe() -> Any:
    import pstrain.caffe

    pstrain.caffe.set_mode_cpu()
    pstrain.caffe.set_engine("fast")
    pstrain.caffe.init_log(1)
    yield pstrain.caffe
    pstrain.caffe.init_log(0)


@pytest.fixture(scope="module")
def bin_dir() -> pathlib.Path:
    return find_build_dir(("ps-net", "ps-server", "ps-worker")) / "bin"


def arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(26)
    data = rng.normal(0, 1, (n, 1, 2, 3)).astype(np.float32)
    labels = rng.integers(0, 3, n).astype(np.int64)
    return data, labels


def setup(tmp: pathlib.Path, caffe: Any, batch: int, n: int = 12) -> dict:
    """The net, the solver (snapshot at the end), the .npy files and a start .caffemodel."""
    (tmp / "snap").mkdir()
    net = tmp / "mlp.prototxt"
    net.write_text(mlp(batch))
    solver = tmp / "solver.prototxt"
    solver.write_text(f'net: "{net}"\nbase_lr: 0.1\nmomentum: 0.9\nlr_policy: "fixed"\n'
                      f'weight_decay: 0.001\nmax_iter: {ITERS}\ndisplay: 0\nrandom_seed: 3\n'
                      f'snapshot_after_train: true\nsnapshot_prefix: "{tmp}/snap/m"\n')
    data, labels = arrays(n)
    np.save(tmp / "x.npy", data)
    np.save(tmp / "y.npy", labels)  # int64 labels, converted per batch
    start = tmp / "start.caffemodel"
    # Weights from the fillers: a MemoryData net is built in Python (arrays given later).
    caffe.Net(str(net), caffe.TRAIN).save(str(start))
    return {"net": net, "solver": solver, "data": data, "labels": labels, "start": start,
            "flag": f"mem={tmp / 'x.npy'},{tmp / 'y.npy'}"}


def final_weights(model: pathlib.Path) -> dict[str, list[np.ndarray]]:
    from pstrain.caffe.proto import caffe_pb2

    param = caffe_pb2.NetParameter.FromString(model.read_bytes())
    return {layer.name: [np.array(b.data, np.float64) for b in layer.blobs]
            for layer in param.layer if layer.blobs}


def assert_same_weights(got: dict, want: dict, rtol: float) -> None:
    assert sorted(got) == sorted(want) == ["ip1", "ip2"]
    for name in want:
        for g, w in zip(got[name], want[name], strict=True):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-7, err_msg=name)


def test_ps_net_train_on_npy_matches_set_input_arrays(caffe: Any, bin_dir: pathlib.Path,
                                                      tmp_path: pathlib.Path) -> None:
    s = setup(tmp_path, caffe, batch=4)
    run = subprocess.run([str(bin_dir / "ps-net"), "train", "--solver", str(s["solver"]),
                          "--weights", str(s["start"]), "--engine", "fast", "--memory-data",
                          s["flag"]], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    cli = final_weights(tmp_path / "snap" / f"m_iter_{ITERS}.caffemodel")

    solver = caffe.SGDSolver(str(s["solver"]))
    solver.net.copy_from(str(s["start"]))
    solver.net.set_input_arrays(s["data"], s["labels"].astype(np.float32))
    solver.step(ITERS)  # 20 batches of 4 over 12 samples: wraps around 6 times
    python = {name: [p.data.astype(np.float64).ravel() for p in solver.net.params[name]]
              for name in ("ip1", "ip2")}
    start = final_weights(s["start"])
    assert not np.allclose(python["ip2"][0], start["ip2"][0], atol=1e-3)  # it trained
    assert_same_weights(cli, python, rtol=1e-5)


def test_two_bsp_workers_of_batch_4_match_one_of_batch_8(caffe: Any, bin_dir: pathlib.Path,
                                                         tmp_path: pathlib.Path) -> None:
    one_dir, two_dir = tmp_path / "one", tmp_path / "two"
    one_dir.mkdir()
    two_dir.mkdir()
    one = setup(one_dir, caffe, batch=8, n=13)  # 13 samples: batches straddle the end
    two = setup(two_dir, caffe, batch=4, n=13)
    # The same start for both (the fillers of one run).
    two["start"].write_bytes(one["start"].read_bytes())
    run = subprocess.run([str(bin_dir / "ps-net"), "train", "--solver", str(one["solver"]),
                          "--weights", str(one["start"]), "--engine", "fast", "--memory-data",
                          one["flag"]], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    flag = ["--memory-data", two["flag"], "--engine", "fast"]
    result = run_job(bin_dir.parent, two["solver"], workers=2, mode="bsp", timeout=240,
                     worker_args={0: flag + ["--weights", str(two["start"])], 1: flag})
    assert all(code == 0 for code in result.returncodes.values()), result.stderr
    got = final_weights(two_dir / "snap" / f"m_iter_{ITERS}.caffemodel")
    want = final_weights(one_dir / "snap" / f"m_iter_{ITERS}.caffemodel")
    assert not np.allclose(want["ip2"][0], final_weights(one["start"])["ip2"][0], atol=1e-3)
    assert_same_weights(got, want, rtol=1e-5)


def one_error_line(run: subprocess.CompletedProcess) -> str:
    assert run.returncode != 0
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    return lines[0]


@pytest.mark.parametrize("case", ["fortran", "missing", "few", "no such layer", "no flag"])
def test_bad_input_is_one_line_naming_it(caffe: Any, bin_dir: pathlib.Path,
                                         tmp_path: pathlib.Path, case: str) -> None:
    s = setup(tmp_path, caffe, batch=4)
    x = tmp_path / "x.npy"
    flag = ["--memory-data", s["flag"]]
    if case == "fortran":
        np.save(x, np.asfortranarray(s["data"]))
        want = f"{x}: fortran_order is True; save a C-order array (numpy.ascontiguousarray)"
    elif case == "missing":
        x.unlink()
        want = f"{x}: no such file"
    elif case == "few":
        np.save(x, s["data"][:3])
        want = f"{x}: 3 samples, fewer than one batch of 4"
    elif case == "no such layer":  # the flag repeated: mem is fed, memo names no layer
        memo = s["flag"].replace("mem=", "memo=")
        flag += ["--memory-data", memo]
        want = f"--memory-data {memo}: {s['solver']}'s nets have no MemoryData layer 'memo'"
    else:
        flag = []
        want = "--memory-data mem=DATA.npy,LABELS.npy"
    run = subprocess.run([str(bin_dir / "ps-net"), "train", "--solver", str(s["solver"]),
                          *flag], capture_output=True, text=True, timeout=120)
    line = one_error_line(run)
    assert want in line, line
    if case not in ("no such layer",):
        assert "layer 'mem' (MemoryData)" in line, line


def test_a_flag_that_does_not_parse(bin_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    for program in (["ps-net", "train", "--solver", "s.prototxt"],
                    ["ps-worker", "--solver", "s.prototxt", "--servers", "tcp://127.0.0.1:1"]):
        run = subprocess.run([str(bin_dir / program[0]), *program[1:], "--memory-data",
                              "mem=x.npy"], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, run.stderr
        assert "--memory-data 'mem=x.npy': expected LAYER=DATA.npy,LABELS.npy" in run.stderr


def test_ps_net_test_and_time_read_the_files(caffe: Any, bin_dir: pathlib.Path,
                                             tmp_path: pathlib.Path) -> None:
    """ps-net test's mean loss over 3 batches is pstrain.caffe's over the same arrays;
    ps-net time runs on the files; a flag naming no layer of the model is refused."""
    s = setup(tmp_path, caffe, batch=4)
    run = subprocess.run([str(bin_dir / "ps-net"), "test", "--model", str(s["net"]), "--weights",
                          str(s["start"]), "--iterations", "3", "--json", "--memory-data",
                          s["flag"]], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    net = caffe.Net(str(s["net"]), str(s["start"]), caffe.TEST)
    net.set_input_arrays(s["data"], s["labels"].astype(np.float32))
    losses = [float(net.forward()["loss"]) for _ in range(3)]
    assert result["loss"] == pytest.approx(np.mean(losses), rel=1e-5)

    timed = subprocess.run([str(bin_dir / "ps-net"), "time", "--model", str(s["net"]),
                            "--iterations", "2", "--memory-data", s["flag"]],
                           capture_output=True, text=True, timeout=120)
    assert timed.returncode == 0, timed.stderr[-3000:]
    memo = s["flag"].replace("mem=", "memo=")
    refused = subprocess.run([str(bin_dir / "ps-net"), "time", "--model", str(s["net"]),
                              "--iterations", "2", "--memory-data", s["flag"], "--memory-data",
                              memo], capture_output=True, text=True, timeout=120)
    assert one_error_line(refused) == \
        f"ps-net: --memory-data {memo}: {s['net']} has no MemoryData layer 'memo'"
