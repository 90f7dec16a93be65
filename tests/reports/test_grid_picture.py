"""A static finding drawn: the grid with the grid points it names, the operand's blocks with
the block it names (beyond them when out of bounds), as SVG and as a PNG beside the
reproducer; from the static check's own evidence."""

from __future__ import annotations

import re
import struct

import pytest

from pallas_verify.oracles.static import static_result
from pallas_verify.reports.grid_picture import (
    MAX_SIDE,
    grid_caption,
    grid_picture,
    grid_png,
    grid_svg,
)
from pallas_verify.reports.reproducer import write_pictures
from tests.grid.test_gridcheck import X32, copy_call


def _static(**config):
    """The static check's findings of a block copy with ``config`` (grid, index maps, semantics)."""
    from pallas_verify.grid.check import check_grid

    return static_result("copy", config, check_grid(copy_call, (X32,), config)).findings


def _marked(panel) -> list[tuple[int, int]]:
    return sorted(map(tuple, zip(*(panel.codes == 2).nonzero(), strict=True)))


def test_a_race_marks_the_grid_points_that_write_one_block_and_that_block():
    [race] = _static(grid=(4, 2), out_map=lambda i, j: (i, 0), in_map=lambda i, j: (i, 0),
                     semantics=("parallel", "parallel"))
    assert race.evidence["grid"] == (4, 2) and race.evidence["block_counts"] == (4, 1)
    assert race.evidence["semantics"] == ("parallel", "parallel")
    picture = grid_picture(race.evidence)
    points, blocks = picture.panels
    assert _marked(points) == [(0, 0), (0, 1)]  # (0, j) for j in 0..1
    assert points.codes.shape == (4, 2) and "(i parallel, j parallel)" in points.title
    assert _marked(blocks) == [(0, 0)] and blocks.codes.shape == (4, 1)
    svg = grid_svg(picture)
    assert svg.count('class="c2"') == 3
    assert "<title>grid point (0, 1)</title>" in svg and "<title>block (0, 0) of output 0</title>" in svg


def test_an_out_of_bounds_block_is_drawn_beyond_the_arrays_blocks():
    [oob] = _static(grid=(4,), out_map=lambda i: (i, 0), in_map=lambda i: (i + 1, 0))
    picture = grid_picture(oob.evidence)
    assert picture.outside and oob.evidence["block"] == (4, 0)
    points, blocks = picture.panels
    assert _marked(points) == [(0, 3)]  # the grid point whose index_map gives block (4, 0)
    assert blocks.codes.tolist() == [[1], [1], [1], [1], [2]]  # four blocks, then the one beyond
    assert "white: beyond the array's blocks" in grid_caption(picture)


def test_the_png_is_the_panels_side_by_side(tmp_path):
    [race] = _static(grid=(4, 2), out_map=lambda i, j: (i, 0), in_map=lambda i, j: (i, 0),
                     semantics=("parallel", "parallel"))
    data = grid_png(grid_picture(race.evidence))
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (2 * 8 + 16 + 1 * 8, 4 * 8)
    [written] = write_pictures(race, tmp_path / "copy-race-static")
    assert written == str(tmp_path / "copy-race-static.png")
    assert (tmp_path / "copy-race-static.png").read_bytes() == data


def test_a_large_grid_is_pooled_and_a_higher_rank_one_has_its_leading_dimensions_as_rows():
    big = grid_picture({"grid": [1000], "grid_points": [[999]], "operand": "output 0"})
    [panel] = big.panels
    assert panel.codes.shape == (1, 1000 // 21 + 1) and panel.pool == (1, 21)
    assert max(panel.codes.shape) <= MAX_SIDE and _marked(panel) == [(0, 47)]
    deep = grid_picture({"grid": [2, 3, 4], "grid_points": [[1, 2, 3]], "block": [-1, 0, 5],
                         "block_counts": [2, 1, 4], "operand": "input 0"})
    points, blocks = deep.panels
    assert points.codes.shape == (6, 4) and _marked(points) == [(5, 3)]
    assert blocks.codes.shape == (3, 6) and _marked(blocks) == [(0, 5)]  # block -1 of dim 0, block 5 of dim 2


@pytest.mark.parametrize("evidence", [
    {},
    {"grid": [4]},  # nothing named on it
    {"grid": "4", "grid_points": [[1]]},
    {"grid": [0], "grid_points": [[0]]},
    {"grid": [4], "grid_points": [[9], [True]], "block": [1], "block_counts": "4"},
    {"grid": [4], "block": [1, 2], "block_counts": [4]},
])
def test_evidence_that_says_too_little_is_not_drawn(evidence):
    assert grid_picture(evidence) is None


def test_the_html_page_draws_a_static_finding_next_to_its_source(tmp_path):
    from pallas_verify.reports.html import html_page
    from pallas_verify.reports.report import Report

    [race] = _static(grid=(4, 2), out_map=lambda i, j: (i, 0), in_map=lambda i, j: (i, 0),
                     semantics=("parallel", "parallel"))
    page = html_page(Report(findings=[race]))
    section = page.split('<section class="finding"')[1]
    assert re.search(r"<h3>grid and blocks of _copy_kernel</h3><svg [^>]*class=\"grid-picture\"", section)
