"""The output folder is checked before any work."""

from __future__ import annotations

import pytest

from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.outdir import writable_dir


def test_a_missing_folder_is_created(tmp_path):
    assert writable_dir(tmp_path / "a" / "b").is_dir()


def test_a_file_is_refused(tmp_path):
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(InvalidArgument, match=r"--out '.*f' is not a folder"):
        writable_dir(f)


def test_dev_null_is_refused():
    with pytest.raises(InvalidArgument, match="/dev/null"):
        writable_dir("/dev/null")
