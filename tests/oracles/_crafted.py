"""A crafted spec and case for the oracles' tests (no kernel runs)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify.case import Case

X = np.arange(8, dtype=np.float32)
PATHS = ["out"]


def copy_spec(**fields) -> pv.KernelSpec:
    """Built in a function: a module-level KernelSpec would be collected as a test."""
    return pv.KernelSpec(name="copy", kernel=lambda x: x, reference=lambda x: x, configs=st.just({}),
                         inputs=lambda config: st.just((X,)), **fields)


CASE = Case(spec=copy_spec(), config={"n": 8}, inputs=(X,), backend="tpu_interpret", mode={"dma_execution_mode": "eager"})
