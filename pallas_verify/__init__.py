"""pallas-verify: property-based testing and differential verification of Pallas kernels."""

from pallas_verify.errors import InvalidArgument as InvalidArgument
from pallas_verify.errors import InvalidSpec as InvalidSpec
from pallas_verify.errors import PallasVerifyError as PallasVerifyError
from pallas_verify.spec import KernelSpec as KernelSpec
from pallas_verify.spec import Tolerance as Tolerance

__all__ = ["InvalidArgument", "InvalidSpec", "KernelSpec", "PallasVerifyError", "Tolerance"]
