"""Specs found by reference: what lets a worker, a reproducer or a replay load them again."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import textwrap

import pytest

from pallas_verify.campaigns.conformance import registered_specs
from pallas_verify.loader import load_spec, spec_ref

_MODULE = '''
import functools
import numpy as np
from hypothesis import strategies as st
import pallas_verify as pv

def _foreign(fn):
    """A wrapper that copies another library's __module__ onto the kernel."""
    @functools.wraps(np.add)
    def call(*args, **kwargs):
        return fn(*args, **kwargs)
    return call

WRAPPED = pv.KernelSpec(name="wrapped", kernel=_foreign(lambda x: x), reference=_foreign(lambda x: x),
                        configs=st.just({}), inputs=lambda c: st.just((np.zeros(4, np.float32),)))
'''


@pytest.fixture
def wrapped_module(tmp_path, monkeypatch):
    (tmp_path / "pv_wrapped_specs.py").write_text(textwrap.dedent(_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("pv_wrapped_specs")
    sys.modules.pop("pv_wrapped_specs", None)


def test_a_spec_whose_kernel_wraps_another_librarys_function_is_found_in_its_own_module(wrapped_module):
    spec = wrapped_module.WRAPPED
    assert spec.kernel.__module__ == "numpy"  # the wrapper hides the spec's module
    assert spec.module == "pv_wrapped_specs"
    ref = spec_ref(spec)
    assert ref is not None and ref.endswith("pv_wrapped_specs.py::WRAPPED")
    assert load_spec(ref).name == "wrapped"


def test_a_spec_remembers_the_module_that_built_it_not_dataclasses_replace():
    spec = registered_specs("ragged_add")[0]
    assert spec.module == "reference_kernels.elementwise"
    assert dataclasses.replace(spec, name="copy").module == __name__


def test_every_bundled_spec_has_a_reference_that_loads_the_same_spec():
    for spec in registered_specs():
        ref = spec_ref(spec)
        assert ref is not None, spec.name
        assert load_spec(ref) is spec, ref
