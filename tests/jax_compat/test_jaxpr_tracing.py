"""_jax_compat.tracing: the one jaxpr walker and what it reads of kernel equations."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

from pallas_verify import _jax_compat


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def _call(x, compiler_params=None, aliases=None):
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(
        _copy_kernel,
        grid=(2, 1),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=compiler_params,
        input_output_aliases=aliases or {},
    )(x)


def _x():
    return jax.ShapeDtypeStruct((16, 128), jnp.float32)


def _pallas_eqn(fn, *args):
    closed = jax.make_jaxpr(fn)(*args)
    return next(e for e in _jax_compat.equations(closed.jaxpr) if e.primitive.name == "pallas_call")


def test_equations_descend_into_bodies_unless_told_not_to():
    def f(x):
        inner = jax.jit(lambda y: jnp.sin(y) * 2.0)
        return jax.lax.scan(lambda c, _: (inner(c), None), x, None, length=3)[0]

    closed = jax.make_jaxpr(f)(jnp.ones(4))
    every = [e.primitive.name for e in _jax_compat.equations(closed.jaxpr)]
    assert every[0] == "scan" and {"jit", "sin", "mul"} <= set(every)
    top = [e.primitive.name for e in _jax_compat.equations(closed.jaxpr, into=lambda e: False)]
    assert top == ["scan"]


def test_evaluate_runs_a_jaxpr_through_the_callers_apply_and_literals():
    closed = jax.make_jaxpr(lambda x: jax.jit(lambda y: y * 3.0)(x) + 1.0)(np.float32(2.0))
    seen = []

    def apply(eqn, values):
        seen.append(eqn.primitive.name)
        body = _jax_compat.call_body(eqn)
        if body is not None:
            return _jax_compat.evaluate(*body, values, apply, literal=lambda v: v.val)
        return _jax_compat.bind(eqn, values)

    (out,) = _jax_compat.evaluate(closed.jaxpr, closed.consts, [np.float32(2.0)], apply, literal=lambda v: v.val)
    assert float(out) == 7.0
    assert seen[0] == "jit" and "mul" in seen and seen[-1] == "add"


def test_call_body_is_none_for_a_primitive_without_one():
    closed = jax.make_jaxpr(lambda x: x + 1.0)(1.0)
    assert _jax_compat.call_body(closed.jaxpr.eqns[0]) is None


def test_grid_mapping_reads_grid_blocks_semantics_and_aliases():
    params = pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"))
    eqn = _pallas_eqn(lambda x: _call(x, params, {0: 0}), _x())
    gm = _jax_compat.grid_mapping(eqn)
    assert gm.grid == (2, 1) and gm.num_inputs == 1 and gm.num_index_operands == 0
    assert gm.num_dynamic_grid_bounds == 0 and gm.vmapped_dims == ()
    assert [b.array_shape for b in gm.blocks] == [(16, 128), (16, 128)]
    assert [b.block_shape for b in gm.blocks] == [(8, 128), (8, 128)]
    assert all(b.element_dims == () and b.element_window == (None, None) for b in gm.blocks)
    assert [s.lower() for s in gm.declared_semantics] == ["parallel", "arbitrary"]
    assert gm.aliases == ((0, 0),)
    assert _jax_compat.call_name(eqn) == "_copy_kernel"


def test_grid_mapping_shows_a_grid_dimension_vmap_added():
    batched = jax.ShapeDtypeStruct((3, 16, 128), jnp.float32)
    eqn = _pallas_eqn(jax.vmap(_call), batched)
    gm = _jax_compat.grid_mapping(eqn)
    assert len(gm.grid) == 3 and gm.vmapped_dims == (0,)


def test_kernel_site_names_the_lowering_the_kernel_asks_for():
    assert _jax_compat.kernel_site(_pallas_eqn(_call, _x())) == "default"
    assert _jax_compat.kernel_site(_pallas_eqn(lambda x: _call(x, pltpu.CompilerParams()), _x())) == "mosaic_tpu"
    triton = _pallas_eqn(lambda x: _call(x, pltriton.CompilerParams(num_warps=4)), _x())
    assert _jax_compat.kernel_site(triton) == "triton" and _jax_compat.is_kernel(triton)


def test_abstract_mesh_of_carries_a_gpu_compute_capability():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    assert _jax_compat.abstract_mesh_of(mesh, jax.devices()[0]) == mesh.abstract_mesh
    gpu = _jax_compat.abstract_mesh_of(mesh, types.SimpleNamespace(compute_capability="10.0"))
    assert gpu.abstract_device.compute_capability == "10.0"
    assert gpu.axis_names == ("x",) and gpu.axis_sizes == (1,)
