#!/usr/bin/env python3
"""pstrain.DistributedSolver over numpy arrays against the same job reading
LMDB through ps-train (issue 26's speed check): LeNet on Fashion-MNIST, 2 CPU
workers of batch 64, bsp, 1 server, --iters iterations each, no test.

  lmdb:    configs/nets/lenet_train_test.prototxt as it is (Data layer, the
           LMDB of scripts/prepare_data.sh, scale 1/256), run by pstrain.Job;
  arrays:  the same net with its TRAIN Data layer replaced by a MemoryData layer
           of the same batch, fed by DistributedSolver.set_input_arrays with the
           60,000 training images read from Debian's IDX files and scaled by
           1/256 in numpy (MemoryData applies no transform), driven by solve().

Both figures are summary.json's images_per_second (every worker's images over
the training time, start-up excluded), from the same runner. Each round runs
both, the order flipping every round; medians over --rounds and the median of
the rounds' ratios (arrays / lmdb) are printed with the CPU model and ISA.

usage: python3 bench/distributed_arrays.py [--rounds 3] [--iters 400]
"""
from __future__ import annotations

import argparse
import gzip
import pathlib
import platform
import re
import statistics
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import pstrain  # noqa: E402
from pstrain.config import parse_job  # noqa: E402

IDX = pathlib.Path("/usr/share/datasets/fashion-mnist")
MEMORY = """layer {
  name: "fmnist"
  type: "MemoryData"
  top: "data"
  top: "label"
  include { phase: TRAIN }
  memory_data_param { batch_size: 64 channels: 1 height: 28 width: 28 }
}"""


def cpu() -> str:
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                  if l.startswith("model name")), platform.processor())
    flags = open("/proc/cpuinfo").read()
    return f"{model}, {'AVX-512' if 'avx512f' in flags else 'AVX2'}"


def idx(name: str, offset: int) -> np.ndarray:
    return np.frombuffer(gzip.open(IDX / name).read(), np.uint8, offset=offset)


def job(folder: pathlib.Path, name: str, net: pathlib.Path, iters: int) -> dict:
    solver = (ROOT / "configs/nets/lenet_solver.prototxt").read_text()
    solver = re.sub(r'(?m)^net:.*$', f'net: "{net}"', solver)
    path = folder / f"{name}_solver.prototxt"
    path.write_text(solver)
    return {"name": name, "solver": str(path), "output": str(folder / "runs"),
            "solver_overrides": {"max_iter": iters, "test_interval": 0, "test_iter": 0,
                                 "snapshot": 0, "display": 50, "test_initialization": False},
            "cluster": {"servers": 1, "workers": 2, "worker_devices": "cpu"},
            "consistency": {"mode": "bsp", "staleness": 0}, "security": "none"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=400)
    args = ap.parse_args()
    import pstrain.caffe as caffe
    caffe.init_log(1)
    x = (idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32)
         * np.float32(0.00390625))
    y = idx("train-labels-idx1-ubyte.gz", 8).astype(np.float32)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pstrain-bench-arrays-"))
    text = (ROOT / "configs/nets/lenet_train_test.prototxt").read_text()
    text = text.replace('"data/fashion-mnist/', f'"{ROOT}/data/fashion-mnist/')
    lmdb_net = folder / "lenet_lmdb.prototxt"
    lmdb_net.write_text(text)
    first = text.index("layer {")
    end = text.index("layer {", first + 1)
    arrays_net = folder / "lenet_arrays.prototxt"
    arrays_net.write_text(text[:first] + MEMORY + "\n" + text[end:])
    rates: dict[str, list[float]] = {"lmdb": [], "arrays": []}
    ratios = []
    for r in range(args.rounds):
        order = ("lmdb", "arrays") if r % 2 == 0 else ("arrays", "lmdb")
        got = {}
        for kind in order:
            name = f"{kind}-{r}"
            if kind == "lmdb":
                config = parse_job(job(folder, name, lmdb_net, args.iters), name, folder)
                result = pstrain.Job(config, source=name).run(quiet=True)
            else:
                solver = pstrain.DistributedSolver.from_yaml(
                    write(folder, job(folder, name, arrays_net, args.iters)))
                solver.set_input_arrays(x, y)
                solver.solve()
                result = solver.result
            assert result.summary["status"] == "ok", result.summary["message"]
            got[kind] = result.summary["images_per_second"]
            rates[kind].append(got[kind])
        ratios.append(got["arrays"] / got["lmdb"])
        print(f"round {r + 1}: lmdb {got['lmdb']:.0f} images/s, arrays {got['arrays']:.0f} "
              f"images/s, ratio {ratios[-1]:.3f}", flush=True)
    print(f"{cpu()}; LeNet b64 x 2 workers, bsp, {args.iters} iterations, {args.rounds} rounds")
    print(f"median images/s: lmdb {statistics.median(rates['lmdb']):.0f}, arrays "
          f"{statistics.median(rates['arrays']):.0f}; arrays / lmdb = "
          f"{statistics.median(ratios):.3f} (median of the rounds' ratios)")


def write(folder: pathlib.Path, data: dict) -> pathlib.Path:
    import yaml
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


if __name__ == "__main__":
    main()
