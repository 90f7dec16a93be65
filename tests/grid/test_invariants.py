"""jax's GridMapping.check_invariants, run by the static check on every pallas_call."""

from __future__ import annotations

import dataclasses

import jax
from hypothesis import find

from pallas_verify import _jax_compat
from pallas_verify.grid.invariants import invariant_issues
from reference_kernels import catalog

SPECS = {s.name: s for s in catalog()}


def _example(name):
    spec = SPECS[name]
    config = find(spec.configs, lambda c: True)
    return spec, config, find(spec.inputs(config), lambda _: True)


def test_catalog_kernels_keep_the_invariants():
    for name in ("ragged_add", "matmul_f32", "softmax"):
        spec, config, inputs = _example(name)
        assert invariant_issues(spec.kernel, inputs, config) == [], name


def test_a_broken_grid_mapping_is_an_exception_naming_the_call():
    spec, config, inputs = _example("ragged_add")
    closed = jax.make_jaxpr(lambda *xs: spec.kernel(*xs, **config))(*inputs)
    eqns = list(_jax_compat.equations(closed.jaxpr))
    call = next(e for e in eqns if e.primitive.name == "pallas_call")
    mapping = call.params["grid_mapping"]
    broken = object.__new__(type(mapping))  # bypass replace(), which would check it
    for field in dataclasses.fields(mapping):
        object.__setattr__(broken, field.name, getattr(mapping, field.name))
    object.__setattr__(broken, "grid_names", ("only_one_name",) * (len(mapping.grid) + 1))
    tampered = call.replace(params={**call.params, "grid_mapping": broken})
    [(name, error)] = list(_jax_compat.grid_invariant_errors(closed.jaxpr.replace(eqns=[tampered])))
    assert name == _jax_compat.call_name(call)
    assert error.startswith("AssertionError")
    assert list(_jax_compat.grid_invariant_errors(closed)) == []


def test_the_static_check_reports_a_violation(monkeypatch):
    from pallas_verify.grid import invariants
    from pallas_verify.grid.tasks import serve

    spec, config, inputs = _example("ragged_add")
    monkeypatch.setattr(invariants._jax_compat, "grid_invariant_errors",
                        lambda closed: iter([("_add_kernel", "AssertionError: (grid, grid_names)")]))
    issues = serve(spec, {"task": "static", "inputs": inputs, "config": config})
    [issue] = [i for i in issues if i.kind == "exception"]
    assert "GridMapping.check_invariants" in issue.message and issue.call == "_add_kernel"
