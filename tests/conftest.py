"""Shared by every Python suite (tests/python, tests/e2e, tests/multihost): in CI
(the environment variable CI is "true", as .ci/run runs), a skipped test fails
unless its reason names a missing GPU ("GPU" in the reason): a skip there means
a dependency CI should have installed or a service it should have started
(network namespaces and sshd for tests/multihost, Slurm), and a green run must
not hide it. A test skipped this way is reported as failed with its reason; a
module skipped while it is collected (pytest.importorskip at its top) is listed
at the end and fails the run. Outside CI skips stay skips (-rs lists them)."""
from __future__ import annotations

import os

import pytest

_ALLOWED = "GPU"  # every GPU skip says so in its reason


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def _reason(longrepr) -> str:
    """The reason of a skip report (pytest keeps (file, line, "Skipped: reason"))."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def skip_is_allowed(reason: str) -> bool:
    return _ALLOWED in reason


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or not _in_ci():
        return
    reason = _reason(report.longrepr)
    if skip_is_allowed(reason):
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped in CI, where only a missing GPU may skip a test: {reason} "
                       f"(tests/conftest.py)")


_COLLECT_SKIPS = pytest.StashKey[list]()


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    config = collector.config
    if report.skipped and _in_ci():
        reason = _reason(report.longrepr)
        if not skip_is_allowed(reason):
            config.stash.setdefault(_COLLECT_SKIPS, []).append(f"{report.nodeid}: {reason}")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = config.stash.get(_COLLECT_SKIPS, [])
    if skipped:
        terminalreporter.section("skipped while collected, which fails the run in CI", red=True)
        for line in skipped:
            terminalreporter.line(line)


def pytest_sessionfinish(session, exitstatus):
    if session.config.stash.get(_COLLECT_SKIPS, []) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
