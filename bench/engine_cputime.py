#!/usr/bin/env python3
"""CPU time per forward+backward iteration (1 thread) of two ps-net builds or
engines side by side, on AVX-512 as the machine is and on AVX2 emulated with
ONEDNN_MAX_CPU_ISA=AVX2 for oneDNN, OPENBLAS_CORETYPE=Haswell for OpenBLAS and
PSTRAIN_CPU_ISA=avx2 for our own vector kernels.

Load-robust as bench/net_cputime.py: CPU time (wait4 rusage) of runs with two
iteration counts, the difference divided by the difference in iterations, so
set-up (net construction, engine auto's timing, warm-up) cancels. The two
configurations alternate; medians over --runs rounds.

usage: python3 bench/engine_cputime.py --a "LABEL=PS_NET [ARGS...]" --b "LABEL=PS_NET [ARGS...]"
         [--runs 3] [--markdown]
example: --a "fast=build/bin/ps-net --engine fast" --b "auto=build/bin/ps-net --engine auto"
"""
import argparse
import os
import pathlib
import shlex
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
# name, model, extra args, short and long iteration counts
NETS = [("LeNet b64", "configs/nets/lenet_bench.prototxt", [], 10, 40),
        ("CIFAR-10 quick b100", "configs/nets/cifar10_quick_bench.prototxt", [], 3, 13),
        ("AlexNet b10", "configs/nets/alexnet_deploy.prototxt", ["--batch", "10"], 1, 3)]


def parse(spec):
    label, _, rest = spec.partition("=")
    words = shlex.split(rest)
    # the program (through the word naming ps-net: "env VAR=x path/ps-net"
    # works), then its flags (put after "time ...")
    end = next(i for i, w in enumerate(words) if w.endswith("ps-net")) + 1
    return label, words[:end], words[end:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", required=True)
    parser.add_argument("--b", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    opts = parser.parse_args()
    configs = [parse(opts.a), parse(opts.b)]
    rows = []
    for isa in ("native", "AVX2"):
        env = dict(os.environ)
        env.pop("ONEDNN_MAX_CPU_ISA", None)
        if isa == "AVX2":
            env.update(ONEDNN_MAX_CPU_ISA="AVX2", OPENBLAS_CORETYPE="Haswell",
                       PSTRAIN_CPU_ISA="avx2")
        for name, model, extra, short, long in NETS:
            samples = {label: [] for label, _, _ in configs}
            for _ in range(opts.runs):
                for label, program, flags in configs:
                    a = cpu_seconds_flags(program, flags, model, extra, short, env)
                    b = cpu_seconds_flags(program, flags, model, extra, long, env)
                    samples[label].append((b - a) / (long - short) * 1000)
            medians = {k: statistics.median(v) for k, v in samples.items()}
            rows.append((isa, name, medians, samples))
            print(isa, name, {k: round(v, 2) for k, v in medians.items()},
                  {k: [round(x, 1) for x in v] for k, v in samples.items()}, flush=True)
    if opts.markdown:
        la, lb = configs[0][0], configs[1][0]
        print(f"\n| ISA | net | {la} ms | {lb} ms | {lb} / {la} |")
        print("| --- | --- | ---: | ---: | ---: |")
        for isa, name, m, _ in rows:
            print(f"| {isa} | {name} | {m[la]:.1f} | {m[lb]:.1f} | {m[lb] / m[la]:.2f} |")


def cpu_seconds_flags(program, flags, model, extra, iterations, env):
    args = program + ["time", "--model", model, "--threads", "1", "--iterations",
                      str(iterations), "--json"] + extra + flags
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"failed: {shlex.join(args)}")
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
