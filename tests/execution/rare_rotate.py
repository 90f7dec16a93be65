"""block_copy with the rotated output index map of the rotated_index_map mutant, reached
only by some configs (rotate = 1 when the drawn key is 1 mod 4)."""

from hypothesis import strategies as st

import pallas_verify as pv
from reference_kernels.mutants.grid import _copy_inputs, block_copy

RARE_ROTATE = pv.KernelSpec(
    name="rare_rotate",
    kernel=lambda x, key: block_copy(x, rotate=1 if key % 4 == 1 else 0),
    reference=lambda x, key: x,
    configs=st.fixed_dictionaries({"key": st.integers(0, 2**16)}),
    inputs=_copy_inputs,
    platforms=("tpu",),
)
