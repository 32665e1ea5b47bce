"""pstrain.caffe's overhead: `net.forward(); net.backward()` from Python against
`ps-net time` on the same net, one CPU thread, the same engine.

    python3 bench/python_overhead.py [--iterations 50] [--rounds 3]

For each net (LeNet b64, CIFAR-10 quick b100: the DummyData bench prototxts)
the two run in alternating rounds in one invocation (the machine is noisy); each
round reports the median forward+backward time of its iterations, and the ratio
Python / ps-net is taken of the medians over the rounds. Goal (issue: pycaffe's
interface): at most 1.05. Figures in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
NETS = [("LeNet b64", "configs/nets/lenet_bench.prototxt", 64),
        ("CIFAR-10 quick b100", "configs/nets/cifar10_quick_bench.prototxt", 100)]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

# The Python side, in its own process so that its thread settings hold.
PYTHON_TIMER = r"""
import json, statistics, sys, time
import pstrain.caffe as caffe
model, batch, iterations = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
caffe.set_engine("fast")
caffe.set_random_seed(1)
net = caffe.Net(model, caffe.TRAIN)
net.forward(); net.backward()            # warm-up, as ps-net time does
times = []
for _ in range(iterations):
    start = time.perf_counter()
    net.forward(); net.backward()
    times.append((time.perf_counter() - start) * 1000)
print(json.dumps({"median_total_ms": statistics.median(times)}))
"""


def ps_net(build: pathlib.Path) -> pathlib.Path:
    return build / "bin" / "ps-net"


def time_ps_net(build, model, batch, iterations) -> float:
    out = subprocess.run([str(ps_net(build)), "time", "--model", model, "--batch", str(batch),
                          "--iterations", str(iterations), "--threads", "1", "--engine", "fast",
                          "--json"], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, **ONE_THREAD})
    last = [json.loads(l) for l in out.stdout.splitlines() if '"event":"time"' in l][-1]
    return float(last["median_total_ms"])


def time_python(build, model, batch, iterations) -> float:
    env = {**os.environ, **ONE_THREAD, "PSTRAIN_BUILD_DIR": str(build)}
    out = subprocess.run([sys.executable, "-c", PYTHON_TIMER, model, str(batch), str(iterations)],
                         capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["median_total_ms"])


def cpu_isa() -> str:
    flags = pathlib.Path("/proc/cpuinfo").read_text() if pathlib.Path("/proc/cpuinfo").exists() else ""
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "generic"
    model = next((l.split(":", 1)[1].strip() for l in flags.splitlines()
                  if l.startswith("model name")), platform.processor())
    return f"{model}, {isa}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    build = pathlib.Path(args.build).resolve()
    print(f"# {cpu_isa()}; 1 thread; engine fast; {args.rounds} alternating rounds of "
          f"{args.iterations} iterations")
    print("| net | ps-net time (ms) | Python (ms) | Python / ps-net |")
    print("| --- | --- | --- | --- |")
    worst = 0.0
    for name, model, batch in NETS:
        native, python = [], []
        for _ in range(args.rounds):
            native.append(time_ps_net(build, model, batch, args.iterations))
            python.append(time_python(build, model, batch, args.iterations))
        n, p = statistics.median(native), statistics.median(python)
        worst = max(worst, p / n)
        print(f"| {name} | {n:.2f} | {p:.2f} | {p / n:.3f} |")
    print(f"# worst ratio {worst:.3f} (goal <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
