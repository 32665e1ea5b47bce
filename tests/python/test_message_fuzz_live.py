"""20,000 fuzzed messages against a live ps-server on 127.0.0.1 (see
message_fuzz_live.py; the full 10^6 run is one command there): no crash, the
weights bit-identical to an undisturbed run, RSS and the log bounded (the heap flat
after the warm-up, so that a leak of a kilobyte a message fails)."""
from __future__ import annotations

import pytest

import message_fuzz_live as live

MESSAGES = 20_000


@pytest.fixture(scope="module")
def figures(build_dir):
    calm, loud = live.sessions(build_dir, MESSAGES, seed=7, timeout_s=300)
    return calm, loud


def test_fuzzed_messages_leave_the_weights_bit_identical(figures):
    calm, loud = figures
    assert loud["exit"] == 0 and calm["exit"] == 0, "the server did not end cleanly"
    assert loud["sent"] == MESSAGES
    assert loud["weights"] == calm["weights"]
    assert calm["bad_messages"] == 0
    assert loud["bad_messages"] >= MESSAGES // 2


def test_fuzzed_messages_keep_rss_bounded(figures):
    _, loud = figures
    growth_mb = (loud["rss_after_kb"] - loud["rss_before_kb"]) / 1024
    assert growth_mb <= live.RSS_BOUND_MB
    # After the warm-up the heap stays flat: 15,000 messages, a leak of 1 KB each is 15 MB.
    anon = loud["rss_anon_by_step_kb"]
    assert len(anon) == live.STEPS
    assert live.steady_growth_mb(loud) <= live.RSS_STEADY_BOUND_MB, anon


def test_fuzzed_messages_keep_the_log_bounded(figures):
    _, loud = figures
    assert loud["log_growth_bytes"] <= live.LOG_BOUND_BYTES
