"""The error-rate intervals the README publishes: Wilson score intervals at known values."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_module import load  # noqa: E402

_rates = load("rates")
rate, wilson = _rates.rate, _rates.wilson


def test_wilson_matches_known_values():
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 500) == pytest.approx((0.0, 0.007624), abs=1e-6)  # zero errors still has an upper bound


def test_rate_rejects_impossible_counts():
    assert rate(3, 1000)["rate"] == 0.003
    with pytest.raises(ValueError):
        wilson(4, 3)
    with pytest.raises(ValueError):
        wilson(0, 0)
