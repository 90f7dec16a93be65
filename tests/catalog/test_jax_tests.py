"""The kernels adapted from jax's own tests/pallas: at least 15, each with a feature the
catalog lacks, and each clean on every interpreter of its platforms through ``verify``:
a pass, or n/a with the upstream limitation that JAX's interpreter hit."""

from __future__ import annotations

import pytest

from pallas_verify.engine import verify
from reference_kernels import catalog
from reference_kernels.upstream import jax_tests, upstream

SPECS = jax_tests()
_INTERPRETERS = {"tpu": ["interpret", "tpu_interpret"], "gpu": ["interpret", "gpu_interpret"]}


def test_at_least_15_kernels_each_with_a_feature_the_catalog_lacks_and_in_the_conformance_set():
    assert len(SPECS) >= 15 and len({s.name for s in SPECS}) == len(SPECS)
    known = {f for spec in catalog() for f in spec.features}
    for spec in SPECS:
        assert spec.name.startswith("jaxtests_") and "jax_tests" in spec.features
        assert set(spec.features) - known - {"upstream", "jax_tests"}, spec.name
    assert {s.name for s in SPECS} <= {s.name for s in upstream()}  # what `pallas-verify conformance` runs


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_each_kernel_is_clean_on_every_interpreter(spec, tmp_path):
    backends = sorted({b for p in spec.platforms for b in _INTERPRETERS[p]})
    report = verify(spec, backends, max_examples=1, profile="ci", out_dir=tmp_path, shrink_budget_s=0)
    assert report.findings == [], [f"{f.backend} {f.kind}: {f.message[:300]}" for f in report.findings]
    for cell in report.results:
        assert cell.status in ("pass", "unsupported"), (cell.backend, cell.status, cell.reason)
        if cell.status == "unsupported":
            assert "upstream limitation" in cell.reason, (cell.backend, cell.reason)
    assert any(cell.status == "pass" for cell in report.results) or "semaphore_outputs" in spec.features



@pytest.mark.parametrize("backend", ["interpret", "tpu_interpret"])
def test_the_revisit_sum_reference_keeps_float16_subnormals_as_the_kernel_does(backend):
    """One slab is a copy added to zeros, and the add runs in float32, where float16's
    subnormals are normal numbers: the kernel keeps them, and so must the reference (one
    that flushed below float16's smallest normal failed the correct kernel on float16)."""
    import numpy as np

    from pallas_verify.backends import registry
    from pallas_verify.case import Case
    from reference_kernels.upstream.tests_tpu_pipeline import JT_REVISIT_ANY_SUM as spec

    x = np.full((16, 128), np.finfo(np.float16).smallest_subnormal * 3, dtype=np.float16)
    config = {"row_blocks": 1, "rows": 16, "cols": 128, "dtype": "float16"}
    outcome = registry.get(backend).run(Case(spec=spec, config=config, inputs=(x,), backend=backend))
    assert outcome.error is None, outcome.error
    [kernel] = outcome.outputs
    reference = np.asarray(spec.reference(x, **config))
    assert (reference != 0).all()
    np.testing.assert_array_equal(np.asarray(kernel), reference)
