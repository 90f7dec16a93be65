"""``plgpu.CompilerParams(unsafe_no_auto_barriers=True)``: the rule it leaves to the kernel
(JAX 0.12 internals).

By default Mosaic GPU inserts barriers that make a thread's loads and stores of shared
memory synchronous. A kernel that turns them off promises, per the parameter's
documentation, that "no memory region is ever read *and* written to by the same thread"
(async copies do not count). GPU interpret mode runs each warpgroup as one sequential
thread, so it never sees the warps of a warpgroup race on such a region; this finds the
broken promise in the kernel's program instead: a ref that one jaxpr (a kernel body, or
one branch or loop body in it) both reads (``get``) and writes (``swap``, ``addupdate``).
"""

from __future__ import annotations

from typing import Any

from pallas_verify._jax_compat.tracing import equations, is_kernel, sub_jaxprs

__all__ = ["read_and_written_without_auto_barriers"]

_READS = frozenset({"get", "load"})
_WRITES = frozenset({"swap", "addupdate", "store"})


def _opted_out(kernel: Any) -> bool:
    params = kernel.params.get("compiler_params")
    params = params.get("mosaic_gpu") if isinstance(params, dict) else params
    return bool(getattr(params, "unsafe_no_auto_barriers", False))


def _both(jaxpr: Any) -> Any | None:
    """The first ref this jaxpr's own equations both read and write, or None."""
    read, written = {}, {}
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _READS or name in _WRITES:
            ref = eqn.invars[0]
            (read if name in _READS else written).setdefault(ref, eqn)
            if ref in read and ref in written:
                return ref
    for eqn in jaxpr.eqns:
        for inner, _ in sub_jaxprs(eqn):
            found = _both(inner)
            if found is not None:
                return found
    return None


def read_and_written_without_auto_barriers(closed_jaxpr: Any) -> str | None:
    """A sentence naming a shared-memory ref read and written by one thread of a Mosaic
    GPU kernel that sets ``unsafe_no_auto_barriers=True``, or None."""
    for kernel in equations(getattr(closed_jaxpr, "jaxpr", closed_jaxpr)):
        if not is_kernel(kernel) or not _opted_out(kernel):
            continue
        for body, _ in sub_jaxprs(kernel):
            ref = _both(body)
            if ref is not None:
                return (f"the kernel sets unsafe_no_auto_barriers=True but one thread both reads and writes "
                        f"the ref {ref.aval} (e.g. `ref[...] = f(ref[...])`): without the automatic barriers the "
                        "warps of a warpgroup race on it on a GPU. Read into a value and write another buffer, "
                        "or drop unsafe_no_auto_barriers")
    return None
