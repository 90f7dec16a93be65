"""What a TPU interpret mode run did with its memory: which knobs could have changed its
outputs (JAX 0.12 internals: ``shared_memory.GenericSharedMemory``).

A knob of TPU interpret mode changes a kernel's outputs only through memory:

- ``uninitialized_memory`` fills memory nothing has written: scratch buffers,
  ``run_scoped`` allocations, the kernel's output block buffers, the padding of blocks that
  overhang their array, output elements no grid point writes, and reads past a buffer under
  ``out_of_bounds_reads="uninitialized"``. It can change the outputs only if the run
  reads such memory (``fill``).
- ``random_seed`` orders, and ``num_cores_or_threads`` splits, the *sweeps* of the grid: a
  sweep is the grid points that share their coordinates along the "parallel" dimensions
  (they run in order, on one core). Their order can change the outputs only if a sweep
  reads memory another sweep wrote (a scratch or output block buffer carried over),
  writes an HBM element another sweep wrote or read, or writes an output block buffer
  another sweep wrote since it was last copied out (a write lost before it reached HBM)
  (``order``); two cores can race only on what sweeps share.

``watch(plan)`` records every read, write and allocation of the run's memory (per
element: which sweep last wrote it, and for HBM which sweeps read it) and says which of
these it saw. A kernel's own write (a swap) belongs to the sweep that makes it. The
interpreter's copies (a store right after a read: an input block into its buffer, an
output block back to HBM) keep what they copy as it was: an input block's elements stay
the inputs', written before any sweep, and the padding they copy stays fill.

Three knobs can be given to a run after it is compiled (``RUN_TIME``), so that a rerun
changing only these reuses the compiled run: when DMAs complete and race detection are
read only while it runs (each pallas_call's memory takes them when it is made); the fill
is traced in, but only into memory nothing has written yet (inputs padded to their
blocks, outputs, scratch, ``run_scoped`` buffers), whose every unwritten element the
watch refills with the fill asked for as the buffer is made. The fill needs a plan (which
elements of a buffer hold data); the other two do not.

What is not followed, so a caller keeps every rerun there (``plan.followed`` is False):
explicit DMAs, which copy asynchronously, and semaphores; host callbacks that return
values; a kernel that uses the old value a ``swap`` returns (``ref[...] = x`` discards
it). Kernels of several pallas_calls, or over a mesh, have no plan. Anything unexpected
while recording makes the watch report everything (``broken``): a rerun is never skipped
on a guess.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["HBM_SPACES", "RUN_TIME", "MemoryPlan", "MemoryWatch", "available", "on_grid_point", "run_time_knobs",
           "watch"]

#: The knobs of InterpretParams a watch can give a run compiled with other values of them
#: (module docstring), with their upstream defaults.
RUN_TIME: dict[str, Any] = {"uninitialized_memory": "nan", "dma_execution_mode": "on_wait", "detect_races": False}

# A shadow element's writer: nothing yet, or written before the kernel ran (its inputs,
# its scalar prefetch); a sweep's number otherwise (>= 0).
_UNWRITTEN = -1
_BEFORE = -2
# An HBM element's readers: none yet, or several sweeps; one sweep's number otherwise.
_NO_READER = -1
_READERS = -2
#: Memory spaces TPU interpret mode keeps in HBM (no buffer of the kernel's own).
HBM_SPACES = frozenset({"any", "hbm"})


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """What a watch needs to know of the kernel's one pallas_call.

    Attributes:
      input_shapes: each input's array shape (its HBM buffer holds the inputs there; the
        rest of it is the padding of overhanging blocks).
      num_index_operands: scalar-prefetch operands (their SMEM buffers hold data).
      buffers: the role (``"in"``, ``"out"``, ``"scratch"``) of each buffer the kernel gets
        in VMEM or SMEM after its scalar prefetch, in the order TPU interpret mode makes
        them on each core: its blocks not in HBM, then its scratch.
      parallel: per grid dimension, whether TPU interpret mode runs it as "parallel".
      followed: whether a watch can follow every access of the kernel (module docstring);
        where not, it says every knob could change the outputs.
    """

    input_shapes: tuple[tuple[int, ...], ...]
    num_index_operands: int
    parallel: tuple[bool, ...]
    buffers: tuple[str, ...] = ()
    followed: bool = True


@dataclasses.dataclass
class MemoryWatch:
    """What one run did with its memory (module docstring).

    Attributes:
      fill: it read memory nothing had written.
      order: a sweep read memory another sweep wrote, or wrote an HBM element another
        sweep wrote or read.
      broken: recording failed somewhere: every knob counts as able to change the outputs.
      fill_value: the fill every unwritten element of a new buffer gets (``"nan"``,
        ``"zero"``), or None to leave the one the run was compiled with.
    """

    plan: MemoryPlan
    fill: bool = False
    order: bool = False
    broken: bool = False
    fill_value: str | None = None
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)
    _writers: dict[Any, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)
    _readers: dict[Any, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)
    _sweep: dict[int, int | None] = dataclasses.field(default_factory=dict, repr=False)  # core -> sweep
    _sweeps: dict[tuple[int, ...], int] = dataclasses.field(default_factory=dict, repr=False)
    _copied: dict[int, tuple[Any, np.ndarray]] = dataclasses.field(default_factory=dict, repr=False)  # core ->
    # the key and writers of its last read
    _outputs: dict[Any, int | None] = dataclasses.field(default_factory=dict, repr=False)  # output block buffer ->
    # the sweep that wrote it since it was last copied out
    _logical: dict[Any, tuple[int, ...]] = dataclasses.field(default_factory=dict, repr=False)  # writes clip to it
    _allocated: dict[tuple[bool, int, int], int] = dataclasses.field(default_factory=dict, repr=False)  # pre-grid
    _in_grid: bool = False

    def saw(self) -> dict[str, bool]:
        """``fill`` and ``order`` as one mapping (both True when broken or not followed)."""
        unknown = self.broken or not self.plan.followed
        return {"fill": unknown or self.fill, "order": unknown or self.order}

    # -- events, each under the lock (two cores run as two threads) --------------------

    def new_call(self, num_devices: int) -> None:
        """A new SharedMemory: the pallas_call starts (again, inside a loop). Several devices
        share one memory whose grid points the recorder does not tell apart: not followed."""
        for table in (self._writers, self._readers, self._logical, self._sweep, self._sweeps, self._copied,
                      self._outputs, self._allocated):
            table.clear()
        self._in_grid = False
        self.broken |= num_devices > 1

    def grid_point(self, point: Sequence[int], core: int) -> None:
        coords = tuple(int(p) for p, par in zip(point, self.plan.parallel, strict=False) if par)
        self._in_grid = True
        self._sweep[core] = self._sweeps.setdefault(coords, len(self._sweeps))
        self._copied.pop(core, None)

    def barrier(self) -> None:
        """The cores meet: before the grid, and after it (reads then are no sweep's)."""
        self._sweep.clear()
        self._copied.clear()

    def allocated(self, key: Any, content: np.ndarray, logical: tuple[int, ...]) -> None:
        """A buffer: before the grid, the first HBM ones hold the inputs (in their array's
        shape) and the first others of each core the scalar prefetch, then the kernel's
        buffers (``plan.buffers``); the rest is fill (``fill_value``'s, when one is asked for)."""
        (space, _, device, core), shape = key, content.shape
        writers = np.full(shape, _UNWRITTEN, dtype=np.int32)
        if not self._in_grid:
            hbm = space in HBM_SPACES
            n = self._allocated.get((hbm, device, core), 0)
            self._allocated[hbm, device, core] = n + 1
            buffer = n - self.plan.num_index_operands
            if hbm and n < len(self.plan.input_shapes):
                writers[tuple(slice(0, s) for s in self.plan.input_shapes[n])] = _BEFORE
            elif not hbm and buffer < 0:
                writers[...] = _BEFORE
            elif not hbm and buffer < len(self.plan.buffers) and self.plan.buffers[buffer] == "out":
                self._outputs[key] = None
        self._writers[key] = writers
        self._logical[key] = logical
        if space in HBM_SPACES:
            self._readers[key] = np.full(shape, _NO_READER, dtype=np.int32)
        if self.fill_value is not None and not self.broken:  # a broken watch changes nothing
            from jax._src.pallas.mosaic.interpret import utils

            content[writers == _UNWRITTEN] = utils.get_uninitialized_value(content.dtype, self.fill_value)

    def released(self, key: Any, alive: bool) -> None:
        if not alive:
            for table in (self._writers, self._readers, self._logical, self._outputs):
                table.pop(key, None)

    def read(self, key: Any, rnge: Sequence[Any], got: np.ndarray | None, thread: Any) -> None:
        if not self.plan.followed:  # only the allocations matter (the fill)
            return
        writers = self._writers.get(key)
        if writers is None:
            self.broken = True
            return
        core = int(thread[1])
        rnge = self._normalized(key, rnge)
        wanted = _extent(rnge)
        region = _clip(rnge, writers.shape)
        if got is None or region is None or tuple(got.shape) != wanted:
            self.fill = True  # past the buffer: the read returns the fill there
        if region is None:
            self._copied.pop(core, None)
            return
        seen = writers[region]
        sweep = self._sweep.get(core)
        if np.any(seen == _UNWRITTEN):
            self.fill = True
        if sweep is not None and np.any((seen >= 0) & (seen != sweep)):
            self.order = True
        if sweep is not None and key in self._readers:
            readers = self._readers[key][region]  # a view: updated in place
            readers[...] = np.where((readers == _NO_READER) | (readers == sweep), sweep, _READERS)
        self._copied[core] = (key, np.array(seen, copy=True))

    def wrote(self, key: Any, rnge: Sequence[Any], value: Any, mask: Any, thread: Any, *, copy: bool) -> None:
        """A write: the kernel's (a swap), or one of the interpreter's copies (a store: an
        input block into its buffer, an output block back to HBM), which keeps the inputs'
        elements the inputs' and the fill the fill, as it copies them from the read before."""
        if not self.plan.followed:
            return
        writers = self._writers.get(key)
        if writers is None:
            self.broken = True
            return
        core, shape = int(thread[1]), tuple(np.shape(value))
        mask = None if mask is None else np.asarray(mask, dtype=bool)
        source, copied = self._copied.pop(core, (None, None))
        sweep = self._sweep.get(core)
        if copy and source in self._outputs:  # an output block copied out: its writes reached HBM
            self._outputs[source] = None
        if not copy and key in self._outputs:  # a write lost if another sweep's is still in it
            if self._outputs[key] not in (None, sweep):
                self.order = True
            self._outputs[key] = sweep
        region = _clip(self._normalized(key, rnge), writers.shape, limit=self._logical[key])
        if region is None:
            return
        target = writers[region]
        clipped = tuple(slice(0, s) for s in target.shape)  # the part of the value that lands
        epoch = np.int32(sweep if sweep is not None else _BEFORE)
        new = np.full(target.shape, epoch, dtype=np.int32)
        if copy and copied is not None and copied.shape == tuple(shape):
            kept = copied[clipped]
            new = np.where((kept == _BEFORE) | (kept == _UNWRITTEN), kept, new)
        written = np.ones(target.shape, dtype=bool) if mask is None else mask[clipped]
        if sweep is not None and key[0] in HBM_SPACES:
            readers = self._readers[key][region]
            if np.any(written & (((target >= 0) & (target != sweep)) | ((readers != _NO_READER) & (readers != sweep)))):
                self.order = True
        writers[region] = np.where(written, new, target)

    def _normalized(self, key: Any, rnge: Sequence[Any]) -> tuple[Any, ...]:
        """``rnge`` with a whole slice for each dimension it leaves out (as Buffer does)."""
        logical = self._logical[key]
        return tuple(rnge) + tuple(slice(0, s) for s in logical[len(rnge):])


def _extent(rnge: tuple[Any, ...]) -> tuple[int, ...]:
    """The shape a read of ``rnge`` returns when it is wholly in bounds."""
    return tuple(len(range(r.start, r.stop, r.step or 1)) for r in rnge if isinstance(r, slice))


def _clip(rnge: tuple[Any, ...], shape: tuple[int, ...], limit: tuple[int, ...] | None = None) -> tuple[Any, ...] | None:
    """``rnge`` clipped to ``limit`` (default ``shape``), as the interpreter's Buffer clips
    it; None when wholly outside."""
    from jax._src.pallas.mosaic.interpret import utils

    return utils.clip_range_to_shape(rnge, tuple(limit or shape))


# -- hooks --------------------------------------------------------------------------------

_CURRENT: list[MemoryWatch | None] = [None]
_RUN_TIME: list[Mapping[str, Any]] = [{}]  # the run-time knobs of the run in progress
_INSTALL = threading.Lock()
_INSTALLED = [False]


def on_grid_point(point: Sequence[int], core: int) -> None:
    """Called by the run's grid-point recorder: the sweep ``core`` is in now."""
    current = _CURRENT[0]
    if current is not None:
        with current._lock:
            current.grid_point(point, core)


@functools.cache
def available() -> bool:
    """Whether the installed JAX's TPU interpret mode keeps its memory the way this module
    follows it (``GenericSharedMemory``'s buffer methods, JAX 0.11 and later). Without it,
    no run is watched: every rerun runs and every knob is compiled in."""
    from jax._src.pallas.mosaic.interpret import shared_memory

    generic, tpu = getattr(shared_memory, "GenericSharedMemory", None), shared_memory.SharedMemory
    needed = ("allocate_buffer", "deallocate_buffer", "get_buffer_content", "store_buffer_content",
              "swap_buffer_content")
    return generic is not None and all(hasattr(generic, m) for m in needed) and hasattr(
        tpu, "update_clocks_for_device_barrier")


def run_time_knobs() -> dict[str, Any]:
    """The knobs a run can be given after it is compiled (``RUN_TIME``, with their upstream
    defaults) on the installed JAX: none where the watch is not ``available``."""
    return dict(RUN_TIME) if available() else {}


@contextlib.contextmanager
def watch(plan: MemoryPlan | None, run_time: Mapping[str, Any] | None = None) -> Iterator[MemoryWatch | None]:
    """Record what the TPU interpret mode run inside does with its memory (None without a
    plan), applying the ``run_time`` knobs (``RUN_TIME``; the fill only with a plan)."""
    run_time = dict(run_time or {})
    if plan is None and "uninitialized_memory" in run_time:
        raise ValueError("the fill is applied at run time only with a plan (which elements hold data)")
    if not available():
        if run_time or plan is not None:
            raise ValueError("this JAX's TPU interpret memory cannot be watched (memwatch.available): compile every "
                             "knob in and watch nothing")
        yield None
        return
    _install()
    fill = run_time.get("uninitialized_memory", RUN_TIME["uninitialized_memory"])
    refill = fill if fill != RUN_TIME["uninitialized_memory"] else None  # runs compile the default in
    current = MemoryWatch(plan, fill_value=refill) if plan is not None else None
    _CURRENT[0], _RUN_TIME[0] = current, run_time
    try:
        yield current
    finally:
        _CURRENT[0], _RUN_TIME[0] = None, {}


def _event(name: str, *args: Any, **kwargs: Any) -> None:
    current = _CURRENT[0]
    if current is None:
        return
    with current._lock:
        try:
            getattr(current, name)(*args, **kwargs)
        except Exception:  # a shape or key this module did not expect: report everything
            current.broken = True


def _install() -> None:
    with _INSTALL:
        if _INSTALLED[0]:
            return
        from jax._src.pallas.mosaic.interpret import shared_memory

        generic, tpu = shared_memory.GenericSharedMemory, shared_memory.SharedMemory
        init, allocate, deallocate = tpu.__init__, generic.allocate_buffer, generic.deallocate_buffer
        get, store, swap = generic.get_buffer_content, generic.store_buffer_content, generic.swap_buffer_content
        barrier = tpu.update_clocks_for_device_barrier

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            for knob, value in _RUN_TIME[0].items():  # read by the run from here on
                object.__setattr__(self, knob, value)
            _event("new_call", self.num_devices)

        def allocate_buffer(self: Any, key: Any, *args: Any, **kwargs: Any) -> Any:
            fresh = key not in self.mem
            out = allocate(self, key, *args, **kwargs)
            if fresh:
                buffer = self.mem[key]
                _event("allocated", key, buffer.content, tuple(buffer.logical_shape))
            return out

        def deallocate_buffer(self: Any, key: Any, *args: Any, **kwargs: Any) -> Any:
            out = deallocate(self, key, *args, **kwargs)
            _event("released", key, key in self.mem)
            return out

        def get_buffer_content(self: Any, key: Any, rnge: Any, thread: Any, *args: Any, **kwargs: Any) -> Any:
            out = get(self, key, rnge, thread, *args, **kwargs)
            if thread is not None:
                _event("read", key, rnge, out[0], thread)
            return out

        def store_buffer_content(self: Any, key: Any, rnge: Any, value: Any, thread: Any, *args: Any,
                                 **kwargs: Any) -> Any:
            out = store(self, key, rnge, value, thread, *args, **kwargs)
            if out[0]:  # in bounds: written
                _event("wrote", key, rnge, value, None, thread, copy=True)
            return out

        def swap_buffer_content(self: Any, key: Any, rnge: Any, value: Any, mask: Any, thread: Any, *args: Any,
                                **kwargs: Any) -> Any:
            out = swap(self, key, rnge, value, mask, thread, *args, **kwargs)
            if out[0] is not None:
                _event("wrote", key, rnge, value, mask, thread, copy=False)
            return out

        def update_clocks_for_device_barrier(self: Any, device_id: int) -> Any:
            out = barrier(self, device_id)
            _event("barrier")
            return out

        tpu.__init__ = __init__
        generic.allocate_buffer = allocate_buffer
        generic.deallocate_buffer = deallocate_buffer
        generic.get_buffer_content = get_buffer_content
        generic.store_buffer_content = store_buffer_content
        generic.swap_buffer_content = swap_buffer_content
        tpu.update_clocks_for_device_barrier = update_clocks_for_device_barrier
        _INSTALLED[0] = True
