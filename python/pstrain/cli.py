"""ps-train: the command line, a thin layer over the API (Job, compare).

    ps-train JOB.yaml [--set dotted.key=value ...] [--dry-run] [--resume RUN_DIR] [--overwrite]
             [--quiet]
    ps-train --resume RUN_DIR [--set ...]
    ps-train compare RUN_DIR|SWEEP_DIR ... [--out FILE.png] [--thresholds 0.85,0.88] [--csv | --json]
    ps-train export RUN_DIR           # (re)write RUN_DIR/tensorboard/ and metrics.csv now
    ps-train sweep JOB.yaml --grid dotted.key=v1,v2 ... [--seeds N] [--set ...] [--out DIR]
    ps-train node [FLAGS]             # run the program of $PSTRAIN_ROLE (schedulers)
    ps-train --version

Exit status: 0 ok, 1 the job failed, 2 bad input (nothing started), 130 interrupted,
141 stdout closed early (a pipe such as `| head`; the rest of the output is dropped).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys

from . import __version__, tensorboard
from .compare import THRESHOLDS, compare, parse_thresholds
from .errors import JobError
from .metrics import accuracy_text, read_records
from .resume import check_weights
from .runner import Job

EXIT = {"ok": 0, "failed": 1, "interrupted": 130}
EXIT_BROKEN_PIPE = 141   # 128 + SIGPIPE, what a shell reports for a tool its pipe closed on

# `ps-train --help` lists them after the options of a run.
COMMANDS = (
    ("JOB.yaml", "run a job (the options above)"),
    ("compare RUN_DIR ...", "overlay runs, tabulate time-to-accuracy"),
    ("export RUN_DIR", "write TensorBoard files and metrics.csv now"),
    ("sweep JOB.yaml --grid K=V1,V2", "a job over a grid and seeds, a report"),
    ("node [FLAGS]", "run ps-server/ps-worker per $PSTRAIN_ROLE"),
)


def _commands_epilog() -> str:
    width = max(len(c) for c, _ in COMMANDS)
    lines = [f"  ps-train {c.ljust(width)}  {what}" for c, what in COMMANDS]
    return ("commands (ps-train compare|export|sweep --help: their options):\n"
            + "\n".join(lines) + "\n\nexit status: 0 ok, 1 the job failed, 2 bad input "
            "(nothing started), 130 interrupted")


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ps-train", description="Run a PSTrain job, or one of "
                                "the commands below.", epilog=_commands_epilog(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("job", nargs="?", type=pathlib.Path, help="the job file (YAML)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="override a job key, e.g. cluster.workers=4")
    p.add_argument("--dry-run", action="store_true",
                   help="print the resolved job and every command; start nothing")
    p.add_argument("--resume", type=pathlib.Path, metavar="RUN_DIR",
                   help="continue a run from its newest complete checkpoint")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing run folder output/name (default: a new run goes "
                        "to name-2, name-3, ...)")
    p.add_argument("--quiet", action="store_true", help="plain log lines, no progress bar")
    p.add_argument("--version", action="version", version=f"ps-train {__version__}")
    return p


def _compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ps-train compare",
                                description="Overlay runs and tabulate time-to-accuracy.")
    p.add_argument("runs", nargs="+", type=pathlib.Path, metavar="RUN_DIR")
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("compare.png"),
                   help="the PNG to write (default compare.png)")
    p.add_argument("--thresholds", default=",".join(f"{a:g}" for a in THRESHOLDS),
                   help="test accuracies for the time-to-accuracy columns, comma-separated "
                        "(default %(default)s)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv",
                     help="print the table as CSV (one row a run)")
    fmt.add_argument("--json", dest="fmt", action="store_const", const="json",
                     help="print the table as a JSON list (one object a run)")
    p.set_defaults(fmt="text")
    return p


def _export_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ps-train export",
                                description="Write a run folder's TensorBoard event files "
                                "(RUN_DIR/tensorboard/) and metrics.csv from its metrics.jsonl; "
                                "also while the run is going (a run writes them when it ends).")
    p.add_argument("run", type=pathlib.Path, help="the run folder")
    return p


def _export(run: pathlib.Path) -> int:
    metrics = run / "metrics.jsonl"
    if not metrics.is_file():
        raise JobError(f"{run}: not a run folder (no metrics.jsonl)")
    written = tensorboard.export(read_records(metrics), run)
    print(f"wrote {written['tensorboard']} and {written['csv']}")
    return 0


def _sweep_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ps-train sweep",
                                description="Run a job over a grid of values and seeds, one "
                                            "run after another, and write a report folder.")
    p.add_argument("job", type=pathlib.Path, help="the job file (YAML)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="a job key and its values (repeat for a product grid)")
    p.add_argument("--seeds", type=int, default=1,
                   help="runs per grid point, with solver_overrides.random_seed 1..N")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="override a job key in every run")
    p.add_argument("--out", type=pathlib.Path,
                   help="the sweep folder (default: runs/<name>-sweep beside the job file)")
    p.add_argument("--thresholds", default=",".join(f"{a:g}" for a in THRESHOLDS),
                   help="test accuracies for the time-to-accuracy columns (default %(default)s)")
    p.add_argument("--timeout", type=float, help="give up a run after this many seconds")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the report of an existing sweep folder (--out) without running")
    return p


def _sweep(args: argparse.Namespace) -> int:
    from .sweep import parse_grid, run_sweep, write_report
    thresholds = parse_thresholds(args.thresholds)
    if args.report_only:
        if args.out is None:
            raise JobError("--report-only needs --out SWEEP_DIR")
        print(write_report(args.out.resolve(), thresholds))
        return 0
    folder = run_sweep(args.job, parse_grid(args.grid), args.seeds, overrides=args.overrides,
                       out=args.out, thresholds=thresholds, timeout=args.timeout)
    print((folder / "report" / "table.md").read_text().rstrip())
    print(f"report: {folder / 'report'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        code = _main(argv)
        sys.stdout.flush()   # here, where a closed pipe can still be caught
        return code
    except BrokenPipeError:
        # `ps-train ... | head -1`: the reader left. Drop the rest of the output
        # (also what the interpreter would flush at exit) and end as a Unix tool does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _main(argv: list[str]) -> int:
    try:
        if argv and argv[0] == "node":
            from . import node
            return node.main(argv[1:])
        if argv and argv[0] == "compare":
            args = _compare_parser().parse_args(argv[1:])
            print(compare(args.runs, args.out, parse_thresholds(args.thresholds), args.fmt))
            return 0
        if argv and argv[0] == "export":
            args = _export_parser().parse_args(argv[1:])
            return _export(args.run)
        if argv and argv[0] == "sweep":
            return _sweep(_sweep_parser().parse_args(argv[1:]))
        return _run(_run_parser().parse_args(argv))
    except JobError as e:
        print(f"ps-train: {e}", file=sys.stderr)
        return e.exit_code


def _run(args: argparse.Namespace) -> int:
    if args.job is None and args.resume is None:
        print("ps-train: give a job file (or --resume RUN_DIR); see ps-train --help",
              file=sys.stderr)
        return 2
    if args.job is not None:
        job = Job.from_yaml(args.job, args.overrides)
        if args.resume is not None:
            resume = args.resume.resolve()
            job = Job.from_yaml(args.job, args.overrides +
                                [f"output={resume.parent}", f"name={resume.name}"])
    else:
        # The run's own weights: started it; its checkpoint supersedes them now.
        job = Job.from_run_dir(args.resume, ["weights=null"] + args.overrides)
    if args.resume is not None:
        check_weights(job.config, job.source)
    if args.dry_run:
        print(job.dry_run(overwrite=args.overwrite))
        return 0
    result = job.run(resume=args.resume is not None, overwrite=args.overwrite,
                     progress="lines" if args.quiet else "auto")
    s = result.summary
    acc_text = accuracy_text(s)
    acc_text = f", {acc_text}" if acc_text else ""
    print(f"{s['name']}: {s['status']} after {s['wall_seconds']:.1f} s, {s['iterations']} "
          f"iterations{acc_text}; run folder {result.run_dir}")
    return EXIT.get(result.status, 1)


if __name__ == "__main__":
    sys.exit(main())
