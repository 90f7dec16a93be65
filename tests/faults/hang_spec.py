"""A kernel whose every case hangs (a host callback that sleeps), for the fault suite."""

from __future__ import annotations

import time

import jax
import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv


def _hang(x):
    return jax.pure_callback(lambda v: (time.sleep(600), v)[1], jax.ShapeDtypeStruct(x.shape, x.dtype), x)


HANGS = pv.KernelSpec(name="hangs", kernel=_hang, reference=lambda x: x, configs=st.just({}),
                      inputs=lambda config: st.just((np.arange(8, dtype=np.float32),)))
