"""A mismatch drawn: element cells colored by error in bounds, the block grid, the bad
blocks blame names with their writers; the same picture as a PNG beside the reproducer."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from pallas_verify.findings import Finding
from pallas_verify.oracles.elements import element_evidence
from pallas_verify.reports.html import html_page
from pallas_verify.reports.picture import color, pictures, png, svg
from pallas_verify.reports.report import Report
from pallas_verify.reports.reproducer import write_pictures
from pallas_verify.spec import Tolerance
from pallas_verify.tolerance import compare


def _finding() -> Finding:
    expected = np.zeros((16, 64), np.float32)
    actual = expected.copy()
    actual[8:16, 32:64] = 0.5  # block (1, 1) of 8 x 32 blocks: 50 bounds off
    actual[0, 0] = np.nan
    tolerance = Tolerance(atol=0.01, rtol=0.0)
    elements = element_evidence(compare("out[0]", actual, expected, tolerance), actual, expected, None, tolerance)
    blame = {"output": 0, "block_shape": [8, 32], "block_errors": [[np.inf, 0.0], [0.0, 0.5]],
             "writers": [[[0, 0], [[0, 0]]], [[1, 1], [[1, 1], [3, 1]]]]}
    return Finding(kind="mismatch", kernel="k", backend="interpret", message="outputs differ",
                   evidence={"elements": [elements], "blame": blame})


def _pixels(data: bytes) -> np.ndarray:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat = data.index(b"IDAT")
    (length,) = struct.unpack(">I", data[idat - 4:idat])
    raw = np.frombuffer(zlib.decompress(data[idat + 4:idat + 4 + length]), np.uint8).reshape(height, 1 + width * 3)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(height, width, 3)


def test_the_picture_reads_the_evidence_with_blame_grid_and_writers():
    [p] = pictures(_finding().evidence)
    assert p.errors.shape == (16, 64) and p.pool == (1, 1) and p.block == (8, 32)
    assert np.isnan(p.errors[0, 0]) and p.errors[8, 40] == 50.0 and p.errors[0, 40] == 0.0
    assert [w[0] for w in p.writers] == [(0, 0), (1, 1)]


def test_the_svg_has_a_cell_per_element_block_lines_and_the_bad_blocks_with_their_writers():
    drawn = svg(pictures(_finding().evidence)[0])
    assert drawn.count('<rect x=') == 16 * 64 + 2  # the cells, then the two bad blocks outlined
    assert drawn.count('class="grid"') == 1 + 1  # one row boundary, one column boundary
    assert "block (1, 1) written by grid point(s) (1, 1), (3, 1)" in drawn
    assert "NaN/inf where the reference disagrees" in drawn
    assert "50 x the bound" in drawn


def test_colors_say_exact_within_over_and_nonfinite():
    assert color(0.0) == (244, 246, 248)
    assert color(0.5)[0] == 255 and color(0.5) != color(1.0)
    assert color(1000.0) == color(1e9) != color(10.0)
    assert color(float("nan")) == (110, 40, 170)


def test_the_png_is_the_same_picture_written_beside_the_reproducer(tmp_path):
    finding = _finding()
    [path] = write_pictures(finding, tmp_path / "k-mismatch-interpret")
    assert path == str(tmp_path / "k-mismatch-interpret.png")
    data = Path(path).read_bytes()
    assert data == png(pictures(finding.evidence)[0])
    pixels = _pixels(data)
    assert pixels.shape == (16 * 8, 64 * 8, 3)
    assert tuple(pixels[3, 3]) == (110, 40, 170)  # the NaN
    assert tuple(pixels[12 * 8 + 3, 50 * 8 + 3]) == color(50.0)  # inside the bad block
    assert tuple(pixels[3, 50 * 8 + 3]) == color(0.0)
    assert tuple(pixels[8 * 8, 2]) == (0, 0, 0)  # the block row boundary (dashed)
    assert tuple(pixels[8 * 8 + 4, 32 * 8]) == (0, 0, 0)  # the bad block's outline


def test_the_page_draws_each_bad_output_instead_of_the_blame_map():
    finding = _finding()
    page = html_page(Report(kernels=[{"name": "k"}], backends=["interpret"], findings=[finding]))
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="elements"') == 1
    assert 'class="heatmap"' not in page
    assert "<th>float64</th>" in page and "<td>(8, 32)</td>" in page  # a worst element
