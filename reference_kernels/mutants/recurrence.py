"""Mutants of the chunked recurrence (``reference_kernels.recurrence``): bugs at the chunk
boundary, which the token-serial reference shows and the float32 rule's depth term must
not hide."""

from __future__ import annotations

import dataclasses
import functools

from reference_kernels._draw import without
from reference_kernels.mutants import Mutant
from reference_kernels.recurrence import _SIZES, CHUNKED_GLA, CHUNKED_GLA_EXCLUSIVE, chunked_gla

dropped_decay_spec = dataclasses.replace(
    CHUNKED_GLA, name="chunked_gla_dropped_decay",
    kernel=without(functools.partial(chunked_gla, carry_decay=False), *_SIZES))
boundary_off_by_one_spec = dataclasses.replace(
    CHUNKED_GLA, name="chunked_gla_boundary_off_by_one",
    kernel=without(functools.partial(chunked_gla, to_end="exclusive_off_by_one"), *_SIZES))

MUTANTS = [
    Mutant(spec=dropped_decay_spec, twin=CHUNKED_GLA, expects=("mismatch",),
           bug="the state carried into the next chunk is not decayed across the chunk"),
    Mutant(spec=boundary_off_by_one_spec, twin=CHUNKED_GLA_EXCLUSIVE, expects=("mismatch",),
           bug="each key is decayed to the chunk's end from the exclusive cumulative log-decay without its own "
               "step subtracted: one step too many"),
]
