"""A search stops early only when every example it ran failed with one signature."""

from __future__ import annotations

from pallas_verify.findings import Finding
from pallas_verify.signatures import SAME_SIGNATURE_STOP, SameSignature

BLIND = ("exception", "compile_error", "crash", "timeout")


def found(kind, message):
    return [Finding(kind=kind, kernel="k", backend="interpret", message=message)]


def test_three_failures_with_one_signature_up_to_numbers_stop_the_search():
    watch = SameSignature(kinds=BLIND)
    steps = [watch.step(found("exception", f"TypeError: got (JitTracer(int32[]), {n})")) for n in (128, 256, 384)]
    assert steps == [False] * (SAME_SIGNATURE_STOP - 1) + [True]
    # The signature blanks the numbers; the cell's note says the first failure's own text.
    assert watch.stopped.startswith("stopped early: all 3 examples run failed with the same signature "
                                    "(exception: TypeError: got (JitTracer(int32[]), 128))")


def test_a_pass_another_error_or_an_input_dependent_kind_keeps_it_going():
    for second in ([], found("exception", "ValueError: other"), found("compile_error", "TypeError: got 1")):
        watch = SameSignature(kinds=BLIND)
        steps = [watch.step(f) for f in (found("exception", "TypeError: got 1"), second,
                                          *[found("exception", "TypeError: got 1")] * 4)]
        assert not any(steps) and watch.stopped is None
    mismatches = SameSignature(kinds=BLIND)
    assert not any(mismatches.step(found("mismatch", "outputs differ")) for _ in range(5))
