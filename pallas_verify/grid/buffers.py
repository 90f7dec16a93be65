"""TPU interpret mode's buffer, semaphore and DMA numbers in the kernel's own terms.

TPU interpret mode names memory by number: ``('vmem', 103, 0, 0)`` is buffer 103 of core 0
on device 0, ``Semaphore 2000`` a semaphore, a thread ``(100, 0)`` a DMA. It hands the
numbers out in a fixed order for each pallas_call (``_jax_compat.memory_numbers``), so the
kernel's trace (``grid.trace``) maps each number to a parameter, named as in the kernel's
signature; buffers past those are ``run_scoped`` allocations.

``in_kernel_terms`` rewrites the interpreter's race reports, semaphore counts, deadlock
and out-of-bounds messages (``_jax_compat.diagnostic_lines``) with those names, the
elements and block (with the grid points whose index map gives it) and the kernel source
line of each access.
"""

from __future__ import annotations

import dataclasses
import linecache
import re
from collections.abc import Sequence

import numpy as np

from pallas_verify import _jax_compat
from pallas_verify.grid.trace import BlockOperand, PallasCall

__all__ = ["Named", "in_kernel_terms", "interpreter_names"]

_MAX_POINTS = 100_000  # grids larger than this are not enumerated for a race's grid points
_MAX_RACES = 3


@dataclasses.dataclass(frozen=True, kw_only=True)
class Named:
    """One buffer (or semaphore) of a pallas_call, as the kernel knows it.

    Attributes:
      name: the kernel parameter's name (``o_ref``), with an index for a semaphore array.
      role: ``input 0``, ``output 1``, ``scalar prefetch 0``, ``scratch 2``.
      what: where it lives, e.g. ``the whole array in HBM``, ``its VMEM block``,
        ``VMEM float32[8, 128]``, ``a DMA semaphore``.
      operand: the block operand, for the HBM copy of a windowed input or output (its
        elements map to blocks and grid points).
    """

    name: str
    role: str
    what: str
    operand: BlockOperand | None = None

    def text(self, call: PallasCall) -> str:
        return f"{self.name} ({self.role} of {call.name}, {self.what})"


def _role(call: PallasCall, i: int) -> str:
    n_in, n_out = len(call.inputs), len(call.outputs)
    j = i - call.num_prefetch
    if j < 0:
        return f"scalar prefetch {i}"
    if j < n_in:
        return f"input {j}"
    if j < n_in + n_out:
        return f"output {j - n_in}"
    return f"scratch {j - n_in - n_out}"


def interpreter_names(call: PallasCall) -> tuple[dict[int, Named], dict[int, Named]]:
    """The buffers and the semaphores of ``call`` by the numbers TPU interpret mode gives them."""
    params = call.params
    if not params:
        return {}, {}
    aliased = {o for _, o in call.aliases}
    numbers, sem_numbers = _jax_compat.memory_numbers(
        params, num_prefetch=call.num_prefetch, num_inputs=len(call.inputs),
        unaliased_outputs=[k for k in range(len(call.outputs)) if k not in aliased])
    buffers = {number: _buffer_named(call, i, place) for number, (i, place) in numbers.items()}
    semaphores = {number: _semaphore_named(call, i, index) for number, (i, index) in sem_numbers.items()}
    return buffers, semaphores


def _buffer_named(call: PallasCall, i: int, place: str) -> Named:
    name, space, shape, dtype = call.params[i]
    role = _role(call, i)
    if place == "smem":
        return Named(name=name, role=role, what="SMEM")
    if place == "hbm":
        k = i - call.num_prefetch
        operand = call.inputs[k] if k < len(call.inputs) else call.outputs[k - len(call.inputs)]
        return Named(name=name, role=role, what="the whole array in HBM", operand=operand if operand.windowed else None)
    block = role.startswith(("input", "output"))
    return Named(name=name, role=role,
                 what=f"its {_space(space)} block buffer" if block else f"{_space(space)} {dtype}{list(shape)}")


def _semaphore_named(call: PallasCall, i: int, index: tuple[int, ...]) -> Named:
    name, _, shape, dtype = call.params[i]
    label = f"{name}[{', '.join(map(str, index))}]" if shape else name
    return Named(name=label, role=_role(call, i), what="a DMA semaphore" if "dma" in dtype else "a semaphore")


def _space(space: str) -> str:
    return "VMEM" if space in ("default", "vmem") else space.upper()


_DMA_NUMBER = re.compile(r"DMA \d+")


def in_kernel_terms(text: str, calls: Sequence[PallasCall]) -> str:
    """``text`` (interpreter diagnostics or an error message) with buffers, semaphores,
    DMAs and cores named as the kernel names them; text it does not recognise is kept."""
    calls = [c for c in calls if c.params]
    if not calls or not text:
        return text
    out: list[str] = []
    races: dict[str, int] = {}  # a race's text without its DMA numbers -> how many such races
    for item in _jax_compat.diagnostic_lines(text):
        if isinstance(item, _jax_compat.Race):
            race = _race(item.accesses, calls)
            key = _DMA_NUMBER.sub("DMA", "\n".join(race))
            races[key] = races.get(key, 0) + 1
            if races[key] == 1 and len(races) <= _MAX_RACES:
                out.extend(race)
        elif isinstance(item, _jax_compat.Leak):
            out.append(_leak(item, calls))
        elif item.strip():
            out.append(_named_references(item, _pick(calls, None)))
    same = sum(races.values()) - len(races)
    if same:
        out.append(f"({same} more race{'s' if same > 1 else ''} like these, by other DMAs or at other steps)")
    if len(races) > _MAX_RACES:
        out.append(f"({len(races) - _MAX_RACES} other races of the same run not shown)")
    return "\n".join(out)


def _pick(calls: Sequence[PallasCall], function: str | None) -> PallasCall | None:
    """The pallas_call an interpreter message is about: the one whose kernel function it
    names, else the only one."""
    named = [c for c in calls if function and c.name == function]
    if named:
        return named[0]
    return calls[0] if len(calls) == 1 else None


def _race(accesses: Sequence[_jax_compat.Access], calls: Sequence[PallasCall]) -> list[str]:
    if not accesses:
        return [_jax_compat.RACE_MARKER]
    functions = [a.frame[2] for a in accesses if a.frame is not None]
    call = _pick(calls, functions[0] if functions else None)
    first = accesses[0]
    head = f"{_jax_compat.RACE_MARKER} on {_buffer(call, first.space, first.buffer)}"
    lines = [f"{head}, {_elements(call, first)}:"]
    for a in accesses:
        lines.append(f"  {a.kind} by {_thread(a)}{_range_note(a, first)} {_frame(a, call)}")
    return lines


def _buffer(call: PallasCall | None, space: str, number: int) -> str:
    if call is None:
        return f"{space.upper()} buffer {number} of one of the kernel's pallas_calls"
    named = interpreter_names(call)[0].get(number)
    if named is None:
        return f"a {_space(space)} buffer that run_scoped allocates in {call.name} (interpreter buffer {number})"
    return named.text(call)


def _elements(call: PallasCall | None, access: _jax_compat.Access) -> str:
    ranges = access.ranges
    if ranges is None:
        return "all of it"
    where = "elements [" + ", ".join(f"{a}:{b}" for a, b in ranges) + "]"
    named = interpreter_names(call)[0].get(access.buffer) if call is not None else None
    if call is None or named is None or named.operand is None:
        return where
    return where + _block_points(call, named.operand, ranges)


def _block_points(call: PallasCall, operand: BlockOperand, ranges: Sequence[tuple[int, int]]) -> str:
    """``" = block (0, 0), which the index map gives at grid points (0, j) for j in 0..3"``."""
    from pallas_verify.grid.check import describe_points
    from pallas_verify.grid.points import block_indices, grid_points

    if len(ranges) != len(operand.block_shape) or call.skip_reason is not None:
        return ""
    if any(a % b for (a, _), b in zip(ranges, operand.block_shape, strict=True)):
        return ""
    block = tuple(a // b for (a, _), b in zip(ranges, operand.block_shape, strict=True))
    if not call.grid or int(np.prod(call.grid)) > _MAX_POINTS:
        return f" = block {block}"
    try:
        points = grid_points(call.grid)
        at = np.all(block_indices(call, operand, points) == np.asarray(block), axis=1)
    except Exception:  # the grid points are a courtesy: an index map that will not evaluate leaves them out
        return f" = block {block}"
    spec = "out_specs" if operand.is_output else "in_specs"
    if not at.any():
        return f" = block {block}, which the {spec} index_map gives at no grid point"
    return f" = block {block}, which the {spec} index_map gives at grid points {describe_points(points[at], call)}"


def _range_note(access: _jax_compat.Access, first: _jax_compat.Access) -> str:
    if access.elements == first.elements:
        return ""
    ranges = access.ranges
    return " (all of it)" if ranges is None else " ([" + ", ".join(f"{a}:{b}" for a, b in ranges) + "])"


def _thread(access: _jax_compat.Access) -> str:
    if access.device >= _jax_compat.FIRST_DMA:
        return f"DMA {access.device}"
    return f"core {access.core}" + (f" of device {access.device}" if access.device else "")


def _frame(access: _jax_compat.Access, call: PallasCall | None) -> str:
    if access.frame is None:
        named = interpreter_names(call)[0].get(access.buffer) if call is not None else None
        role = named.role.split()[0] if named is not None else ""
        return {("output", "write"): "(the pipeline writing an output block back to HBM after a grid step)",
                ("output", "read"): "(the pipeline reading the output in HBM: a block before a step, or the "
                                    "result at the kernel's end)",
                ("input", "read"): "(the pipeline loading an input block before a grid step)"}.get(
                    (role, access.kind), f"({access.frame_text})")
    path, line, function = access.frame
    source = linecache.getline(path, line).strip()
    return f"at {path}:{line} ({function})" + (f": {source}" if source else "")


def _leak(leak: _jax_compat.Leak, calls: Sequence[PallasCall]) -> str:
    call = _pick(calls, None)
    named = interpreter_names(call)[1].get(leak.semaphore) if call is not None else None
    what = named.text(call) if named is not None and call is not None else f"semaphore {leak.semaphore}"
    where = f"core {leak.core}" + (f" of device {leak.device}" if leak.device else "")
    unit = " (bytes of DMAs never waited on)" if named is not None and "DMA" in named.what else ""
    return (f"Semaphore {what} has non-zero count for {where} at kernel exit: {leak.count}{unit}; every signal "
            "and DMA needs its wait")


def _named_references(line: str, call: PallasCall | None) -> str:
    return _jax_compat.named_references(line, semaphore=lambda words, n: _sem_ref(call, words, n),
                                        buffer=lambda n: _oob(call, n))


def _sem_ref(call: PallasCall | None, words: str, number: int) -> str | None:
    named = interpreter_names(call)[1].get(number) if call is not None else None
    return None if named is None or call is None else f"{words} {named.text(call)}"


def _oob(call: PallasCall | None, number: int) -> str | None:
    named = interpreter_names(call)[0].get(number) if call is not None else None
    return None if named is None or call is None else f"{named.text(call)} [interpreter buffer {number}]"
