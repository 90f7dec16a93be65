"""Interpreter errors: the embedded exception unwrapped from JAX's callback wrapping, the
finding kind its text shows, semaphore leaks in the exit log, and upstream limitations
that match only on all their evidence (backend, transform, markers)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from pallas_verify import _jax_compat
from pallas_verify.case import ErrorInfo

# What a Python exception raised inside an interpreter callback looks like once XLA has
# wrapped it (the shape of the text on JAX 0.12).
CALLBACK_TEXT = (
    "INTERNAL: CpuCallback error calling callback: Traceback (most recent call last):\n"
    '  File "/site-packages/jax/_src/callback.py", line 92, in pure_callback_impl\n'
    "    return callback(*args)\n"
    "pallas_verify._jax_compat.deadlock.DeadlockError: DEADLOCK DETECTED: semaphore 3 is never signalled\n"
    "  while reading block 1\n"
    "\n--------------------\n"
    "For simplicity, JAX has removed its internal frames from the traceback of the following exception."
)


class JaxRuntimeError(RuntimeError):
    """Stands in for jax's runtime error type: only its name and text matter."""


def test_a_callback_error_is_reported_as_the_exception_it_embeds():
    info = _jax_compat.error_info(JaxRuntimeError(CALLBACK_TEXT))
    assert info.type == "DeadlockError"  # the last dotted part, not the module path
    assert info.message == "DEADLOCK DETECTED: semaphore 3 is never signalled\n  while reading block 1"
    assert "JaxRuntimeError" in info.traceback


def test_a_real_callback_failure_unwraps_to_the_raised_type_and_message():
    def host(x):
        raise IndexError("row 9 of 8")

    f = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
    with pytest.raises(Exception) as caught:  # noqa: PT011  (whatever jax wraps it in)
        jax.block_until_ready(f(np.zeros(4, np.float32)))
    info = _jax_compat.error_info(caught.value)
    assert (info.type, info.message) == ("IndexError", "row 9 of 8")


def test_an_ordinary_error_keeps_its_type_and_loses_only_jaxs_footer():
    info = _jax_compat.error_info(ValueError("shapes (8,) and (4,) differ"))
    assert (info.type, info.message) == ("ValueError", "shapes (8,) and (4,) differ")
    wrapped = ValueError("bad block shape\n--------------------\nFor simplicity, JAX has removed its frames")
    assert _jax_compat.error_info(wrapped).message == "bad block shape"


def test_a_callback_text_without_an_embedded_exception_is_kept_whole():
    text = "INTERNAL: CpuCallback error calling callback: the host went away"
    info = _jax_compat.error_info(JaxRuntimeError(text))
    assert (info.type, info.message) == ("JaxRuntimeError", text)


@pytest.mark.parametrize(("message", "kind"), [
    ("DEADLOCK DETECTED: every device waits (RACE DETECTED earlier)", "deadlock"),  # first row wins
    ("RACE DETECTED: write of x_ref by (0,) and (1,)", "race"),
    ("Out of bound slice on axis 0", "out_of_bounds"),
    ("index 9 is OUT OF BOUNDS for axis 0 with size 8", "out_of_bounds"),
    ("Revisited block (0, 0) of output 0", "revisit"),
    ("revisited block", None),  # the interpreter's text is capitalised: nothing else is claimed
    ("shapes differ", None),
    ("", None),
])
def test_error_kind_reads_the_interpreters_text(message, kind):
    assert _jax_compat.error_kind(message) == kind


def test_semaphore_leaks_are_the_exit_report_lines_only():
    log = ("kernel done\n"
           "Semaphore 3 of device 0 has non-zero count 2 at kernel exit\n"
           "a Semaphore mentioned in passing\n"
           "Semaphore 7 has non-zero count 1 at kernel exit")
    assert _jax_compat.semaphore_leaks(log) == [
        "Semaphore 3 of device 0 has non-zero count 2 at kernel exit",
        "Semaphore 7 has non-zero count 1 at kernel exit",
    ]
    assert _jax_compat.semaphore_leaks("all semaphores zero") == []


VMAP_ROW = ErrorInfo(type="ValueError", message="safe_zip() argument 2 is shorter than argument 1",
                     traceback="  File interpret.py, in _get_randomized_grid_coordinates\n")


def test_a_transform_specific_limitation_matches_only_under_its_transform():
    reason = _jax_compat.upstream_limitation(VMAP_ROW, backend="tpu_interpret", transform="vmap")
    assert reason is not None and "cannot run jax.vmap of a pallas_call" in reason
    assert reason.endswith("(upstream limitation, reproduced on JAX 0.12.0.1)")
    assert _jax_compat.upstream_limitation(VMAP_ROW, backend="tpu_interpret", transform=None) is None
    assert _jax_compat.upstream_limitation(VMAP_ROW, backend="tpu_interpret", transform="grad") is None
    assert _jax_compat.upstream_limitation(VMAP_ROW, backend="interpret", transform="vmap") is None


def test_a_limitation_matches_markers_in_the_message_as_well_as_the_traceback():
    error = ErrorInfo(type="AssertionError", message="assert BlockMapping.has_trivial_window()")
    reason = _jax_compat.upstream_limitation(error, backend="gpu_interpret", transform="grad")
    assert reason is not None and "whole-array blocks" in reason


def test_no_error_or_an_unknown_one_is_no_limitation():
    assert _jax_compat.upstream_limitation(None, backend="tpu_interpret", transform=None) is None
    unknown = ErrorInfo(type="ValueError", message="index 9 out of bounds", traceback="in my_kernel")
    for row in _jax_compat.LIMITATIONS:
        assert _jax_compat.upstream_limitation(unknown, backend=row.backend, transform=row.transform) is None


def test_every_limitation_row_matches_its_own_evidence_and_nothing_less():
    for row in _jax_compat.LIMITATIONS:
        evidence = ErrorInfo(type="E", message="", traceback="\n".join(row.markers))
        assert row.matches(evidence.traceback, backend=row.backend, transform=row.transform or "vmap")
        assert _jax_compat.upstream_limitation(evidence, backend=row.backend, transform=row.transform)
        for dropped in range(len(row.markers)):
            partial = "\n".join(m for i, m in enumerate(row.markers) if i != dropped)
            assert not row.matches(partial, backend=row.backend, transform=row.transform)
