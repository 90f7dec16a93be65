"""Examples drawn from a spec's own strategies, reproducibly, without pallas-verify.

The baselines and the overhead cases need concrete (config, inputs) pairs from a
KernelSpec's strategies. They are drawn by a tiny Hypothesis test: ``@given(st.data())``
with only the ``generate`` phase, no example database, and ``hypothesis.seed(seed)``,
which draws config then inputs exactly as a hand-written property test would. The same
seed gives the same examples in every run. Hypothesis starts its generate phase with the
simplest example, so a draw of N examples holds the minimal config first, then random
ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import hypothesis
import numpy as np
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st

__all__ = ["Example", "draw_examples", "grid_examples", "random_examples"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Example:
    """One config of a spec and inputs for it (numpy arrays)."""

    config: dict[str, Any]
    inputs: tuple[np.ndarray, ...]


def draw_examples(spec: Any, *, count: int, seed: int) -> list[Example]:
    """Up to ``count`` examples of ``spec`` (fewer when its strategies run out of them)."""
    drawn: list[Example] = []

    @hypothesis.settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
                         derandomize=False, suppress_health_check=list(HealthCheck))
    @hypothesis.given(st.data())
    def collect(data: st.DataObject) -> None:
        config = data.draw(spec.configs, label="configs")
        inputs = tuple(np.asarray(x) for x in data.draw(spec.inputs(config), label="inputs"))
        drawn.append(Example(config=config, inputs=inputs))

    hypothesis.seed(seed)(collect)()
    return drawn[:count]


def random_examples(spec: Any, *, seed: int, batch: int = 8) -> Iterator[Example]:
    """An endless stream of examples: batches drawn with seeds ``seed``, ``seed + 1``, ..."""
    for offset in range(10**9):
        yield from draw_examples(spec, count=batch, seed=seed + offset)


def _config_key(config: dict[str, Any]) -> str:
    return repr(sorted(config.items()))


def grid_examples(spec: Any, *, size: int, seed: int, draws: int = 30) -> list[Example]:
    """A fixed grid: the first ``size`` distinct configs of ``draws`` examples, one input each.

    This is what a parametrised test over a hand-picked list of configs runs: each config
    once, with one fixed input. A spec whose configs are fixed has a grid of one.
    """
    grid: dict[str, Example] = {}
    for example in draw_examples(spec, count=draws, seed=seed):
        grid.setdefault(_config_key(example.config), example)
        if len(grid) == size:
            break
    return list(grid.values())
