"""The order of WGMMA issue, wait and read in Mosaic GPU kernels (JAX 0.12 internals).

On a GPU, ``plgpu.wgmma`` only issues the MMA; its accumulator is ready after a
``plgpu.wgmma_wait`` (or a read that waits, ``acc_ref[...]``, which is
``wgmma_accumulator_load(acc, wait_n=0)``). GPU interpret mode in jax 0.12.0.1 runs every
WGMMA to completion when it is issued and ignores both waits, so a read of an accumulator
while its MMA is still in flight gives the right values there. This module finds such
reads in the kernel's program order instead: a ``wgmma_accumulator_load(...,
wait_n=None)`` (no wait at all) after WGMMAs that no wait has retired.

Equations are visited in order, each followed by the equations of its sub-jaxprs (the
bodies of run_scoped, loops, conds, once each), so a read in the iteration after the
WGMMA that feeds it is not seen: the check reports no false alarms, not every hazard.
"""

from __future__ import annotations

from typing import Any

from pallas_verify._jax_compat.tracing import equations, is_kernel

__all__ = ["wgmma_read_before_wait"]

_WGMMA = "wgmma_ref"
_WAIT = "wgmma_wait"
_READ = "wgmma_accumulator_deref"


def _where(eqn: Any) -> str:
    frame = None
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(eqn.source_info.traceback)
    except Exception:  # no source information: name the primitive only
        frame = None
    return f"{frame.file_name}:{frame.start_line}" if frame is not None else eqn.primitive.name


def wgmma_read_before_wait(closed_jaxpr: Any) -> str | None:
    """A sentence naming the first WGMMA accumulator read before any wait on its MMA in the
    Mosaic GPU kernels of ``closed_jaxpr``, or None."""
    issued: list[Any] = []  # WGMMAs no wait has retired, oldest first
    for eqn in equations(getattr(closed_jaxpr, "jaxpr", closed_jaxpr)):
        name = eqn.primitive.name
        if is_kernel(eqn):  # its body's equations follow it
            issued = []
        elif name == _WGMMA:
            issued.append(eqn)
        elif name == _WAIT:
            issued = _retire(issued, eqn.params["n"])
        elif name == _READ:
            wait_n = eqn.params.get("wait_n")
            if wait_n is None and issued:
                return (f"the WGMMA accumulator is read at {_where(eqn)} with wait_n=None while the WGMMA "
                        f"issued at {_where(issued[-1])} may still be running (no plgpu.wgmma_wait since); "
                        "read it with acc_ref[...] or call plgpu.wgmma_wait(0) first")
            if wait_n is not None:
                issued = _retire(issued, wait_n)
    return None


def _retire(issued: list[Any], n: int) -> list[Any]:
    """What is still in flight after a wait that leaves at most ``n`` WGMMAs running."""
    return issued[len(issued) - n:] if 0 < n < len(issued) else issued if n else []
