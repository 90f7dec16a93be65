"""Running a case in-process under a forced interpreter, capturing everything it says."""

from __future__ import annotations

import collections
import contextlib
import io
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.case import Case, Outcome

__all__ = ["config_key", "execute", "jitted"]

# Most recently used last; bounded so a long-lived worker serving many specs stays small.
_JIT_CACHE: collections.OrderedDict[tuple[Hashable, ...], Callable[..., Any]] = collections.OrderedDict()
_JIT_CACHE_SIZE = 512


def config_key(config: Mapping[str, Any]) -> str:
    """A stable, hashable key for a config (configs hold tuples, strings, dtypes...)."""
    return repr(sorted(config.items(), key=lambda kv: kv[0]))


def jitted(case: Case) -> Callable[..., Any]:
    """``jax.jit`` of the kernel bound to the case's config (and transform), cached.

    The cache keeps one jitted callable per (kernel, config, transform); jax's own cache
    then keys compiled executables on input shapes and the forced interpret params, so
    a repeated config with the same mode does not retrace.
    """
    import jax

    from pallas_verify.backends.wrap import transformed

    key = (case.spec.kernel, config_key(case.config), case.transform)
    fn = _JIT_CACHE.get(key)
    if fn is not None:
        _JIT_CACHE.move_to_end(key)
    else:
        config = dict(case.config)
        kernel = case.spec.kernel

        def bound(*xs: Any) -> Any:
            return kernel(*xs, **config)

        fn = _JIT_CACHE[key] = jax.jit(transformed(bound, case.transform))
        if len(_JIT_CACHE) > _JIT_CACHE_SIZE:
            _JIT_CACHE.popitem(last=False)
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
