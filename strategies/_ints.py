"""Integer helpers: ceiling division, the next power of two, primes."""

from __future__ import annotations

import functools


def cdiv(a: int, b: int) -> int:
    """Ceiling of ``a / b`` for positive ints (what ``pl.cdiv`` computes)."""
    return -(-a // b)


def next_pow2(a: int) -> int:
    """The smallest power of two >= ``a`` (``a`` >= 1)."""
    return 1 << (a - 1).bit_length()


@functools.cache
def primes_up_to(limit: int) -> tuple[int, ...]:
    """All primes <= ``limit``, ascending (sieve of Eratosthenes)."""
    if limit < 2:
        return ()
    sieve = bytearray([1]) * (limit + 1)
    sieve[0:2] = b"\x00\x00"
    for p in range(2, int(limit**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytearray(len(range(p * p, limit + 1, p)))
    return tuple(i for i, flag in enumerate(sieve) if flag)
