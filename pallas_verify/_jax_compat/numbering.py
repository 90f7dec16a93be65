"""How TPU interpret mode numbers a pallas_call's memory, semaphores and DMAs, and the
diagnostics in which it names them by number (``interpret_pallas_call.py`` and
``shared_memory.py``; the same in JAX 0.10, 0.11 and 0.12).

``('vmem', 103, 0, 0)`` is buffer 103 of core 0 on device 0, ``Semaphore 2000`` a
semaphore, a thread ``(100, 0)`` a DMA. The numbers are handed out in a fixed order for
each pallas_call (``memory_numbers``): buffers from 100, first the HBM copy of each input,
then of each output not aliased to an input, then each scalar-prefetch operand (SMEM),
then, for each parameter of the kernel function that is neither in HBM/ANY nor a
semaphore, a buffer of its own (the VMEM blocks of inputs and outputs, then the scratch
operands); semaphores from 2000, one per element of each semaphore parameter; DMAs from
100. Buffers past those are ``run_scoped`` allocations.

The diagnostics (``diagnostic_lines``): a race report (``RACE DETECTED``, then one line per
access with its buffer, elements, thread and source frame, and vector clocks), a
semaphore left non-zero at kernel exit, and messages that name a semaphore
(``semaphore 2000``) or a buffer (``(0 0 vmem 103)``, out of bounds); ``named_references``
rewrites those names. ``tests/grid/test_buffers.py`` checks all of it on real runs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from pallas_verify._jax_compat.errors import RACE_MARKER
from pallas_verify._jax_compat.tracing import SEMAPHORE_SPACE, UNWINDOWED_SPACES

__all__ = ["FIRST_DMA", "Access", "Leak", "Place", "Race", "diagnostic_lines", "memory_numbers",
           "named_references"]

_FIRST_BUFFER, _FIRST_SEMAPHORE = 100, 2000
#: The number of a DMA's thread (threads below it are a device's cores).
FIRST_DMA = 100

#: What one number stands for: ``(kernel parameter index, place)`` for a buffer, where
#: place is ``"hbm"`` (an input's or output's whole array in HBM), ``"smem"`` (a
#: scalar-prefetch operand) or ``"own"`` (a buffer of the parameter's own, in its memory
#: space); ``(kernel parameter index, element index)`` for a semaphore.
Place = tuple[int, str]


def memory_numbers(params: Sequence[tuple[str, str, tuple[int, ...], str]], *, num_prefetch: int,
                   num_inputs: int, unaliased_outputs: Sequence[int]
                   ) -> tuple[dict[int, Place], dict[int, tuple[int, tuple[int, ...]]]]:
    """The buffers and the semaphores TPU interpret mode numbers for a pallas_call whose
    kernel takes ``params`` (``kernel_params``: name, memory space, shape, dtype; scalar
    prefetch, inputs, outputs, scratch), by number (``Place``)."""
    first_out = num_prefetch + num_inputs
    order = [*((num_prefetch + k, "hbm") for k in range(num_inputs)),
             *((first_out + k, "hbm") for k in unaliased_outputs),
             *((k, "smem") for k in range(num_prefetch))]
    semaphores: dict[int, tuple[int, tuple[int, ...]]] = {}
    for i, (_, space, shape, _) in enumerate(params[num_prefetch:], start=num_prefetch):
        if space == SEMAPHORE_SPACE:
            for index in np.ndindex(*shape):
                semaphores[_FIRST_SEMAPHORE + len(semaphores)] = (i, tuple(index))
        elif space not in UNWINDOWED_SPACES:
            order.append((i, "own"))
    return {_FIRST_BUFFER + n: place for n, place in enumerate(order)}, semaphores


@dataclasses.dataclass(frozen=True, kw_only=True)
class Access:
    """One access of a race report.

    Attributes:
      kind: ``"read"`` or ``"write"``.
      space: the memory space as the interpreter names it (``"vmem"``, ``"hbm"``...).
      buffer: the buffer's number.
      elements: the elements accessed, as the interpreter wrote them.
      ranges: ``elements`` as ``(start, stop)`` per dimension; None for the whole buffer.
      device, core: the thread that accessed it; ``device`` is a DMA's number from
        ``FIRST_DMA`` on.
      frame: ``(path, line, function)`` of the kernel source that made it; None where the
        interpreter names no source line (its own copies).
      frame_text: the frame as the interpreter wrote it.
    """

    kind: str
    space: str
    buffer: int
    elements: str
    ranges: tuple[tuple[int, int], ...] | None
    device: int
    core: int
    frame: tuple[str, int, str] | None
    frame_text: str


@dataclasses.dataclass(frozen=True)
class Race:
    """A race report: its accesses (none when the interpreter gave no line of them)."""

    accesses: tuple[Access, ...]


@dataclasses.dataclass(frozen=True)
class Leak:
    """A semaphore left non-zero at kernel exit: its number, device, global core, count."""

    semaphore: int
    device: int
    core: int
    count: int


_ACCESS = re.compile(r"^\s*(read|write) of \('(\w+)', (\d+), (\d+), (\d+)\)\[(.*)\] from \((\d+), (\d+)\), (.*)$")
_CLOCK = re.compile(r"^\s*clock: ")
_FRAME = re.compile(r"^(.*):(\d+):\d+ \((.*)\)$")
_SLICE = re.compile(r"slice\((\d+), (\d+), (?:1|None)\)|(\d+)")
_LEAK = re.compile(r"^Semaphore (\d+) has non-zero count for (\d+) \(global core (\d+)\) at kernel exit: (-?\d+)$")
_SEM_REF = re.compile(r"\b(DMA semaphore|semaphore) (\d+)\b")
_BUFFER_REF = re.compile(r"\((\d+) (\d+) (\w+) (\d+)\)")


def diagnostic_lines(text: str) -> Iterator[Race | Leak | str]:
    """``text`` (interpreter diagnostics or an error message) line by line: a race report
    with its access lines as one ``Race``, a ``Leak``, any other line as it is."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.strip() == RACE_MARKER:
            accesses = []
            while i < len(lines) and ((access := _ACCESS.match(lines[i])) or _CLOCK.match(lines[i])):
                if access:
                    accesses.append(_access(access))
                i += 1
            yield Race(tuple(accesses))
        elif leak := _LEAK.match(line):
            yield Leak(*(int(g) for g in leak.groups()))
        else:
            yield line


def _access(match: re.Match[str]) -> Access:
    frame = _FRAME.match(match.group(9))
    return Access(kind=match.group(1), space=match.group(2), buffer=int(match.group(3)), elements=match.group(6),
                  ranges=_ranges(match.group(6)), device=int(match.group(7)), core=int(match.group(8)),
                  frame=(frame.group(1), int(frame.group(2)), frame.group(3)) if frame else None,
                  frame_text=match.group(9))


def _ranges(text: str) -> tuple[tuple[int, int], ...] | None:
    """``(slice(0, 8, 1), slice(0, 128, 1))`` as ((0, 8), (0, 128)); None for the whole buffer."""
    if text.strip() in ("()", ""):
        return None
    found = []
    for m in _SLICE.finditer(text):
        if m.group(3) is not None:
            found.append((int(m.group(3)), int(m.group(3)) + 1))
        else:
            found.append((int(m.group(1)), int(m.group(2))))
    return tuple(found)


def named_references(line: str, *, semaphore: Callable[[str, int], str | None],
                     buffer: Callable[[int], str | None]) -> str:
    """``line`` with each semaphore it names (``semaphore 2000``, ``DMA semaphore 2001``:
    ``semaphore(words, number)``) and each buffer an out-of-bounds message names
    (``(0 0 vmem 103)``: ``buffer(number)``) replaced by what the callback gives; kept
    where it gives None."""
    line = _SEM_REF.sub(lambda m: semaphore(m.group(1), int(m.group(2))) or m.group(0), line)
    return _BUFFER_REF.sub(lambda m: buffer(int(m.group(4))) or m.group(0), line)
