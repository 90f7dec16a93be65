"""The precision oracle: a float64 ground truth, the kernel's error next to the reference's.

Correct-but-reordered computations pass without a tolerance; real precision bugs fail;
a missing ground truth is announced and judged by the reduction-depth bound; x64 is
enabled only for the ground truth.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv
from pallas_verify import precision, reference, tolerance, transforms
from pallas_verify.engine import verify
from pallas_verify.runner import Runner
from pallas_verify.tolerance import compare

RNG = np.random.default_rng(0)


def _blocked_row_sum(x: np.ndarray, block: int) -> np.ndarray:
    """Row sums in float32, block partials added one after the other (a tiled kernel's order)."""
    out = np.zeros((x.shape[0],), np.float32)
    for j in range(0, x.shape[1], block):
        out = (out + x[:, j:j + block].sum(axis=1, dtype=np.float32)).astype(np.float32)
    return out


def test_reordered_sum_passes_without_tolerance_where_the_dtype_table_fails():
    x = (RNG.standard_normal((8, 8192)) + 3.0).astype(np.float32)
    expected = np.cumsum(x, axis=1, dtype=np.float32)[:, -1]  # sequential: another order
    actual = _blocked_row_sum(x, 512)
    truth = x.astype(np.float64).sum(axis=1)
    judged = compare("out", actual, expected, None, truth)
    assert judged.ok, judged.describe()
    assert judged.rule == "ground truth"
    assert not compare("out", actual, expected, pv.Tolerance(rtol=1.3e-6, atol=1e-5)).ok


def test_precision_bug_fails_with_its_judgement_in_the_message():
    x = (RNG.standard_normal((16, 512)) + 10.0).astype(np.float32)
    truth = x.astype(np.float64).var(axis=1)
    expected = x.var(axis=1, dtype=np.float32)
    mean = x.mean(axis=1, keepdims=True).astype(ml_dtypes.bfloat16).astype(np.float32)
    actual = ((x - mean) ** 2).mean(axis=1, dtype=np.float32)
    judged = compare("out", actual, expected, None, truth)
    assert not judged.ok
    assert judged.kernel_error > tolerance.ERROR_RATIO * judged.reference_error
    text = judged.describe()
    for word in ("kernel error", "vs float64", "reference error", "(ratio", "bound", "worst at", "float64 "):
        assert word in text, text
    assert judged.worst is not None and judged.worst[0] in {(i,) for i in range(16)}


def test_floor_scales_with_dtype_epsilon_and_magnitude():
    truth = np.array([1000.0, 0.0, -3.0])
    expected = truth.astype(np.float32)
    one_ulp = np.nextafter(expected, np.float32(np.inf))
    assert compare("out", one_ulp, expected, None, truth).ok  # reference exact: the floor allows an ulp
    far = expected.copy()
    far[0] += 1.0  # ~ 8 ulp of 1000 in float32: beyond 2 eps x 1000
    assert not compare("out", far, expected, None, truth).ok


FP8 = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_outputs_are_judged_per_element_in_steps_of_the_dtype(dtype):
    truth = np.arange(8, dtype=np.float64)
    expected = truth.astype(dtype)
    judged = compare("out", (truth + 1).astype(dtype), expected, None, truth)  # adds one: within 2 eps x max
    assert not judged.ok and judged.rule == "ground truth in steps"
    assert judged.reference_error == 0 and judged.bound == tolerance.FLOOR_STEPS
    assert f"steps of {np.dtype(dtype).name} vs float64" in judged.describe()
    assert judged.max_rel == 1 and "max rel 1 and" in judged.describe()  # 1 where 0 was expected: not counted
    big = np.array([448.0 if dtype == ml_dtypes.float8_e4m3fn else 57344.0, 3.0, -5.0, 0.5])
    dropped = big.astype(dtype)
    dropped[1:] = 0  # zeroes every small element: a max-norm floor of 2 eps x max would pass it
    assert not compare("out", dropped, big.astype(dtype), None, big).ok


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_outputs_rounded_from_differently_accumulated_values_pass(dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 512)) * 2.0
    truth = x.sum(axis=1)
    expected = x.astype(np.float32).sum(axis=1).astype(dtype)
    kernel = x.astype(np.float32).reshape(64, 8, 64).sum(axis=2).sum(axis=1).astype(dtype)  # another order
    judged = compare("out", kernel, expected, None, truth)
    assert judged.ok, judged.describe()
    assert judged.rule == "ground truth in steps" and judged.kernel_error <= 0.5 + 1e-6


BF16 = ml_dtypes.bfloat16


def _bf16_matmul(k: int, seed: int, blocks: int, acc) -> tuple[np.ndarray, ...]:
    """(kernel, reference, float64, float32 shadow) of a bf16 matmul with a bf16 output: the
    kernel sums ``blocks`` float32 partial dots in an ``acc`` accumulator, the reference is
    one float32 dot."""
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((16, k)).astype(BF16), rng.standard_normal((k, 128)).astype(BF16)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    total = np.zeros((16, 128), acc)
    for part in np.split(np.arange(k), blocks):
        total = (total.astype(np.float32) + x32[:, part] @ y32[part]).astype(acc)
    shadow = x32 @ y32
    return total.astype(BF16), shadow.astype(BF16), x.astype(np.float64) @ y.astype(np.float64), shadow


@pytest.mark.parametrize("seed", range(3))
def test_bf16_outputs_are_judged_per_element_so_a_bf16_accumulator_is_found(seed):
    kernel, expected, truth, shadow = _bf16_matmul(256, seed, 2, BF16)
    judged = compare("out", kernel, expected, None, truth, shadow=shadow)
    assert not judged.ok and judged.rule == "ground truth in steps" and judged.margin > 10
    assert "steps of bfloat16 vs float64" in judged.describe()
    # The max-norm rule's floor of 2 eps at the largest output would pass it.
    floor = tolerance.FLOOR_EPS * float(ml_dtypes.finfo(BF16).eps) * np.abs(truth).max()
    assert np.abs(kernel.astype(np.float64) - truth).max() < floor
    clean = compare("out", _bf16_matmul(256, seed, 2, np.float32)[0], expected, None, truth, shadow=shadow)
    assert clean.ok and clean.margin <= 0.5, clean.describe()


def test_the_reference_always_passes_its_own_rule():
    rng = np.random.default_rng(5)
    truth = rng.standard_normal(4096) * np.exp2(rng.integers(-20, 20, 4096))
    for noise in (0.0, 1e-4, 1e-2):
        shadow = truth * (1 + noise * rng.standard_normal(4096))
        for dtype in (BF16, np.float16, ml_dtypes.float8_e4m3fn):
            expected = np.clip(shadow, -400, 400).astype(dtype)  # rounded once, e4m3 kept finite
            t = np.clip(truth, -400, 400)
            assert compare("out", expected, expected, None, t, shadow=np.clip(shadow, -400, 400)).ok


def _cancelling(seed: int) -> tuple[np.ndarray, ...]:
    """A tiled float32 matmul with a bf16 output whose float64 values are sums of terms near
    1000 |z| that cancel (x = 1000 + N(0, 1), y = [z; -z])."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((256, 128))
    x, y = (1000 + rng.standard_normal((16, 512))).astype(np.float32), np.concatenate([z, -z]).astype(np.float32)
    kernel = np.zeros((16, 128), np.float32)
    for j in range(0, 512, 128):  # float32 sums without BLAS, whose kernels round differently per build
        tile = (x[:, j:j + 128, None] * y[j:j + 128][None]).sum(axis=1, dtype=np.float32)
        kernel = (kernel + tile).astype(np.float32)
    shadow = x @ y
    return kernel.astype(BF16), shadow.astype(BF16), x.astype(np.float64) @ y.astype(np.float64), shadow


@pytest.mark.parametrize("seed", [0, 2, 6])
def test_cancellation_next_to_large_terms_is_not_a_false_fail(seed):
    kernel, expected, truth, shadow = _cancelling(seed)
    steps = precision.steps(np.dtype(BF16), truth)
    k_steps = np.abs(kernel.astype(np.float64) - truth) / steps
    r_steps = np.abs(expected.astype(np.float64) - truth) / steps
    assert k_steps.max() > 50  # near-zero outputs: the float32 noise is many bf16 steps there...
    assert (k_steps > 4 * r_steps + 2).any()  # ...where the reference happens to be closer
    judged = compare("out", kernel, expected, None, truth, shadow=shadow)
    assert judged.ok and judged.margin <= 0.5, judged.describe()
    absolute, _ = judged.noise  # the noise that cancellation leaves, an absolute part
    assert 0 < absolute <= np.abs(shadow.astype(np.float64) - truth).max()


def test_noise_relative_to_the_value_does_not_loosen_small_elements():
    truth = np.exp(np.linspace(-40, 0, 2048))  # softmax-like: values over 17 orders of magnitude
    shadow = truth * (1 + 1e-7 * np.random.default_rng(0).standard_normal(2048))  # float32-level noise
    kernel = (truth * 1.02).astype(BF16)  # 2%: three to five bf16 steps everywhere
    judged = compare("out", kernel, shadow.astype(BF16), None, truth, shadow=shadow)
    absolute, relative = judged.noise
    assert absolute < 1e-15 and 0 < relative < 1e-6  # the largest elements' noise stays relative
    assert not judged.ok and judged.bad.mean() > 0.5


def test_the_shadow_measures_noise_that_the_reference_rounding_hides():
    truth = np.array([1e-3, 100.0])
    expected = truth.astype(BF16)  # both rounded to nearest: no error visible beyond half a step
    kernel = (truth + 5e-5).astype(BF16)  # 5e-5 is about 6.5 bf16 steps at 1e-3
    assert not compare("out", kernel, expected, None, truth).ok
    judged = compare("out", kernel, expected, None, truth, shadow=truth + 3e-5)  # the reference's float32 value
    assert judged.ok and judged.reference_error == pytest.approx(3e-5)


def test_integers_nan_and_shape_stay_exact_under_the_oracle():
    ints = np.array([1, 2], np.int32)
    assert not compare("out", ints, np.array([1, 3], np.int32), None, np.array([1.0, 2.0])).ok
    nan_kernel = np.array([1.0, np.nan], np.float32)
    assert not compare("out", nan_kernel, np.array([1.0, 2.0], np.float32), None, np.array([1.0, 2.0])).ok
    both_nan = np.array([1.0, np.nan], np.float32)
    assert compare("out", both_nan, both_nan, None, np.array([1.0, np.nan])).ok
    assert "shape" in compare("out", np.zeros(2), np.zeros(3), None, np.zeros(3)).describe()


def test_explicit_tolerance_overrides_the_oracle():
    truth = np.array([1.0])
    actual, expected = np.array([1.1], np.float32), np.array([1.0], np.float32)
    assert not compare("out", actual, expected, None, truth).ok
    assert compare("out", actual, expected, pv.Tolerance(rtol=0.2, atol=0.0), truth).rule == "tolerance"
    assert compare("out", actual, expected, pv.Tolerance(rtol=0.2, atol=0.0), truth).ok


def test_depth_fallback_grows_with_depth_and_says_why():
    expected = np.full(4, 100.0, np.float32)
    actual = expected + np.float32(0.01)  # ~ 1e-4 relative
    shallow = compare("out", actual, expected, None, None, depth=1, note="no f64 kernel")
    deep = compare("out", actual, expected, None, None, depth=1_000_000, note="no f64 kernel")
    assert not shallow.ok and deep.ok
    assert "no float64 ground truth (no f64 kernel)" in shallow.describe()


# --- the ground truth ---------------------------------------------------------------

def _mixed_reference(x, y):
    z = jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)
    total = jax.lax.fori_loop(0, 3, lambda i, c: c + z.astype(jnp.float32), jnp.zeros(z.shape, jnp.float32))
    return total, jnp.argmax(z, axis=1)


def test_ground_truth_lifts_every_float_cast_to_float64_and_keeps_integers():
    x = RNG.standard_normal((8, 300)).astype(ml_dtypes.bfloat16)
    y = RNG.standard_normal((300, 4)).astype(ml_dtypes.bfloat16)
    truth = reference.ground_truth(_mixed_reference, (x, y))
    assert truth.reason is None
    total, index = truth.outputs
    assert total.dtype == np.float64 and index.dtype == np.int32
    exact = 3 * (x.astype(np.float64) @ y.astype(np.float64))
    np.testing.assert_allclose(total, exact, rtol=1e-12)
    assert truth.depth >= 300


def test_reduction_depth_counts_contractions_and_sums():
    closed = jax.make_jaxpr(lambda x, y: jnp.sum(x @ y, axis=1))(np.ones((2, 64), np.float32),
                                                                   np.ones((64, 5), np.float32))
    assert reference.reduction_depth(closed.jaxpr) == 64 + 5


def test_reduce_precision_means_no_ground_truth():
    truth = reference.ground_truth(lambda x: jax.lax.reduce_precision(x, 8, 7).sum(), (np.ones(16, np.float32),))
    assert truth.outputs is None and "reduce_precision" in truth.reason
    assert truth.depth == 16


def test_x64_is_enabled_only_for_the_ground_truth():
    seen = []

    def probe(x):
        seen.append(jax.config.jax_enable_x64)
        return x * 2

    truth = reference.ground_truth(probe, (np.ones(3, np.float32),))
    assert truth.outputs[0].dtype == np.float64
    assert not jax.config.jax_enable_x64
    assert jnp.ones(2).dtype == jnp.float32
    assert seen == [False]  # traced at working precision; only the float64 evaluation runs under x64


def test_grad_ground_truth_is_float64():
    spec = pv.KernelSpec(name="cube", kernel=lambda x: x ** 3, reference=lambda x: x ** 3,
                         configs=st.just({}), inputs=lambda _: st.just((np.ones(4, np.float32),)))
    x = np.linspace(0.5, 2.0, 4).astype(np.float32)
    inputs = (x, np.ones(4, np.float32), np.arange(1, dtype=np.int32))
    truth = transforms.ground_truth(spec, {}, inputs, "grad")
    assert truth.reason is None
    np.testing.assert_allclose(truth.outputs[0], 3 * x.astype(np.float64) ** 2, rtol=1e-12)
    assert truth.outputs[0].dtype == np.float64


# --- through verify -----------------------------------------------------------------

def _copy_body(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _x64_sensitive(x):
    """A kernel whose output dtype follows the x64 flag: float32 unless x64 leaked."""
    out = pl.pallas_call(_copy_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return out.astype(jnp.result_type(float))


def _inputs(_config):
    return st.just((np.linspace(-1, 1, 128).astype(np.float32),))


def test_x64_does_not_leak_into_an_in_process_kernel_run():
    spec = pv.KernelSpec(name="x64_probe", kernel=_x64_sensitive, reference=lambda x: x * 1.0,
                         configs=st.just({}), inputs=_inputs)
    report = verify(spec, ["interpret", "tpu_interpret"], max_examples=2, isolate="never", static=False)
    assert report.findings == [], [f.message for f in report.findings]
    assert {r.status for r in report.results} == {"pass"}


def _rounded_reference(x):
    return jax.lax.reduce_precision(x, 8, 23) * 2.0


def test_missing_ground_truth_is_announced_once_per_spec_and_still_judged():
    def double(x):
        return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2.0),
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    good = pv.KernelSpec(name="rounded", kernel=double, reference=_rounded_reference, configs=st.just({}),
                         inputs=_inputs)
    report = verify(good, ["interpret"], max_examples=2, isolate="never", static=False)
    assert report.findings == []
    [note] = report.kernels[0]["notes"]
    assert "no float64 ground truth" in note and "reduce_precision" in note

    bad = pv.KernelSpec(name="rounded_bad", kernel=functools.partial(lambda x: double(x) + 0.01),
                        reference=_rounded_reference, configs=st.just({}), inputs=_inputs)
    report = verify(bad, ["interpret"], max_examples=2, isolate="never", static=False)
    assert [f.kind for f in report.findings] == ["mismatch"]
    assert "no float64 ground truth" in report.findings[0].message


def test_runner_caches_the_ground_truth_with_the_reference():
    spec = pv.KernelSpec(name="x64_probe", kernel=_x64_sensitive, reference=lambda x: x * 1.0,
                         configs=st.just({}), inputs=_inputs)
    x = (np.linspace(-1, 1, 128).astype(np.float32),)
    with Runner(spec, isolate="never") as runner:
        first = runner.expected({}, x, "k")
        again = runner.expected({}, x, "k")
    assert first is again and runner.references.runs == 1
    outputs, paths, truth = first
    assert paths == ["out"] and outputs[0].dtype == np.float32 and truth.outputs[0].dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_tolerance_override_needs_no_ground_truth(dtype):
    spec = pv.KernelSpec(name="t", kernel=lambda x: x, reference=lambda x: x, configs=st.just({}),
                         inputs=_inputs, tolerance=pv.Tolerance(rtol=1e-3, atol=1e-3))
    with Runner(spec, isolate="never") as runner:
        _, _, truth = runner.expected({}, (np.ones(4, dtype),), "k")
    assert truth is None


@jax.custom_vjp
def _clip_grad(x):
    return x


_clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1, 1),))


def _control_flow_reference(x):
    y = jax.nn.relu(_clip_grad(x)).astype(jnp.float32)  # custom_jvp, custom_vjp
    y = jax.lax.cond(y.sum() > 0, lambda v: v * 2.0, lambda v: v - 1.0, y)
    carry, ys = jax.lax.scan(lambda c, v: (c + v, c * v), jnp.zeros((), jnp.float32), y)
    return carry, ys


def test_ground_truth_lifts_calls_and_control_flow():
    x = RNG.standard_normal(64).astype(ml_dtypes.bfloat16)
    truth = reference.ground_truth(_control_flow_reference, (x,))
    assert truth.reason is None, truth.reason
    y = np.maximum(x.astype(np.float64), 0)
    y = y * 2.0 if y.sum() > 0 else y - 1.0
    prefix = np.concatenate([[0.0], np.cumsum(y)[:-1]])
    np.testing.assert_allclose(truth.outputs[0], y.sum(), rtol=1e-13)
    np.testing.assert_allclose(truth.outputs[1], prefix * y, rtol=1e-13, atol=1e-13)
    assert all(o.dtype == np.float64 for o in truth.outputs)


def test_extreme_values_judge_without_warnings_and_a_non_finite_truth_falls_back_to_the_table():
    import warnings

    from pallas_verify.tolerance import compare

    big = np.float32(np.finfo(np.float32).max)
    expected = np.array([big, -big, 1.0, 2.0], np.float32)
    truth = np.array([np.inf, -np.inf, 1.0, 2.0])  # float64 overflowed where float32 did not
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = compare("out", expected.copy(), expected, None, truth)
        off = compare("out", np.array([big, np.float32(1e30), 1.0, 2.0], np.float32), expected, None, truth)
    assert same.ok
    assert not off.ok and off.bad.tolist() == [False, True, False, False]


def test_vmap_ground_truth_stacks_the_float32_shadows_of_narrow_outputs():
    spec = pv.KernelSpec(name="third", kernel=lambda x: x, reference=lambda x: (x / 3).astype(jnp.bfloat16),
                         configs=st.just({}), inputs=_inputs)
    batch = np.linspace(-1, 1, 3 * 128).reshape(3, 128).astype(np.float32)
    truth = transforms.ground_truth(spec, {}, (batch,), "vmap")
    [shadow] = truth.shadow
    assert shadow.shape == (3, 128) and shadow.dtype == np.float32
    np.testing.assert_allclose(shadow, batch / np.float32(3), rtol=1e-6)  # float32, not rounded to bf16
    assert transforms._example(truth, 1).shadow[0].shape == (128,)


def test_a_kernel_that_returns_nan_is_reported_by_its_nan_count_not_an_error_of_zero():
    def nan_kernel(x):
        return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * jnp.nan),
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    spec = pv.KernelSpec(name="nan_out", kernel=nan_kernel, reference=lambda x: x * 2.0, configs=st.just({}),
                         inputs=_inputs)
    report = verify(spec, ["interpret"], max_examples=1, isolate="never", static=False, shrink_budget_s=0.0)
    [finding] = report.findings
    assert finding.kind == "mismatch"
    assert "128/128 bad (100%), 128 of 128 elements NaN where float64 is finite" in finding.message
    assert "kernel error" not in finding.message and "max abs" not in finding.message


def test_the_float32_floor_grows_with_the_depth_of_the_computation():
    # A chunked algorithm 9 epsilons of the scale from float64, judged against an unusually
    # exact reference (half an epsilon): too far for a shallow computation, within what a
    # float32 algorithm rounding 1024 terms into each output can make.
    rng = np.random.default_rng(0)
    truth = rng.uniform(-1.0, 1.0, 256)
    eps = float(np.finfo(np.float32).eps)
    expected = (truth + 0.5 * eps * rng.choice([-1.0, 1.0], 256)).astype(np.float32)
    kernel = (truth + 9 * eps * rng.choice([-1.0, 1.0], 256)).astype(np.float32)
    shallow = compare("state", kernel, expected, None, truth, depth=16)
    assert not shallow.ok and shallow.floor_eps == tolerance.FLOOR_EPS * 2  # sqrt(16) = 4 epsilons
    deep = compare("state", kernel, expected, None, truth, depth=1024)
    assert deep.ok and deep.floor_eps == 32 and "32 eps x max|float64| (sqrt of its depth 1024)" in deep.describe()
    bf16_rounded = truth.astype(ml_dtypes.bfloat16).astype(np.float32)  # a bf16 intermediate: still found
    assert compare("state", bf16_rounded, expected, None, truth, depth=16384).margin > 2
