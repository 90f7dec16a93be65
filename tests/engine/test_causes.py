"""A finding's minimal config, knob by knob: which knobs the failure needs."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv
from pallas_verify.backends import registry
from pallas_verify.causes import knobs_needed
from pallas_verify.engine import _with_knobs
from pallas_verify.findings import Finding
from pallas_verify.runner import Runner
from tests.engine import _specs

MISMATCH = Finding(kind="mismatch", kernel="k", backend="interpret", message="outputs differ")


def test_a_knob_the_failure_does_not_need_is_named_with_the_value_that_still_fails():
    # off_by_one reads x a block ahead: wrong whenever the grid has more than one block,
    # whatever the block size; n sizes the inputs, so its simplest value is not tried.
    config = {"block": 256, "n": 300}
    inputs = tuple(np.random.default_rng(0).standard_normal(300).astype(np.float32) for _ in range(2))
    finding = Finding(kind="mismatch", kernel="scale_add_off_by_one", backend="interpret", message="outputs differ")
    with Runner(_specs.off_by_one, isolate="never") as runner:
        assert runner.judge(config, inputs, registry.get("interpret"), {}).findings  # it fails there
        found = _with_knobs(_specs.off_by_one, finding, {"config": config, "inputs": inputs, "mode": {}}, runner,
                            registry.get("interpret"), budget_s=60)
    found, example = found
    assert found.config == example["config"] == {"block": 128, "n": 300}  # every knob it does not need, simplest
    assert found.evidence["knobs"] == {"needed": [], "not_needed": {"block": 128},
                                       "untried": {"n": "its simplest value changes the inputs' shapes or dtypes"}}
    assert found.message.splitlines()[-1] == (
        "minimal config, knob by knob: does not need the rest: it fails the same way at block=128 (all at once too: "
        "the config above); "
        "not tried: n (its simplest value changes the inputs' shapes or dtypes)")


def _spec(configs: st.SearchStrategy) -> pv.KernelSpec:
    return pv.KernelSpec(name="k", kernel=lambda x, **_: x, reference=lambda x, **_: x, configs=configs,
                         inputs=lambda c: st.just((np.zeros(4, np.float32),)))


def test_a_knob_without_which_the_failure_is_gone_is_needed():
    spec = _spec(st.fixed_dictionaries({"softcap": st.sampled_from([0.0, 30.0]), "window": st.integers(0, 64)}))
    config = {"softcap": 30.0, "window": 40}
    tried = []

    def check(trial, inputs):  # the failure needs a window, not a softcap
        tried.append(dict(trial))
        return [MISMATCH] if trial["window"] > 0 else []

    knobs = knobs_needed(spec, MISMATCH, config, (np.zeros(4, np.float32),), check, budget_s=60)
    assert (knobs.needed, dict(knobs.not_needed), dict(knobs.untried)) == (("window",), {"softcap": 0.0}, {})
    assert tried == [{"softcap": 0.0, "window": 40}, {"softcap": 30.0, "window": 0},  # one knob at a time,
                     {"softcap": 0.0, "window": 40}]  # then those it does not need at once
    assert knobs.simpler is not None and knobs.simpler[1] == {"softcap": 0.0, "window": 40}
    assert "needs window (at their simplest values it passes)" in knobs.line()


def test_knobs_at_their_simplest_values_or_with_no_budget_are_not_tried():
    spec = _spec(st.fixed_dictionaries({"window": st.integers(0, 64)}))
    never = lambda *_: (_ for _ in ()).throw(AssertionError("tried"))  # noqa: E731
    assert knobs_needed(spec, MISMATCH, {"window": 0}, (), never, budget_s=60).line() == ""
    assert knobs_needed(spec, MISMATCH, {"window": 9}, (), never, budget_s=0).line() == ""


def test_a_knob_that_shapes_the_inputs_values_is_not_tried_on_the_old_inputs():
    spec = pv.KernelSpec(name="k", kernel=lambda x, **_: x, reference=lambda x, **_: x,
                         configs=st.fixed_dictionaries({"decay": st.sampled_from([0.0, 0.3])}),
                         inputs=lambda c: st.just((np.full(4, -c["decay"], np.float32),)))
    never = lambda *_: (_ for _ in ()).throw(AssertionError("tried"))  # noqa: E731
    knobs = knobs_needed(spec, MISMATCH, {"decay": 0.3}, (np.full(4, -0.3, np.float32),), never, budget_s=60)
    assert dict(knobs.untried) == {"decay": "it changes the values the inputs are drawn with"}
