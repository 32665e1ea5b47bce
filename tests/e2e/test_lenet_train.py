"""LeNet on Fashion-MNIST with ps-net: the accuracy target of the net-engine issue.

Trains configs/nets/lenet_solver.prototxt (10,000 iterations of batch 64) in one
process, checks the final test accuracy on the 10,000 test images, and checks
that `ps-net test` on the written .caffemodel reports the same accuracy.
"""
import json
import pathlib
import subprocess

from conftest import ROOT


def run_json(args, timeout):
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args[:2]} failed: {proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_lenet_reaches_89_percent(build_dir, fashion_mnist, tmp_path: pathlib.Path):
    solver_text = (ROOT / "configs/nets/lenet_solver.prototxt").read_text()
    solver_text = solver_text.replace('snapshot_prefix: "runs/lenet/lenet"',
                                      f'snapshot_prefix: "{tmp_path}/lenet"')
    assert str(tmp_path) in solver_text, "the solver's snapshot_prefix changed; update this test"
    solver = tmp_path / "solver.prototxt"
    solver.write_text(solver_text)

    events = run_json([str(build_dir / "bin/ps-net"), "train", "--solver", str(solver),
                       "--json", "--threads", "2"], timeout=1500)
    tests = [e for e in events if e["event"] == "test"]
    assert tests, "no test evaluation was reported"
    final = tests[-1]
    assert final["iter"] == 10000
    assert final["accuracy"] >= 0.89, f"final accuracy {final['accuracy']:.4f} < 0.89"
    model = tmp_path / "lenet_iter_10000.caffemodel"
    assert model.exists()
    assert (tmp_path / "lenet_iter_10000.solverstate").exists()

    report = run_json([str(build_dir / "bin/ps-net"), "test", "--model",
                       str(ROOT / "configs/nets/lenet_train_test.prototxt"), "--weights",
                       str(model), "--iterations", "100", "--json", "--threads", "2"],
                      timeout=300)
    assert len(report) == 1
    assert abs(report[0]["accuracy"] - final["accuracy"]) < 1e-6
