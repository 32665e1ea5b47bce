"""A Python layer in a parameter-server job: every ps-worker runs it in its
embedded interpreter, knowing its rank and the number of workers, and a
parameter it adds with self.blobs.add_blob is trained by the servers like any
other (issue: pycaffe's interface, Python layers usable from jobs)."""
import json
import pathlib

from conftest import ROOT  # noqa: F401  (sys.path for pstrain_testing)
from ps_job import run_job

LAYER = '''
import json, os
import pstrain.caffe as caffe


class LearnedScale(caffe.Layer):
    """top = w * bottom with one learned w, starting at 1."""

    def setup(self, bottom, top):
        report = os.path.join(self.param_str, f"rank{self.rank}.json")
        with open(report, "w") as f:
            json.dump({"rank": self.rank, "num_workers": self.num_workers,
                       "phase": self.phase}, f)
        self.blobs.add_blob(1)
        self.blobs[0].data[...] = 1.0

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].shape)

    def forward(self, bottom, top):
        top[0].data[...] = self.blobs[0].data[0] * bottom[0].data

    def backward(self, top, propagate_down, bottom):
        self.blobs[0].diff[...] += (top[0].diff * bottom[0].data).sum()
        if propagate_down[0]:
            bottom[0].diff[...] = self.blobs[0].data[0] * top[0].diff
'''

NET = '''
name: "pyjob"
layer { name: "data" type: "DummyData" top: "x" top: "y"
        dummy_data_param { shape { dim: 8 dim: 4 } shape { dim: 8 dim: 2 }
                           data_filler { type: "uniform" min: -1 max: 1 }
                           data_filler { type: "constant" value: 0.5 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "scale" type: "Python" bottom: "ip" top: "out"
        python_param { module: "job_layers" layer: "LearnedScale" param_str: "REPORTS" } }
layer { name: "loss" type: "EuclideanLoss" bottom: "out" bottom: "y" top: "loss" }
'''


def test_python_layer_runs_in_every_worker_and_its_parameter_is_trained(
        build_dir, tmp_path: pathlib.Path, monkeypatch):
    reports = tmp_path / "reports"
    reports.mkdir()
    (tmp_path / "job_layers.py").write_text(LAYER)
    (tmp_path / "net.prototxt").write_text(NET.replace("REPORTS", str(reports)))
    (tmp_path / "solver.prototxt").write_text(
        f'net: "{tmp_path}/net.prototxt"\nbase_lr: 0.1\nlr_policy: "fixed"\nmax_iter: 20\n'
        f'display: 5\nsnapshot_after_train: true\nsnapshot_prefix: "{tmp_path}/snap"\n'
        'random_seed: 5\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run_job(build_dir, tmp_path / "solver.prototxt", workers=2, mode="bsp",
                     timeout=240)
    assert all(code == 0 for code in result.returncodes.values()), result.stderr

    seen = sorted(json.loads(p.read_text())["rank"] for p in reports.glob("rank*.json"))
    assert seen == [0, 1]
    for p in reports.glob("rank*.json"):
        assert json.loads(p.read_text())["num_workers"] == 2

    import pstrain.caffe as caffe
    net = caffe.Net(str(tmp_path / "net.prototxt"), caffe.TRAIN,
                    weights=str(tmp_path / "snap_iter_20.caffemodel"))
    learned = float(net.params["scale"][0].data[0])
    assert learned != 1.0, "the Python layer's parameter was never updated"
    losses = [e["loss"] for e in result.of("train") if "loss" in e]
    assert losses and all(l == l for l in losses)  # finite, not NaN
