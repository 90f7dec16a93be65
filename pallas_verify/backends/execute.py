"""Running a case in-process under a forced interpreter, capturing everything it says."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.case import Case, Outcome
from pallas_verify.keys import Lru, bound_key

__all__ = ["execute", "jitted"]

# Bounded so a long-lived worker serving many specs stays small.
_JIT_CACHE: Lru[tuple[Hashable, ...], Callable[..., Any]] = Lru(maxsize=512)


def jitted(case: Case) -> Callable[..., Any]:
    """``jax.jit`` of the kernel bound to the case's config (and transform), cached.

    The cache keeps one jitted callable per (kernel, config, transform); jax's own cache
    then keys compiled executables on input shapes and the forced interpret params, so
    a repeated config with the same mode does not retrace.
    """
    import jax

    from pallas_verify.transforms import bound

    fn = _JIT_CACHE.get_or_make(bound_key(case.spec.kernel, case.config, case.transform), lambda: jax.jit(bound(case)))
    return fn


def execute(case: Case, params: Any) -> Outcome:
    """Run ``case`` with every pallas_call forced to ``interpret=params``.

    Never raises for the kernel's own failure: the exception, captured race reports and
    anything printed to stdout (e.g. semaphores left non-zero at kernel exit) land in
    the Outcome, and interpreter state is reset after a failure.
    """
    import jax

    fn = jitted(case)
    stdout = io.StringIO()
    start = time.perf_counter()
    with _jax_compat.capture_logs() as logs, contextlib.redirect_stdout(stdout):
        try:
            with _jax_compat.force_interpret(params):
                result = jax.block_until_ready(fn(*case.inputs))
            outputs = tuple(np.asarray(leaf) for leaf in jax.tree.leaves(result))
            error = None
        except Exception as exc:  # the kernel's failure is data, not our crash
            outputs, error = None, _jax_compat.error_info(exc)
            _jax_compat.reset_interpreters()
    seconds = time.perf_counter() - start
    races = [m for _, m in logs if _jax_compat.RACE_MARKER in m]
    diagnostics = "\n".join([*races, stdout.getvalue().strip()]).strip()
    return Outcome(outputs=outputs, error=error, races=bool(races), diagnostics=diagnostics, seconds=seconds)
