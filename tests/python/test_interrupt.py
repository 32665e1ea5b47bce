"""InterruptLatch (pstrain/interrupt.py): a Ctrl-C whose KeyboardInterrupt a
finalizer swallowed is raised by the wait loop's check()."""
import gc
import signal

import pytest

from pstrain.interrupt import InterruptLatch


class RaisesSigintWhenCollected:
    """Its __del__ raises SIGINT: the handler runs inside the finalizer, where
    Python prints a KeyboardInterrupt as "Exception ignored" and drops it."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def collect_one():
    RaisesSigintWhenCollected()
    gc.collect()


# The swallowed KeyboardInterrupt reaches sys.unraisablehook (pytest warns of it).
SWALLOWED = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@SWALLOWED
def test_without_the_latch_a_ctrl_c_inside_a_finalizer_is_lost():
    collect_one()  # no KeyboardInterrupt comes out: the case the latch is for


@SWALLOWED
def test_the_latch_raises_a_ctrl_c_a_finalizer_swallowed():
    with InterruptLatch() as latch:
        collect_one()
        with pytest.raises(KeyboardInterrupt):
            latch.check()
        latch.check()  # once only
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_in_plain_code_still_raises_at_once():
    with InterruptLatch() as latch:
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            latch.check()  # the flag was set too


def test_a_script_s_own_handler_is_left_alone():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
    try:
        with InterruptLatch() as latch:
            signal.raise_signal(signal.SIGINT)
            latch.check()
        assert seen == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
