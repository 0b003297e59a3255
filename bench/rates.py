"""Error rates with 95% intervals, for the README's table of published error rates.

A rate measured on n cases is quoted with its Wilson score interval, which stays inside [0, 1] and
is honest at 0 errors (0 of 500 is not "0%": the interval reaches 0.76%).
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054


def wilson(errors: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for `errors` out of `n` cases."""
    if n <= 0:
        raise ValueError("a rate needs at least one case")
    if not 0 <= errors <= n:
        raise ValueError(f"errors must be within 0..{n}, got {errors}")
    p = errors / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(errors: int, n: int) -> dict:
    """A rate and its interval as a RESULT field: {"errors", "n", "rate", "low", "high"}."""
    low, high = wilson(errors, n)
    return {"errors": errors, "n": n, "rate": round(errors / n, 6), "low": round(low, 6), "high": round(high, 6)}
