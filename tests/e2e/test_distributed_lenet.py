"""LeNet on Fashion-MNIST from Python with pstrain.DistributedSolver: the default
job (configs/fmnist_lenet.yaml: 2 CPU workers, ssp with staleness 2, 3000
iterations each) driven step by step reaches >= 0.88 test accuracy, both in
worker 0's final test and in the driver's own test() on the pulled weights
(issue: several GPUs and hosts from Python)."""
import pathlib

from conftest import ROOT

import pstrain


def test_lenet_from_python_with_two_ssp_workers_reaches_88_percent(fashion_mnist,
                                                                  tmp_path: pathlib.Path):
    import pstrain.caffe as caffe
    caffe.init_log(1)
    solver = pstrain.DistributedSolver.from_yaml(
        ROOT / "configs" / "fmnist_lenet.yaml", {"output": str(tmp_path), "data": None})
    assert solver.max_iter == 3000
    steps = []
    with solver:
        while solver.iter < solver.max_iter:
            steps.append(solver.step(1000))
        assert [s.iter for s in steps] == [1000, 2000, 3000]
        assert steps[-1].staleness["max"] <= 2 + 1
        local = solver.test()[0]
        assert local["accuracy"] >= 0.88, local
    summary = solver.result.summary
    assert summary["status"] == "ok", summary["message"]
    assert summary["final_test_iteration"] == 3000
    assert summary["final_test_accuracy"] >= 0.88
    assert abs(summary["final_test_accuracy"] - local["accuracy"]) < 0.01
