"""Run the test suite; pytest's "no tests collected" (exit 5) is a failure, not a pass."""

from __future__ import annotations

import sys

import pytest

NO_TESTS_COLLECTED = 5


def main(argv: list[str]) -> int:
    code = pytest.main(argv)
    if code == NO_TESTS_COLLECTED:
        print("run_suite: pytest collected no tests; that is a failure.", file=sys.stderr)
        return 1
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
