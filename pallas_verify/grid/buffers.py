"""TPU interpret mode's buffer, semaphore and DMA numbers in the kernel's own terms.

TPU interpret mode names memory by number: ``('vmem', 103, 0, 0)`` is buffer 103 of core 0
on device 0, ``Semaphore 2000`` a semaphore, a thread ``(100, 0)`` a DMA. It hands the
numbers out in a fixed order for each pallas_call (JAX 0.12, interpret_pallas_call.py):
buffers from 100, first the HBM copy of each input, then of each output not aliased to an
input, then each scalar-prefetch operand (SMEM), then, for each parameter of the kernel
function that is neither in HBM/ANY nor a semaphore, a buffer of its own (the VMEM blocks
of inputs and outputs, then the scratch operands); semaphores from 2000, one per element
of each semaphore parameter; DMAs from 100. So the kernel's trace (``grid.trace``) maps
each number to a parameter, named as in the kernel's signature; buffers past those are
``run_scoped`` allocations.

``in_kernel_terms`` rewrites the interpreter's race reports, semaphore counts, deadlock
and out-of-bounds messages with those names, the elements and block (with the grid
points whose index map gives it) and the kernel source line of each access.
"""

from __future__ import annotations

import dataclasses
import linecache
import re
from collections.abc import Sequence

import numpy as np

from pallas_verify.grid.trace import UNWINDOWED_SPACES, BlockOperand, PallasCall

__all__ = ["Named", "in_kernel_terms", "interpreter_names"]

_FIRST_BUFFER, _FIRST_SEMAPHORE = 100, 2000
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
    first_in = call.num_prefetch
    first_out = first_in + len(call.inputs)
    buffers: dict[int, Named] = {}
    number = _FIRST_BUFFER
    for k, operand in enumerate(call.inputs):
        buffers[number] = Named(name=params[first_in + k][0], role=f"input {k}", what="the whole array in HBM",
                                operand=operand if operand.windowed else None)
        number += 1
    aliased = {o: i for i, o in call.aliases}
    for k, operand in enumerate(call.outputs):
        if k not in aliased:
            buffers[number] = Named(name=params[first_out + k][0], role=f"output {k}",
                                    what="the whole array in HBM", operand=operand if operand.windowed else None)
            number += 1
    for k in range(call.num_prefetch):
        buffers[number] = Named(name=params[k][0], role=f"scalar prefetch {k}", what="SMEM")
        number += 1
    semaphores: dict[int, Named] = {}
    sem = _FIRST_SEMAPHORE
    for i, (name, space, shape, dtype) in enumerate(params[call.num_prefetch:], start=call.num_prefetch):
        role = _role(call, i)
        if space == "semaphore_mem":
            kind = "a DMA semaphore" if "dma" in dtype else "a semaphore"
            for index in np.ndindex(*shape):
                label = f"{name}[{', '.join(map(str, index))}]" if shape else name
                semaphores[sem] = Named(name=label, role=role, what=kind)
                sem += 1
        elif space not in UNWINDOWED_SPACES:
            block = role.startswith(("input", "output"))
            what = f"its {_space(space)} block buffer" if block else f"{_space(space)} {dtype}{list(shape)}"
            buffers[number] = Named(name=name, role=role, what=what)
            number += 1
    return buffers, semaphores


def _space(space: str) -> str:
    return "VMEM" if space in ("default", "vmem") else space.upper()


_ACCESS = re.compile(r"^\s*(read|write) of \('(\w+)', (\d+), (\d+), (\d+)\)\[(.*)\] from \((\d+), (\d+)\), (.*)$")
_CLOCK = re.compile(r"^\s*clock: ")
_FRAME = re.compile(r"^(.*):(\d+):\d+ \((.*)\)$")
_SLICE = re.compile(r"slice\((\d+), (\d+), (?:1|None)\)|(\d+)")
_LEAK = re.compile(r"^Semaphore (\d+) has non-zero count for (\d+) \(global core (\d+)\) at kernel exit: (-?\d+)$")
_SEM_REF = re.compile(r"\b(DMA semaphore|semaphore) (\d+)\b")
_OOB = re.compile(r"\((\d+) (\d+) (\w+) (\d+)\)")
_DMA_NUMBER = re.compile(r"DMA \d+")


def in_kernel_terms(text: str, calls: Sequence[PallasCall]) -> str:
    """``text`` (interpreter diagnostics or an error message) with buffers, semaphores,
    DMAs and cores named as the kernel names them; text it does not recognise is kept."""
    calls = [c for c in calls if c.params]
    if not calls or not text:
        return text
    out: list[str] = []
    lines = text.splitlines()
    races: dict[str, int] = {}  # a race's text without its DMA numbers -> how many such races
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "RACE DETECTED":
            accesses = []
            i += 1
            while i < len(lines) and (_ACCESS.match(lines[i]) or _CLOCK.match(lines[i])):
                if _ACCESS.match(lines[i]):
                    accesses.append(_ACCESS.match(lines[i]))
                i += 1
            race = _race(accesses, calls)
            key = _DMA_NUMBER.sub("DMA", "\n".join(race))
            races[key] = races.get(key, 0) + 1
            if races[key] == 1 and len(races) <= _MAX_RACES:
                out.extend(race)
            continue
        leak = _LEAK.match(line)
        if not line.strip():
            pass
        elif leak:
            out.append(_leak(leak, calls))
        else:
            out.append(_OOB.sub(lambda m: _oob(m, calls), _SEM_REF.sub(lambda m: _sem_ref(m, calls), line)))
        i += 1
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


def _race(accesses: list[re.Match[str]], calls: Sequence[PallasCall]) -> list[str]:
    if not accesses:
        return ["RACE DETECTED"]
    functions = [f.group(3) for a in accesses if (f := _FRAME.match(a.group(9)))]
    call = _pick(calls, functions[0] if functions else None)
    first = accesses[0]
    space, number = first.group(2), int(first.group(3))
    head = f"RACE DETECTED on {_buffer(call, space, number)}"
    where = _elements(call, number, first.group(6))
    lines = [f"{head}, {where}:"]
    for a in accesses:
        lines.append(f"  {a.group(1)} by {_thread(int(a.group(7)), int(a.group(8)))}"
                     f"{_range_note(a, first)} {_frame(a.group(9), a.group(1), call, int(a.group(3)))}")
    return lines


def _buffer(call: PallasCall | None, space: str, number: int) -> str:
    if call is None:
        return f"{space.upper()} buffer {number} of one of the kernel's pallas_calls"
    named = interpreter_names(call)[0].get(number)
    if named is None:
        return f"a {_space(space)} buffer that run_scoped allocates in {call.name} (interpreter buffer {number})"
    return named.text(call)


def _ranges(text: str) -> list[tuple[int, int]] | None:
    """``(slice(0, 8, 1), slice(0, 128, 1))`` as [(0, 8), (0, 128)]; None for the whole buffer."""
    if text.strip() in ("()", ""):
        return None
    found = []
    for m in _SLICE.finditer(text):
        if m.group(3) is not None:
            found.append((int(m.group(3)), int(m.group(3)) + 1))
        else:
            found.append((int(m.group(1)), int(m.group(2))))
    return found


def _elements(call: PallasCall | None, number: int, text: str) -> str:
    ranges = _ranges(text)
    if ranges is None:
        return "all of it"
    where = "elements [" + ", ".join(f"{a}:{b}" for a, b in ranges) + "]"
    named = interpreter_names(call)[0].get(number) if call is not None else None
    if call is None or named is None or named.operand is None:
        return where
    return where + _block_points(call, named.operand, ranges)


def _block_points(call: PallasCall, operand: BlockOperand, ranges: list[tuple[int, int]]) -> str:
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


def _range_note(access: re.Match[str], first: re.Match[str]) -> str:
    if access.group(6) == first.group(6):
        return ""
    ranges = _ranges(access.group(6))
    return " (all of it)" if ranges is None else " ([" + ", ".join(f"{a}:{b}" for a, b in ranges) + "])"


def _thread(device: int, core: int) -> str:
    if device >= 100:
        return f"DMA {device}"
    return f"core {core}" + (f" of device {device}" if device else "")


def _frame(text: str, kind: str, call: PallasCall | None, number: int) -> str:
    match = _FRAME.match(text)
    if match is None:
        named = interpreter_names(call)[0].get(number) if call is not None else None
        role = named.role.split()[0] if named is not None else ""
        return {("output", "write"): "(the pipeline writing an output block back to HBM after a grid step)",
                ("output", "read"): "(the pipeline reading the output in HBM: a block before a step, or the "
                                    "result at the kernel's end)",
                ("input", "read"): "(the pipeline loading an input block before a grid step)"}.get(
                    (role, kind), f"({text})")
    path, line, function = match.group(1), int(match.group(2)), match.group(3)
    source = linecache.getline(path, line).strip()
    return f"at {path}:{line} ({function})" + (f": {source}" if source else "")


def _leak(match: re.Match[str], calls: Sequence[PallasCall]) -> str:
    number, device, core, count = (int(g) for g in match.groups())
    call = _pick(calls, None)
    named = interpreter_names(call)[1].get(number) if call is not None else None
    what = named.text(call) if named is not None and call is not None else f"semaphore {number}"
    where = f"core {core}" + (f" of device {device}" if device else "")
    unit = " (bytes of DMAs never waited on)" if named is not None and "DMA" in named.what else ""
    return (f"Semaphore {what} has non-zero count for {where} at kernel exit: {count}{unit}; every signal "
            "and DMA needs its wait")


def _sem_ref(match: re.Match[str], calls: Sequence[PallasCall]) -> str:
    call = _pick(calls, None)
    named = interpreter_names(call)[1].get(int(match.group(2))) if call is not None else None
    return match.group(0) if named is None or call is None else f"{match.group(1)} {named.text(call)}"


def _oob(match: re.Match[str], calls: Sequence[PallasCall]) -> str:
    call = _pick(calls, None)
    if call is None:
        return match.group(0)
    named = interpreter_names(call)[0].get(int(match.group(4)))
    return match.group(0) if named is None else f"{named.text(call)} [interpreter buffer {match.group(4)}]"
