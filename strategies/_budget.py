"""Drawing one block per dimension from candidate lists, within grid and size budgets.

Valid by construction: a candidate is offered only if the dimensions after it can still
be blocked within what is left of both budgets (an exact search over the candidates no
other candidate beats on both block elements and grid points, memoised per strategy).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from hypothesis import strategies as st

from strategies._ints import cdiv

Block = int | None  # None: a squeezed dimension (a block of one element, dropped)


def points(dim: int, block: Block) -> int:
    """Grid points along one dimension (``pl.cdiv``; a squeezed dim has one per element)."""
    return dim if block is None else cdiv(dim, block)


def elements(block: Block) -> int:
    """Elements of one block along one dimension."""
    return 1 if block is None else block


def _frontier(dim: int, options: Sequence[Block]) -> tuple[Block, ...]:
    """The options no other option beats on both elements and grid points, by elements."""
    frontier: list[Block] = []
    for block in sorted(set(options), key=lambda b: (elements(b), points(dim, b))):
        if not frontier or points(dim, block) < points(dim, frontier[-1]):
            frontier.append(block)
    return tuple(frontier)


class Budget:
    """Candidate blocks per dimension and the budgets every pick must respect."""

    def __init__(
        self,
        shape: Sequence[int],
        options: Sequence[Sequence[Block]],
        max_points: int | None,
        max_elements: int | None,
    ) -> None:
        self.shape = tuple(shape)
        self.options = tuple(tuple(o) for o in options)
        self.frontiers = tuple(
            _frontier(d, o) for d, o in zip(self.shape, self.options, strict=True)
        )
        self.max_points = max_points
        self.max_elements = max_elements
        self.min_points = functools.cache(self._min_points)

    def _min_points(self, start: int, elements_left: int | None) -> int | None:
        """Fewest grid points of any blocking of dims ``start:`` whose blocks hold at most
        ``elements_left`` elements; None if there is none."""
        if start == len(self.shape):
            return 1
        best = None
        for block in self.frontiers[start]:
            if elements_left is not None and elements(block) > elements_left:
                break
            rest_elements = None if elements_left is None else elements_left // elements(block)
            rest = self.min_points(start + 1, rest_elements)
            if rest is not None:
                total = points(self.shape[start], block) * rest
                best = total if best is None else min(best, total)
        return best

    def fits(
        self, index: int, block: Block, points_left: int | None, elements_left: int | None
    ) -> bool:
        """Whether ``block`` at dim ``index`` leaves the remaining dims a valid blocking."""
        if elements_left is not None and elements(block) > elements_left:
            return False
        rest_elements = None if elements_left is None else elements_left // elements(block)
        rest = self.min_points(index + 1, rest_elements)
        if rest is None:
            return False
        return points_left is None or points(self.shape[index], block) * rest <= points_left

    def draw(self, draw: st.DrawFn) -> tuple[Block, ...]:
        """One block per dim, each offered only if the rest can still fit the budgets."""
        points_left, elements_left = self.max_points, self.max_elements
        blocks: list[Block] = []
        for index, options in enumerate(self.options):
            if points_left is None and elements_left is None:
                fitting = list(options)
            else:
                fitting = [b for b in options if self.fits(index, b, points_left, elements_left)]
            block = draw(st.sampled_from(fitting))
            blocks.append(block)
            if points_left is not None:
                points_left //= points(self.shape[index], block)
            if elements_left is not None:
                elements_left //= elements(block)
        return tuple(blocks)


def budgeted_blocks(budget: Budget) -> st.SearchStrategy[tuple[Block, ...]]:
    """Block shapes drawn from ``budget``'s candidates; shrinks to every list's first."""
    return _budgeted_blocks(budget)


@st.composite  # defined once: defining a composite parses its source (a program's draw builds one)
def _budgeted_blocks(draw: st.DrawFn, budget: Budget) -> tuple[Block, ...]:
    return budget.draw(draw)
