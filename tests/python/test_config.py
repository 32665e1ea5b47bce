"""Job-file validation: one message naming the file and key, exit code 2,
nothing started; --set overrides; --dry-run."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from ps_train_util import ROOT, base_job, write_job
from pstrain import Job, JobError, programs
from pstrain.cli import main


def ps_train(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def expect_error(capsys, tmp_path: pathlib.Path, job: dict, message: str, *extra: str) -> None:
    path = write_job(tmp_path, job)
    code, out, err = ps_train(capsys, path, *extra)
    assert code == 2
    assert err.strip() == f"ps-train: {path}: {message}"
    assert not (tmp_path / "runs").exists(), "nothing may start on bad input"


def test_unknown_key(capsys, tmp_path):
    job = base_job(tmp_path)
    job["cluster"]["wrokers"] = 2
    expect_error(capsys, tmp_path, job,
                 "unknown key 'cluster.wrokers'; did you mean 'cluster.workers'?")


def test_unknown_top_level_key(capsys, tmp_path):
    expect_error(capsys, tmp_path, base_job(tmp_path, solvr="x"),
                 "unknown key 'solvr'; did you mean 'solver'?")
    expect_error(capsys, tmp_path, base_job(tmp_path, zzz="x"), "unknown key 'zzz'")


def test_wrong_type(capsys, tmp_path):
    job = base_job(tmp_path)
    job["cluster"]["workers"] = "two"
    expect_error(capsys, tmp_path, job, "cluster.workers: must be an integer >= 1, got 'two'")


def test_bad_shared_memory_size(capsys, tmp_path):
    for bad in (-1, 4097, "16M", True):
        job = base_job(tmp_path, transport={"kind": "ipc", "shared_memory_mb": bad})
        expect_error(capsys, tmp_path, job,
                     f"transport.shared_memory_mb: must be an integer in [0, 4096], got {bad!r}")


def test_io_threads_reach_every_worker_and_shard(capsys, tmp_path):
    """transport.io_threads (default auto: 1 on one machine) is each ps-worker's and each
    ps-server's --io-threads; bad values are one error naming the key."""
    assert "--io-threads" not in Job.from_yaml(
        write_job(tmp_path, base_job(tmp_path), "default.yaml")).dry_run()
    code, out, err = ps_train(capsys, write_job(tmp_path, base_job(
        tmp_path, transport={"io_threads": 4})), "--dry-run")
    assert code == 0, err
    workers = [l for l in out.splitlines() if "/ps-worker " in l]
    servers = [l for l in out.splitlines() if "/ps-server " in l]
    assert len(workers) == 2 and servers
    assert all("--io-threads 4" in c for c in workers), workers
    assert all("--io-threads 4" in c for c in servers), servers
    for bad in (0, 65, 2.5, "4", "Auto", True):
        expect_error(capsys, tmp_path, base_job(tmp_path, transport={"io_threads": bad}),
                     f"transport.io_threads: must be auto or an integer in [1, 64], got {bad!r}")


def test_bad_server_threads(capsys, tmp_path):
    for bad in (0, -2, 1.5, "two", True):
        job = base_job(tmp_path)
        job["cluster"]["server_threads"] = bad
        expect_error(capsys, tmp_path, job,
                     f"cluster.server_threads: must be auto or an integer >= 1, got {bad!r}")


def test_server_threads_reach_ps_server(tmp_path, monkeypatch):
    job = base_job(tmp_path, data={"prepare": "fashion-mnist"})   # planned, never run
    job["cluster"]["server_threads"] = 3
    assert "--threads 3" in " ".join(Job.from_yaml(write_job(tmp_path, job)).plan()
                                     .server_command(0, None))
    # auto: this machine's cores shared by the job's processes (1 server + 2 workers).
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(7)))
    del job["cluster"]["server_threads"]
    plan = Job.from_yaml(write_job(tmp_path, job)).plan()
    assert plan.job.cluster.server_threads == "auto"
    assert "--threads 2" in " ".join(plan.server_command(0, None))
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})
    assert "--threads 1" in " ".join(plan.server_command(0, None))


def test_missing_solver_file(capsys, tmp_path):
    job = base_job(tmp_path, solver="nets/missing_solver.prototxt")
    expect_error(capsys, tmp_path, job,
                 f"solver: file not found: {tmp_path / 'nets/missing_solver.prototxt'}")


def test_bad_mode(capsys, tmp_path):
    job = base_job(tmp_path, consistency={"mode": "sync", "staleness": 0})
    expect_error(capsys, tmp_path, job,
                 "consistency.mode: must be one of bsp, ssp, asp, got 'sync'")


def test_straggler_rank_out_of_range(capsys, tmp_path):
    job = base_job(tmp_path)
    job["cluster"]["straggler"] = {"rank": 2, "delay_ms": 40}
    expect_error(capsys, tmp_path, job, "cluster.straggler.rank: must be in [0, 2) "
                 "(cluster.workers is 2), got 2")


def test_more_gpus_than_exist(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(programs, "cuda_build", lambda: True)
    n = programs.gpu_count()
    job = base_job(tmp_path)
    job["cluster"]["worker_devices"] = [n, n + 1]
    expect_error(capsys, tmp_path, job, f"cluster.worker_devices: GPU {n} does not exist "
                 f"(this machine has {n} GPUs per nvidia-smi -L)")


def test_hosts_slurm_outside_an_allocation(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    job = base_job(tmp_path)
    job["cluster"]["hosts"] = "slurm"
    expect_error(capsys, tmp_path, job, "cluster.hosts: slurm: not inside a Slurm allocation "
                 "(SLURM_JOB_ID is not set); run ps-train from an sbatch script or salloc")


def test_bad_solver_override(capsys, tmp_path):
    job = base_job(tmp_path)
    job["solver_overrides"]["max_iters"] = 10
    expect_error(capsys, tmp_path, job, "solver_overrides.max_iters: 'max_iters' is not a "
                 "SolverParameter field (see proto/caffe.proto); did you mean 'max_iter'?")
    job["solver_overrides"] = {"base_lr": "fast"}
    expect_error(capsys, tmp_path, job, "solver_overrides.base_lr: must be a number, got 'fast'")


def test_closed_string_fields_are_checked_before_anything_runs(capsys, tmp_path):
    path = write_job(tmp_path, base_job(tmp_path))
    code, _, err = ps_train(capsys, path, "--dry-run", "--set", "solver_overrides.lr_policy=steps")
    assert code == 2
    assert err.strip() == (f"ps-train: {path}: solver_overrides.lr_policy: must be one of "
                           "fixed, step, exp, inv, multistep, poly, sigmoid, got 'steps'")
    code, _, err = ps_train(capsys, path, "--dry-run", "--set", "solver_overrides.type=adam")
    assert code == 2
    assert "solver_overrides.type: must be one of SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, " \
           "Adam, got 'adam'" in err


@pytest.mark.parametrize("text, value", [("1e-3", 1e-3), ("2.5E-2", 0.025), (".5", 0.5),
                                         ("+1e+2", 100.0)])
def test_numbers_yaml_1_1_reads_as_strings_are_numbers(capsys, tmp_path, text, value):
    path = write_job(tmp_path, base_job(tmp_path))
    code, out, err = ps_train(capsys, path, "--dry-run", "--set", f"solver_overrides.base_lr={text}")
    assert code == 0, err
    assert f"base_lr: {value}" in out
    job = base_job(tmp_path)
    job["solver_overrides"]["base_lr"] = text   # as PyYAML reads `base_lr: 1e-3` in a job file
    assert Job.from_yaml(write_job(tmp_path, job)).config.solver_overrides["base_lr"] == value


def test_a_closed_string_field_is_written_quoted(tmp_path):
    from pstrain.solver import format_value, SOLVER_FIELDS
    assert format_value(SOLVER_FIELDS["lr_policy"][0], "step") == '"step"'
    assert format_value(SOLVER_FIELDS["solver_mode"][0], "CPU") == "CPU"


def test_gpu_job_is_refused(capsys):
    if programs.cuda_build() and programs.gpu_count() > 0:
        pytest.skip("this machine could run GPU jobs")
    code, _, err = ps_train(capsys, ROOT / "configs/gpu_lenet.yaml", "--dry-run")
    assert code == 2
    assert "cluster.server_device: " in err
    if programs.cuda_build():
        assert "cluster.server_device: GPU 0 does not exist (this machine has 0 GPUs" in err
    else:
        assert "server_device gpu:0 needs a CUDA build (nvcc was not found" in err


def test_gpu_workers_may_share_a_gpu(capsys, tmp_path, monkeypatch):
    # A CUDA build on a one-GPU machine, as the planner sees it.
    monkeypatch.setattr(programs, "cuda_build", lambda: True)
    monkeypatch.setattr(programs, "gpu_count", lambda: 1)
    job = base_job(tmp_path)
    job["cluster"]["worker_devices"] = [0, 0]
    job["cluster"]["server_device"] = "gpu:0"
    code, out, _ = ps_train(capsys, str(write_job(tmp_path, job)), "--dry-run")
    assert code == 0
    workers = [line for line in out.splitlines() if "ps-worker" in line]
    servers = [line for line in out.splitlines() if "ps-server" in line]
    assert len(workers) == 2
    assert all(w.startswith("CUDA_VISIBLE_DEVICES=0 ") and " --gpu 0" in w for w in workers)
    assert "--device gpu:0" in servers[0]


def test_exit_code_from_the_command(tmp_path):
    job = base_job(tmp_path)
    job["cluster"]["workers"] = 0
    path = write_job(tmp_path, job)
    done = subprocess.run([sys.executable, "-m", "pstrain", str(path)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT / "python")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"ps-train: {path}: cluster.workers: must be an integer >= 1,"
                                   f" got 0")


def test_set_overrides(tmp_path):
    path = write_job(tmp_path, base_job(tmp_path))
    job = Job.from_yaml(path, ["cluster.workers=3", "consistency.mode=bsp",
                               "solver_overrides.max_iter=7", "cluster.straggler.rank=2",
                               "cluster.straggler.delay_ms=15"])
    c = job.config
    assert c.cluster.workers == 3 and c.consistency.mode == "bsp"
    assert c.consistency.staleness == 0          # bsp is s = 0
    assert c.solver_overrides["max_iter"] == 7
    assert c.cluster.straggler.rank == 2 and c.cluster.straggler.delay_ms == 15
    same = Job.from_yaml(path, {"cluster.workers": 3})
    assert same.config.cluster.workers == 3
    with pytest.raises(JobError, match=r"unknown key 'cluster\.wrokers'"):
        Job.from_yaml(path, ["cluster.wrokers=3"])
    with pytest.raises(JobError, match=r"expected dotted.key=value"):
        Job.from_yaml(path, ["cluster.workers"])


def test_dry_run(capsys, tmp_path):
    job = base_job(tmp_path)
    job["cluster"]["straggler"] = {"rank": 1, "delay_ms": 40, "jitter_ms": 5}
    path = write_job(tmp_path, job)
    code, out, err = ps_train(capsys, path, "--dry-run", "--set", "cluster.servers=2",
                              "--set", "transport.chunk_bytes=65536")
    assert code == 0, err
    assert "# resolved job" in out and "chunk_bytes: 65536" in out
    commands = [l for l in out.splitlines() if "/ps-server " in l or "/ps-worker " in l]
    servers = [c for c in commands if "/ps-server " in c]
    workers = [c for c in commands if "/ps-worker " in c]
    assert len(servers) == 2 and len(workers) == 2
    run_dir = tmp_path / "runs" / "tiny"
    for c in servers:
        for flag in ("--num-servers 2", "--workers 2", "--bind tcp://127.0.0.1:0", "--mode ssp",
                     "--staleness 2", "--chunk-bytes 65536", "--job-key", "--json",
                     f"--solver {run_dir}/solver.prototxt"):
            assert flag in c, (flag, c)
    assert "--coordinator '<server-0 endpoint>'" in servers[1]
    assert "--coordinator" not in servers[0]
    for rank, c in enumerate(workers):
        for flag in (f"--rank {rank}", "--workers 2", "--servers", "--mode ssp", "--staleness 2",
                     "--chunk-bytes 65536", "--threads 1", "--json", "--job-key"):
            assert flag in c, (flag, c)
    assert "--straggle-ms" not in workers[0]
    assert "--straggle-ms 40 --straggle-jitter-ms 5" in workers[1]
    keys = {c.split("--job-key ")[1].split()[0] for c in commands}
    assert len(keys) == 1                        # one key for the whole job
    assert not run_dir.exists(), "--dry-run starts nothing and writes nothing"


def test_shipped_configs_are_valid():
    for name in ("fmnist_lenet", "fmnist_lenet_bsp", "fmnist_lenet_asp"):
        Job.from_yaml(ROOT / "configs" / f"{name}.yaml").dry_run()


def test_version(capsys):
    import re
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert capsys.readouterr().out.strip() == f"ps-train {version.group(1)}"


def test_a_new_run_never_takes_an_existing_folder(tmp_path):
    from pstrain.runfolder import free_name
    assert free_name(tmp_path, "a") == "a"
    (tmp_path / "a").mkdir()
    assert free_name(tmp_path, "a") == "a"            # empty: free
    (tmp_path / "a" / "job.resolved.yaml").write_text("name: a\n")
    assert free_name(tmp_path, "a") == "a-2"
    (tmp_path / "a-2").mkdir()
    (tmp_path / "a-2" / "x").write_text("")
    assert free_name(tmp_path, "a") == "a-3"


def test_dry_run_names_the_folder_a_rerun_would_use(capsys, tmp_path):
    path = write_job(tmp_path, base_job(tmp_path))
    code, out, err = ps_train(capsys, path, "--dry-run")
    assert code == 0, err
    assert out.splitlines()[0] == f"# run folder: {tmp_path / 'runs' / 'tiny'}"
    earlier = tmp_path / "runs" / "tiny"
    earlier.mkdir(parents=True)
    (earlier / "summary.json").write_text("{}")
    code, out, err = ps_train(capsys, path, "--dry-run")
    assert code == 0, err
    assert out.splitlines()[0] == (f"# run folder: {tmp_path / 'runs' / 'tiny-2'} ({earlier} "
                                   f"exists; --overwrite would replace it)")
    assert f"--solver {tmp_path / 'runs' / 'tiny-2'}/solver.prototxt" in out
    code, out, err = ps_train(capsys, path, "--dry-run", "--overwrite")
    assert out.splitlines()[0] == f"# run folder: {earlier} (exists: --overwrite replaces it)"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["tiny"]


def test_sixteen_bit_transport_switches(capsys, tmp_path):
    """transport.pull_compression (none | fp16 | bf16, off by default) reaches every
    ps-worker as --pull-compression, bf16 pushes as --compression bf16; a bad value
    is one error naming the key (docs/config-reference.md, "16-bit on the wire")."""
    default = Job.from_yaml(write_job(tmp_path, base_job(tmp_path), "default.yaml")).config
    assert default.transport.pull_compression == "none"
    assert "--pull-compression" not in Job.from_yaml(
        write_job(tmp_path, base_job(tmp_path), "default.yaml")).dry_run()
    job = base_job(tmp_path, transport={"compression": "bf16", "pull_compression": "fp16"})
    code, out, err = ps_train(capsys, write_job(tmp_path, job), "--dry-run")
    assert code == 0, err
    workers = [l for l in out.splitlines() if "/ps-worker " in l]
    servers = [l for l in out.splitlines() if "/ps-server " in l]
    assert len(workers) == 2 and servers
    for c in workers:
        assert "--compression bf16" in c and "--pull-compression fp16" in c, c
    assert not any("compression" in c for c in servers)  # the worker asks, in HELLO
    expect_error(capsys, tmp_path, base_job(tmp_path, transport={"pull_compression": "topk"}),
                 "transport.pull_compression: must be one of none, fp16, bf16, got 'topk'")
    expect_error(capsys, tmp_path, base_job(tmp_path, transport={"pull_compression": True}),
                 "transport.pull_compression: must be one of none, fp16, bf16, got True")
    expect_error(capsys, tmp_path, base_job(tmp_path, transport={"compression": "int8"}),
                 "transport.compression.method: must be one of none, fp16, bf16, topk, sign, "
                 "got 'int8'")
    expect_error(capsys, tmp_path, base_job(tmp_path, transport={"pull_compresion": "fp16"}),
                 "unknown key 'transport.pull_compresion'; did you mean "
                 "'transport.pull_compression'?")
