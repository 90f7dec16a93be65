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
from pallas_verify.errors import NotForThisCase
from pallas_verify.spec import KernelSpec
from strategies.programs import SKELETONS, pallas_programs, program_inputs

__all__ = ["DRAWN", "SPEC", "SPEC_MASKED_LOADS", "campaign_spec", "cannot_run", "generated_spec", "masked_loads_for"]

DRAWN: dict[str, dict[str, Any]] = {}


def _kernel(*inputs: Any, program: dict[str, Any]) -> Any:
    from pallas_verify import _jax_compat

    reason = cannot_run(program, _jax_compat.forced_interpret())
    if reason is not None:  # this program only: the backend's search goes on, the others run it
        raise NotForThisCase(reason)
    return compile_program(program).kernel(*inputs)


def cannot_run(program: dict[str, Any], interpret: Any) -> str | None:
    """Why the interpreter ``interpret`` (what ``pallas_call`` is forced to) cannot run
    ``program``, or None: TPU interpret mode cannot run a masked load
    (``_jax_compat.masked_load_unsupported``)."""
    from pallas_verify import _jax_compat

    return _jax_compat.masked_load_unsupported(interpret) if any(program.get("load_masks") or ()) else None


def _reference(*inputs: Any, program: dict[str, Any]) -> Any:
    return compile_program(program).reference(*inputs)


def _remember(program: dict[str, Any]) -> dict[str, Any]:
    DRAWN.setdefault(program_source(program), program)
    return {"program": program}


def _inputs(config: dict[str, Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return program_inputs(config["program"])


def generated_spec(*, name: str = "smith", skeletons: tuple[str, ...] = SKELETONS, max_grid_points: int = 8,
                   max_depth: int = 3, masked_loads: bool = False) -> KernelSpec:
    """A KernelSpec whose configs are whole generated programs (see the module docstring).

    Programs are bitwise stable: float sums and dots run over exactly representable
    values and every other operator is element-wise, so executing backends that each pass
    the reference must also agree with each other bit for bit (a divergence otherwise)."""
    programs = pallas_programs(skeletons=skeletons, max_grid_points=max_grid_points, max_depth=max_depth,
                               masked_loads=masked_loads)
    return KernelSpec(name=name, kernel=_kernel, reference=_reference, configs=programs.map(_remember),
                      inputs=_inputs, platforms=("tpu",), features=("generated",), bitwise_stable=True)


def masked_loads_for(backends: list[str]) -> bool:
    """Whether programs may load with a mask: always. TPU interpret mode (JAX 0.12) cannot
    run a masked load, so a program with one is not run there (``cannot_run``) and runs on
    the other backends."""
    return True


def campaign_spec(backends: list[str]) -> KernelSpec:
    """The module-level spec (loadable by reference in worker processes) for ``backends``."""
    return SPEC


SPEC = generated_spec(masked_loads=True)
SPEC_MASKED_LOADS = SPEC  # the name reproducers written before every campaign drew masked loads load
