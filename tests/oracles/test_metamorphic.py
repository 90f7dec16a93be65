"""The metamorphic oracle: a case rerun with interpreter knobs changed must give the
same bits; a value within any tolerance but other bits is a finding."""

from __future__ import annotations

import dataclasses

import numpy as np

from pallas_verify.case import ErrorInfo, Outcome
from pallas_verify.oracles.metamorphic import knob_changes, metamorphic_finding
from tests.oracles._crafted import CASE, PATHS, X

VARIANT = dataclasses.replace(CASE, mode={"dma_execution_mode": "on_wait"})


def test_a_variant_that_reproduces_the_bits_is_no_finding():
    base = Outcome(outputs=(X.copy(),))
    assert metamorphic_finding(CASE, "dma_ordering", base, VARIANT, base, PATHS) is None


def test_a_variant_with_other_bits_is_a_finding_naming_the_knob_and_the_first_difference():
    changed = X.copy()
    changed[5] = np.nextafter(changed[5], np.float32(100))  # one ULP: within any tolerance, not bitwise
    f = metamorphic_finding(CASE, "dma_ordering", Outcome(outputs=(X,)), VARIANT,
                            Outcome(outputs=(changed,)), PATHS)
    assert f is not None and f.kind == "dma_ordering"
    assert "dma_execution_mode changes from 'eager' to 'on_wait'" in f.message
    assert f.evidence["outputs"] == ["out: 1/8 elements differ, first at (5,)"]
    assert f.evidence["variant_mode"] == {"dma_execution_mode": "on_wait"}


def test_a_variant_that_fails_where_the_base_ran_is_a_finding():
    error = ErrorInfo(type="ValueError", message="semaphore wait never signalled")
    f = metamorphic_finding(CASE, "dma_ordering", Outcome(outputs=(X,)), VARIANT,
                            Outcome(error=error), PATHS)
    assert f is not None
    assert "the kernel fails: ValueError: semaphore wait never signalled" in f.message


def test_a_variant_is_not_judged_when_the_base_failed_too():
    error = Outcome(error=ErrorInfo(type="ValueError", message="boom"))
    assert metamorphic_finding(CASE, "dma_ordering", error, VARIANT, error, PATHS) is None


def test_every_changed_knob_is_named_but_race_detection():
    assert knob_changes({"detect_races": True, "random_seed": 3}, {"detect_races": False, "random_seed": 4}) == (
        "random_seed changes from 3 to 4")
    both = knob_changes({"random_seed": 3, "num_cores_or_threads": 1, "uninitialized_memory": "nan"},
                        {"random_seed": 4, "num_cores_or_threads": 2, "uninitialized_memory": "zero"})
    assert both == "num_cores_or_threads (1 to 2), random_seed (3 to 4) and uninitialized_memory ('nan' to 'zero') change"
