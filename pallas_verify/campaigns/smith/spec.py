"""Generated programs as one KernelSpec, so ``verify``'s engine, runner and oracles judge them.

The spec's config is ``{"program": <program>}`` drawn from ``strategies.pallas_programs``:
Hypothesis draws (and, on a finding, shrinks) the program itself; the kernel and the
reference exec the emitted source. ``SPEC`` lives at module level so worker processes
load it by reference (``pallas_verify.campaigns.smith.spec:SPEC``). Every program drawn in this
process is remembered in ``DRAWN`` (keyed by its source), for the campaign's counts and
coverage histogram.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from pallas_verify.campaigns.smith.source import compile_program, program_source
from pallas_verify.spec import KernelSpec
from strategies.programs import SKELETONS, pallas_programs, program_inputs

__all__ = ["DRAWN", "SPEC", "generated_spec"]

DRAWN: dict[str, dict[str, Any]] = {}


def _kernel(*inputs: Any, program: dict[str, Any]) -> Any:
    return compile_program(program).kernel(*inputs)


def _reference(*inputs: Any, program: dict[str, Any]) -> Any:
    return compile_program(program).reference(*inputs)


def _remember(program: dict[str, Any]) -> dict[str, Any]:
    DRAWN.setdefault(program_source(program), program)
    return {"program": program}


def _inputs(config: dict[str, Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return program_inputs(config["program"])


def generated_spec(*, name: str = "smith", skeletons: tuple[str, ...] = SKELETONS, max_grid_points: int = 8,
                   max_depth: int = 3) -> KernelSpec:
    """A KernelSpec whose configs are whole generated programs (see the module docstring)."""
    programs = pallas_programs(skeletons=skeletons, max_grid_points=max_grid_points, max_depth=max_depth)
    return KernelSpec(name=name, kernel=_kernel, reference=_reference, configs=programs.map(_remember),
                      inputs=_inputs, platforms=("tpu",), features=("generated",),
                      bitwise_stable=False)  # reductions and dots may be reassociated per backend


SPEC = generated_spec()
