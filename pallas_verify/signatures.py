"""When a search should stop early: every example it ran failed with one signature.

A backend that fails every config the same way (an exception JAX raises whatever the
inputs, a compiler that refuses the kernel) gains nothing from more examples or from
shrinking: each would repeat the failure. ``SameSignature`` watches a search's examples
and says when to stop, and the reason the cell then carries.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Sequence

from pallas_verify.findings import Finding

__all__ = ["SAME_SIGNATURE_STOP", "SameSignature", "signature"]

#: Examples, all failing with one signature, after which a search stops.
SAME_SIGNATURE_STOP = 3
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def signature(finding: Finding, kinds: Collection[str]) -> tuple[str, str] | None:
    """A failure's signature: its kind and the first line of its message with numbers
    blanked (shapes, addresses), for a kind in ``kinds``; None for the others."""
    if finding.kind not in kinds:
        return None
    first = (finding.message.strip().splitlines() or [""])[0]
    return finding.kind, _NUMBERS.sub("#", first)


@dataclasses.dataclass
class SameSignature:
    """Whether every example of a search failed with one signature of ``kinds`` (those
    whose evidence does not depend on the input values); ``stopped`` says so once
    ``SAME_SIGNATURE_STOP`` have."""

    kinds: Collection[str]
    signature: tuple[str, str] | None = None
    first: str = ""  # the first failure's own message line (the signature is only its key)
    count: int = 0
    mixed: bool = False  # an example passed, or failed another way
    stopped: str | None = None

    def step(self, findings: Sequence[Finding]) -> bool:
        """Record one example's findings; True when the search should stop now."""
        if self.mixed or self.stopped:
            return False
        found = signature(findings[0], self.kinds) if findings else None
        if found is None or self.signature not in (None, found):
            self.mixed = True
            return False
        if self.signature is None:
            self.first = (findings[0].message.strip().splitlines() or [""])[0]
        self.signature, self.count = found, self.count + 1
        if self.count < SAME_SIGNATURE_STOP:
            return False
        self.stopped = (f"stopped early: all {self.count} examples run failed with the same signature "
                        f"({found[0]}: {self.first[:160]}); more examples and shrinking would only repeat it")
        return True
