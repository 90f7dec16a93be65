"""The exceptions the strategies raise on a bad argument: one root, builtin leaves."""

from __future__ import annotations

__all__ = ["InvalidStrategyType", "InvalidStrategyValue", "StrategyError"]


class StrategyError(Exception):
    """Root of every error the strategies package raises on purpose."""


class InvalidStrategyValue(StrategyError, ValueError):
    """An argument of a strategy function has a value outside its valid range or choices."""


class InvalidStrategyType(StrategyError, TypeError):
    """An argument of a strategy function has the wrong type."""
