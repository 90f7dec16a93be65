"""A campaign's time budget, written as ``"90s"``, ``"30m"``, ``"1h30m"`` or seconds."""

from __future__ import annotations

import re

from pallas_verify.errors import InvalidArgument

__all__ = ["parse_budget"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_budget(text: str) -> float:
    """Seconds in ``"90s"``, ``"30m"``, ``"1h30m"`` or a bare number of seconds."""
    parts = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)\s*([smh])\s*)+", text or "")
    if re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", text or ""):
        seconds = float(text)
    elif parts:
        seconds = sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)\s*([smh])", text))
    else:
        raise InvalidArgument(f"budget={text!r} is not a duration; write e.g. 90s, 30m or 1h30m.")
    if seconds <= 0:
        raise InvalidArgument(f"budget={text!r} must be more than zero seconds.")
    return seconds
