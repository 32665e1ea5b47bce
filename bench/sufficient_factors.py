"""Sufficient factors off, push-only and broadcast: bytes pushed and pulled and
images/s of an fc-heavy MLP (tests/e2e/nets/mlp_wide.prototxt: 784 -> 1024 ->
1024 -> 10, batch 16 a worker), 2 CPU workers and 1 shard in bsp, run by
ps-train; each round runs the three in turn so that a load change on the
machine hits all of them.

    python3 bench/sufficient_factors.py --iters 300 --rounds 3
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]


MODES = (False, True, "broadcast")  # transport.sufficient_factors


def write_job(folder: pathlib.Path, batch: int, iters: int, factors) -> pathlib.Path:
    data = ROOT / "data" / "fashion-mnist"
    net = (ROOT / "tests/e2e/nets/mlp_wide.prototxt").read_text()
    (folder / "net.prototxt").write_text(net.replace("BATCH", str(batch))
                                         .replace("DATA", str(data)))
    (folder / "solver.prototxt").write_text(
        f'net: "{folder}/net.prototxt"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\n'
        f'lr_policy: "fixed"\ndisplay: 50\nmax_iter: {iters}\nsnapshot: 0\n'
        f'snapshot_prefix: "{folder}/snap"\nrandom_seed: 7\nsolver_mode: CPU\n')
    name = {False: "sf-off", True: "sf-push", "broadcast": "sf-broadcast"}[factors]
    job = folder / f"{name}.yaml"
    job.write_text(json.dumps({
        "name": name, "solver": str(folder / "solver.prototxt"),
        "cluster": {"servers": 1, "workers": 2, "worker_devices": "cpu",
                    "threads_per_worker": 1},
        "consistency": {"mode": "bsp"}, "engine": "fast",
        # host_aggregation false: each worker pushes and pulls its own (auto would sum
        # the two local workers' gradients and push them dense once)
        "transport": {"kind": "tcp", "sufficient_factors": factors, "host_aggregation": False},
        "output": str(folder / "runs")}))
    return job


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=16)
    args = p.parse_args()
    results: dict = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for factors in MODES:
                folder = pathlib.Path(tmp) / f"{r}-{factors}"
                folder.mkdir()
                job = write_job(folder, args.batch, args.iters, factors)
                subprocess.run([sys.executable, "-m", "pstrain", str(job), "--quiet"],
                               check=True, timeout=1800)
                summary = json.loads((folder / "runs" / job.stem / "summary.json").read_text())
                results[factors].append(summary)
    for factors, runs in results.items():
        ips = [s["images_per_second"] for s in runs]
        pushes = 2 * args.iters  # two workers
        pulls = 2 * args.iters + 1  # worker 0 also pulls the final weights
        print(f"sufficient_factors {str(factors).lower():9}: images/s median "
              f"{statistics.median(ips):7.1f} (runs {', '.join(f'{x:.1f}' for x in ips)}), "
              f"bytes_pushed {runs[0]['bytes_pushed']} ({runs[0]['bytes_pushed'] / pushes:,.0f} "
              f"a push), bytes_pulled {runs[0]['bytes_pulled']} "
              f"({runs[0]['bytes_pulled'] / pulls:,.0f} a pull)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
