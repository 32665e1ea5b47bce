"""tests/conftest.py's rule, on a small suite of its own run by a real pytest:
with CI=true a skip fails unless its reason says "GPU" (test-level skips become
failures; a module skipped while it is collected fails the run); without CI
they stay skips."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

from pstrain_testing import ROOT

SUITE = {
    "test_gpu.py": (
        "import pytest\n"
        "@pytest.mark.skipif(True, reason='no GPU (needs a CUDA device)')\n"
        "def test_on_gpu():\n    pass\n"
        "def test_gpu_in_body():\n    pytest.skip('this machine has no GPU')\n"),
    "test_other.py": (
        "import pytest\n"
        "@pytest.fixture\n"
        "def service():\n    pytest.skip('sshd is not installed')\n"
        "def test_needs_service(service):\n    pass\n"
        "def test_plain():\n    pass\n"
        "@pytest.mark.xfail(reason='known', strict=True)\n"
        "def test_expected_to_fail():\n    assert False\n"),
    "test_missing.py": "import pytest\npytest.importorskip('no_such_module_pstrain')\n"
                       "def test_never():\n    pass\n",
}


def run_suite(tmp_path: pathlib.Path, ci: str | None,
              files: tuple[str, ...] = tuple(SUITE)) -> subprocess.CompletedProcess:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    for name in files:
        (suite / name).write_text(SUITE[name])
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          "--rootdir", str(suite), str(suite)], capture_output=True, text=True,
                         env=env, cwd=suite, timeout=120)
    shutil.rmtree(suite)
    return run


def test_in_ci_only_gpu_skips_pass(tmp_path):
    run = run_suite(tmp_path, "true")
    out = run.stdout
    assert run.returncode == 1, out
    # A skip in a fixture fails the test's setup: pytest calls that an error.
    assert out.splitlines()[-1].startswith("1 passed, 3 skipped, 1 xfailed, 1 error"), out
    assert "ERROR at setup of test_needs_service" in out, out
    assert ("_\nskipped in CI, where only a missing "
            "GPU may skip a test: sshd is not installed (tests/conftest.py)") in out, out
    assert "skipped while collected, which fails the run in CI" in out, out
    assert "test_missing.py: could not import 'no_such_module_pstrain'" in out, out
    assert "no GPU (needs a CUDA device)" in out and "this machine has no GPU" in out, out


def test_in_ci_gpu_skips_alone_pass(tmp_path):
    run = run_suite(tmp_path, "true", ("test_gpu.py",))
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines()[-1].startswith("2 skipped"), run.stdout
    # A module skipped while collected fails the run on its own.
    run = run_suite(tmp_path, "true", ("test_gpu.py", "test_missing.py"))
    assert run.returncode == 1, run.stdout
    assert run.stdout.splitlines()[-1].startswith("3 skipped"), run.stdout


def test_outside_ci_skips_stay_skips(tmp_path):
    for ci in (None, "false"):
        run = run_suite(tmp_path, ci)
        assert run.returncode == 0, run.stdout
        assert run.stdout.splitlines()[-1].startswith("1 passed, 4 skipped, 1 xfailed"), \
            run.stdout
