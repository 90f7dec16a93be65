"""What ``plgpu.CompilerParams(approx_math=True)`` permits: the precision oracle allows the
documented error of the GPU's approximate instructions instead of failing the kernel.

With ``approx_math`` Mosaic GPU lowers ``exp``, ``exp2``, ``tanh``, ``rsqrt``, ``sqrt``,
``sin`` and ``cos`` to PTX's ``.approx`` instructions. The PTX ISA documents their error:
``tanh.approx.f32`` the largest, a maximum relative error of 2^-10.987 (``ex2.approx``
2^-22, ``rsqrt.approx`` 2^-22.9, ``sin``/``cos.approx`` an absolute 2^-20.9 on [-pi, pi]).
Only a real GPU computes them (GPU interpret mode and the HLO interpreter compute exactly,
compile-only backends compute nothing), so only an executing ``mosaic_gpu`` backend is
judged this way: by the spec's tolerance if it has one, else by a relative 2^-10 of each
output's magnitude (``APPROX_MATH``) on top of the dtype's own rounding.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pallas_verify.case import Case
from pallas_verify.spec import Tolerance

__all__ = ["APPROX_MATH", "approx_math_case", "uses_approx_math"]

#: The tolerance of an output computed with approximate math: tanh.approx's documented
#: bound, rounded up to 2^-10, relative, plus the same absolute floor for values near 0.
APPROX_MATH = Tolerance(rtol=2.0**-10, atol=2.0**-10)


def uses_approx_math(closed_jaxpr: Any) -> bool:
    """Whether a Mosaic GPU kernel in ``closed_jaxpr`` sets ``approx_math=True``
    (``_jax_compat.sets_approx_math`` reads its compiler params)."""
    from pallas_verify import _jax_compat

    return _jax_compat.sets_approx_math(closed_jaxpr)


def approx_math_case(case: Case, backend: Any) -> Case:
    """``case``, judged with ``APPROX_MATH`` when it ran on a GPU with approximate math
    (an executing ``mosaic_gpu`` backend, a kernel that sets it, a spec without its own
    tolerance); unchanged otherwise."""
    if case.spec.tolerance is not None or not backend.executes or not case.backend.startswith("mosaic_gpu:"):
        return case
    from pallas_verify.backends.execute import jitted

    try:
        traced = jitted(case).trace(*case.inputs)
    except Exception:  # the run itself reports a kernel that cannot be traced
        return case
    if not uses_approx_math(traced.jaxpr):
        return case
    return dataclasses.replace(case, spec=dataclasses.replace(case.spec, tolerance=APPROX_MATH))
