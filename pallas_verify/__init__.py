"""pallas-verify: property-based testing and differential verification of Pallas kernels."""

from pallas_verify.engine import verify as verify
from pallas_verify.errors import InvalidArgument as InvalidArgument
from pallas_verify.errors import InvalidSpec as InvalidSpec
from pallas_verify.errors import PallasVerifyError as PallasVerifyError
from pallas_verify.findings import FINDING_KINDS as FINDING_KINDS
from pallas_verify.findings import Finding as Finding
from pallas_verify.plugin import kernel_test as kernel_test
from pallas_verify.report import Report as Report
from pallas_verify.spec import KernelSpec as KernelSpec
from pallas_verify.spec import Tolerance as Tolerance

__all__ = [
    "FINDING_KINDS",
    "Finding",
    "InvalidArgument",
    "InvalidSpec",
    "KernelSpec",
    "PallasVerifyError",
    "Report",
    "Tolerance",
    "kernel_test",
    "verify",
]
