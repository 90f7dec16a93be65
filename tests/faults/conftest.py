"""The fault suite stages each fault of a nightly campaign with benchmarks.faultcases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def staged(tmp_path: Path) -> Callable[..., object]:
    """Stage a fault (a ``faultcases`` function); skip, saying why, where this machine
    cannot stage it; fail with the evidence when the campaign did not survive it."""
    from benchmarks.faultkit import Unavailable

    def stage(case: Callable[..., object], **options: object) -> object:
        try:
            outcome = case(tmp_path, **options)
        except Unavailable as exc:
            pytest.skip(str(exc))
        assert outcome.survived(), outcome.describe()  # type: ignore[attr-defined]
        return outcome

    return stage
