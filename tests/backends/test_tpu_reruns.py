"""The rerun table (``backends.tpu_reruns``): what TPU interpret mode's reruns change, need,
and are named by, all read from one entry per rerun."""

from __future__ import annotations

from pallas_verify import _jax_compat
from pallas_verify.backends import tpu_reruns
from pallas_verify.backends.interpreters import TpuInterpret
from pallas_verify.findings import KINDS


def test_each_rerun_is_a_finding_kind_needing_a_kernel_fact():
    assert [e.kind for e in tpu_reruns.RERUNS] == ["uninitialized_read", "dma_ordering", "grid_order", "race"]
    assert all(e.kind in KINDS and e.needs in _jax_compat.KERNEL_FACTS and e.skipped for e in tpu_reruns.RERUNS)
    assert all(bool(e.settled) == (e.settled_by is not None) for e in tpu_reruns.RERUNS)


def test_the_variants_of_a_mode_change_each_rerun_s_knobs_only():
    mode = {"uninitialized_memory": "nan", "dma_execution_mode": "on_wait", "random_seed": 4,
            "num_cores_or_threads": 1, "detect_races": True}
    variants = dict(TpuInterpret().variants(mode))
    assert variants["uninitialized_read"] == {**mode, "detect_races": False, "uninitialized_memory": "zero"}
    assert variants["dma_ordering"] == {**mode, "detect_races": False, "dma_execution_mode": "eager"}
    assert variants["grid_order"] == {**mode, "detect_races": False, "random_seed": 5, "num_cores_or_threads": 2}
    assert variants["race"] == {**mode, "detect_races": True, "num_cores_or_threads": 2, "random_seed": 5}
    on_two = {**mode, "num_cores_or_threads": 2}  # the base run looked for races between cores itself
    assert "race" not in dict(tpu_reruns.variants(on_two))
    for entry in tpu_reruns.RERUNS:  # each changes the knobs its entry names, and no other
        changed = {k for k in set(mode) | set(variants[entry.kind]) if mode.get(k) != variants[entry.kind].get(k)}
        assert changed - {"detect_races"} <= set(entry.knobs), entry.kind


def test_which_reruns_a_kernel_needs_and_which_a_watch_settles():
    facts = frozenset({_jax_compat.PARALLEL_GRID})
    kinds = tpu_reruns.kinds_of(facts)
    assert kinds == {"grid_order", "race"}
    assert tpu_reruns.settle(kinds, None) == (kinds, frozenset())
    assert tpu_reruns.settle(kinds, {"fill": False, "order": False}) == (frozenset(), kinds)
    assert tpu_reruns.settle(kinds, {"fill": True, "order": True}) == (kinds | {"uninitialized_read"}, frozenset())
    assert not tpu_reruns.races_possible(facts, {"num_cores_or_threads": 1})
    assert tpu_reruns.races_possible(facts, {"num_cores_or_threads": 2})
    assert tpu_reruns.races_possible(frozenset({_jax_compat.EXPLICIT_DMA}), {})


def test_a_difference_only_the_knobs_together_show_is_named_by_the_table_not_by_the_list():
    assert tpu_reruns.joint_kind(["grid_order", "dma_ordering", "uninitialized_read"]) == "uninitialized_read"
    assert tpu_reruns.joint_kind(["grid_order", "dma_ordering"]) == "dma_ordering"
    reasons = tpu_reruns.reasons()
    assert reasons["rerun"]["dma_ordering"] == "no explicit DMA (dma_start)"
    assert set(reasons["settled"]) == {"uninitialized_read", "grid_order", "race"}
