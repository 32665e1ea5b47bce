"""Fine-tuning in a job, as `caffe train -weights` does: the job's `weights:` key
and the solver's own `weights:` field start the servers from a .caffemodel, so
that one iteration of a 1-worker bsp job ends where `ps-net train -weights`
ends; `weights:` is refused with --resume, and a missing file is named."""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from ps_train_util import ROOT, base_job, leftover_processes, write_job
from pstrain import Job
from pstrain.cli import main

NET = ROOT / "configs/nets/lenet_train_test.prototxt"


def solver_file(folder: pathlib.Path, *, max_iter: int, seed: int, extra: str = "") -> pathlib.Path:
    """A LeNet solver without tests, its snapshots under folder/snap."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "solver.prototxt"
    path.write_text(f'net: "{NET}"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\n'
                    f'lr_policy: "fixed"\ndisplay: 1\nmax_iter: {max_iter}\n'
                    f'snapshot_prefix: "{folder}/snap"\nrandom_seed: {seed}\n'
                    f'solver_mode: CPU\n{extra}')
    return path


def ps_net(build_dir: pathlib.Path, *args: str) -> None:
    done = subprocess.run([str(build_dir / "bin/ps-net"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def differ(build_dir: pathlib.Path, a: pathlib.Path, b: pathlib.Path) -> dict:
    """`ps-net diff --max-rel 1e-6`'s report (equal: within 1e-6)."""
    done = subprocess.run([str(build_dir / "bin/ps-net"), "diff", str(a), str(b), "--json",
                           "--max-rel", "1e-6"], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1) and done.stdout, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory, build_dir, fashion_mnist):
    """W (LeNet after 3 iterations from seed 99) and one iteration of
    `ps-net train -weights W` from seed 7 (the reference)."""
    tmp = tmp_path_factory.mktemp("weights")
    ps_net(build_dir, "train", "--solver", str(solver_file(tmp / "w", max_iter=3, seed=99)),
           "--threads", "1", "--engine", "reference")
    weights = tmp / "w" / "snap_iter_3.caffemodel"
    reference = solver_file(tmp / "ref", max_iter=1, seed=7)
    ps_net(build_dir, "train", "--solver", str(reference), "--weights", str(weights),
           "--threads", "1", "--engine", "reference")
    return tmp, weights, tmp / "ref" / "snap_iter_1.caffemodel"


def one_iteration(tmp: pathlib.Path, solver: pathlib.Path, name: str, **keys) -> pathlib.Path:
    """A 1-worker bsp job of max_iter 1 (the solver's), run; its final snapshot."""
    job = base_job(tmp, name=name, solver=str(solver), solver_overrides={}, engine="reference",
                   consistency={"mode": "bsp"}, security="none", **keys)
    job["cluster"]["workers"] = 1
    result = Job.from_yaml(write_job(tmp, job, f"{name}.yaml")).run(quiet=True, timeout=240)
    assert not leftover_processes(str(result.run_dir))
    assert result.ok, result.summary
    assert result.snapshot == result.run_dir / "snapshots" / f"{name}_iter_1.caffemodel"
    return result.snapshot


def test_job_weights_start_the_servers(fine_tuned, build_dir):
    tmp, weights, reference = fine_tuned
    solver = solver_file(tmp / "job", max_iter=1, seed=7)
    # The key is a path relative to the job file.
    snapshot = one_iteration(tmp, solver, "tuned",
                             weights=str(weights.relative_to(tmp)))
    report = differ(build_dir, snapshot, reference)
    assert report["equal"], report
    # The control: without the weights the same job ends elsewhere.
    assert not differ(build_dir, one_iteration(tmp, solver, "fresh"), reference)["equal"]


def test_later_weights_files_win(fine_tuned, build_dir):
    """Files loaded in order, a later one's layers replacing an earlier one's
    (Caffe's -weights A,B): [other, W] is W; [W, other] is not."""
    tmp, weights, reference = fine_tuned
    ps_net(build_dir, "train", "--solver", str(solver_file(tmp / "o", max_iter=1, seed=5)),
           "--threads", "1", "--engine", "reference")
    other = tmp / "o" / "snap_iter_1.caffemodel"
    solver = solver_file(tmp / "order", max_iter=1, seed=7)
    last = one_iteration(tmp, solver, "w-last", weights=f"{other},{weights}")
    assert differ(build_dir, last, reference)["equal"]
    first = one_iteration(tmp, solver, "w-first", weights=[str(weights), str(other)])
    assert not differ(build_dir, first, reference)["equal"]


def test_a_fine_tuned_run_resumes_from_its_checkpoint(fine_tuned, capsys):
    """`ps-train --resume RUN_DIR` (the run folder's job, weights: and all) goes on
    from the checkpoint, and says which one."""
    tmp, weights, _ = fine_tuned
    solver = solver_file(tmp / "resumed", max_iter=1, seed=7)
    run_dir = one_iteration(tmp, solver, "resumed", weights=str(weights)).parent.parent
    capsys.readouterr()
    assert main(["--resume", str(run_dir), "--quiet", "--set",
                 "solver_overrides.max_iter=2"]) == 0
    out = capsys.readouterr().out
    # The solver's own snapshot_prefix is replaced, and the run says so at its start.
    assert out.splitlines()[0] == (
        f'[resumed] warning: {solver}: snapshot_prefix "{tmp}/resumed/snap" is replaced by the '
        f"run folder's {run_dir}/snapshots/resumed (a job's snapshots and checkpoints stay in "
        f"its run folder)")
    manifest = run_dir / "snapshots" / "resumed_iter_1.manifest"
    assert f"resuming from the checkpoint at iteration 1: {manifest}" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["start_iteration"] == 1
    assert summary["iterations"] == 2 and summary["resumed_from"] == str(manifest)
    assert "--weights" not in out


def test_the_solvers_weights_field_is_honoured(fine_tuned, build_dir):
    """Caffe loads the solver's weights (comma-separated files, in order) unless
    -weights is given; a job without weights: does the same."""
    tmp, weights, reference = fine_tuned
    solver = solver_file(tmp / "in_solver", max_iter=1, seed=7,
                         extra=f'weights: "../w/{weights.name}"\n')
    report = differ(build_dir, one_iteration(tmp, solver, "solver-weights"), reference)
    assert report["equal"], report


def test_job_weights_win_over_the_solvers(fine_tuned, build_dir, capsys):
    tmp, weights, reference = fine_tuned
    other = tmp / "other.caffemodel"
    other.write_bytes(b"not loaded")
    solver = solver_file(tmp / "both", max_iter=1, seed=7, extra=f'weights: "{other}"\n')
    path = write_job(tmp, base_job(tmp, name="both", solver=str(solver), solver_overrides={},
                                   weights=str(weights)), "both.yaml")
    assert main([str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    workers = [l for l in out.splitlines() if "/ps-worker " in l]
    assert f"--weights {weights}" in workers[0] and "--weights" not in workers[1]
    assert f"weights {other} not loaded: the job's weights: {weights} takes precedence" in out
    report = differ(build_dir, one_iteration(tmp, solver, "precedence",
                                             weights=str(weights)), reference)
    assert report["equal"], report


def expect_error(capsys, args: list[str], message: str) -> None:
    assert main([str(a) for a in args]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == f"ps-train: {message}", captured.err


def test_a_missing_weights_file_is_named(capsys, tmp_path, build_dir):
    path = write_job(tmp_path, base_job(tmp_path, weights="models/none.caffemodel"))
    expect_error(capsys, [path, "--dry-run"],
                 f"{path}: weights: file not found: {tmp_path / 'models/none.caffemodel'}")
    solver = solver_file(tmp_path / "s", max_iter=1, seed=7, extra='weights: "a.caffemodel"\n')
    path = write_job(tmp_path, base_job(tmp_path, solver=str(solver)))
    expect_error(capsys, [path, "--dry-run"],
                 f"{path}: solver: {solver}: weights file 'a.caffemodel' not found (looked "
                 f"beside the solver and in the folders above it)")
    # solver_overrides.weights replaces the solver's field, its paths read as the solver's.
    path = write_job(tmp_path, base_job(tmp_path, solver=str(solver),
                                        solver_overrides={"weights": ["b.caffemodel"]}))
    expect_error(capsys, [path, "--dry-run"],
                 f"{path}: solver: {solver}: weights file 'b.caffemodel' not found (looked "
                 f"beside the solver and in the folders above it)")
    assert not (tmp_path / "runs").exists()


def test_several_weights_files_go_to_worker_0_in_order(capsys, tmp_path, build_dir):
    """As Caffe's -weights: files separated by commas (or a YAML list), loaded in
    order by worker 0 (a later file wins for a layer both hold)."""
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.caffemodel").write_bytes(b"")
    solver = solver_file(tmp_path / "s", max_iter=1, seed=7,
                         extra=f'weights: "{tmp_path}/a.caffemodel,../c.caffemodel"\n'
                               f'weights: "../b.caffemodel"\n')
    a, b, c = (tmp_path / f"{n}.caffemodel" for n in "abc")
    for weights, expected in ((None, f"{a},{c},{b}"),            # the solver's, in order
                              ("b.caffemodel, a.caffemodel", f"{b},{a}"),
                              (["c.caffemodel", "a.caffemodel"], f"{c},{a}")):
        path = write_job(tmp_path, base_job(tmp_path, solver=str(solver), weights=weights))
        assert main([str(path), "--dry-run"]) == 0
        out = capsys.readouterr().out
        workers = [l for l in out.splitlines() if "/ps-worker " in l]
        assert f" --weights {expected} " in workers[0] + " ", workers[0]
        assert "--weights" not in workers[1]


def test_weights_conflict_with_resume(capsys, tmp_path, build_dir):
    weights = tmp_path / "w.caffemodel"
    weights.write_bytes(b"")
    path = write_job(tmp_path, base_job(tmp_path, weights=str(weights)))
    run = tmp_path / "runs" / "tiny"
    message = (f"{path}: weights: cannot be used with --resume: a resumed run continues from "
               f"its checkpoint, and weights: ({weights}) sets the initial weights of a fresh "
               f"run only; drop it (--set weights=null) to resume, or start a new run without "
               f"--resume to fine-tune")
    expect_error(capsys, [path, "--resume", run], message)
    expect_error(capsys, [path, "--resume", run, "--dry-run"], message)
    assert not run.exists(), "nothing may start"
