"""Tests for course_lib.measure: timing, power-law fits, multiply counts."""

import math

import numpy as np
import pytest
import torch

from course_lib.measure import fit_power_law, macs_linear, macs_softmax, time_call


class TestFitPowerLaw:
    @pytest.mark.parametrize("exponent", [-1.5, 0.5, 1.0, 2.0, 3.0], ids=lambda a: f"a={a}")
    def test_recovers_exact_power_law(self, exponent):
        x = np.array([256, 512, 1024, 2048, 4096], dtype=np.float64)
        y = 3.7 * x**exponent
        a, c = fit_power_law(x, y)
        assert a == pytest.approx(exponent, abs=1e-12), f"fitted exponent {a}, expected {exponent}"
        assert c == pytest.approx(3.7, rel=1e-9), f"fitted prefactor {c}, expected 3.7"

    def test_least_squares_on_noisy_data(self):
        x = np.array([1.0, 2.0, 4.0, 8.0])
        y = 5 * x**2 * np.array([1.3, 0.8, 1.2, 0.9])
        a, c = fit_power_law(x, y)
        residuals = np.log(y) - (a * np.log(x) + np.log(c))
        # normal equations of least squares: residuals sum to 0 and are orthogonal to log x
        assert residuals.sum() == pytest.approx(0.0, abs=1e-12)
        assert residuals @ np.log(x) == pytest.approx(0.0, abs=1e-12)
        assert 1.7 < a < 2.3

    def test_accepts_lists_and_tensors(self):
        a_list, _ = fit_power_law([1, 2, 4], [1, 4, 16])
        a_tensor, _ = fit_power_law(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, 4.0, 16.0]))
        assert a_list == pytest.approx(2.0, abs=1e-12)
        assert a_tensor == pytest.approx(2.0, abs=1e-12)

    @pytest.mark.parametrize(
        ("x", "y", "message"),
        [
            ([1, 2, 3], [1, 2], "same length"),
            ([1], [1], "at least 2"),
            ([0, 1, 2], [1, 2, 3], "x must hold finite values > 0"),
            ([1, 2, 3], [1, -2, 3], "y must hold finite values > 0"),
            ([1, 2, math.nan], [1, 2, 3], "x must hold finite values > 0"),
            ([1, 2, 3], [1, math.inf, 3], "y must hold finite values > 0"),
            ([[1, 2], [3, 4]], [1, 2], "x must be one-dimensional"),
            ([2, 2, 2], [1, 2, 3], "two distinct"),
        ],
        ids=["length-mismatch", "one-point", "x-zero", "y-negative", "x-nan", "y-inf", "x-2d", "x-constant"],
    )
    def test_rejects_bad_input(self, x, y, message):
        with pytest.raises(ValueError, match=message):
            fit_power_law(x, y)


class TestTimeCall:
    def test_orders_cheap_and_expensive_calls(self):
        g = torch.Generator().manual_seed(0)
        small = torch.randn(8, 8, generator=g)
        large = torch.randn(384, 384, generator=g)  # ~ 384³ / 8³ = 10⁵ times the multiply-adds
        cheap = time_call(lambda: small @ small, min_run_time=0.05)
        expensive = time_call(lambda: large @ large, min_run_time=0.05)
        assert isinstance(cheap, float) and cheap > 0
        assert expensive > 50 * cheap, f"expected ≥ 50× gap, got {expensive:.2e}s vs {cheap:.2e}s"

    def test_runs_with_all_threads(self):
        before = torch.get_num_threads()
        torch.set_num_threads(2)  # torch's Timer would silently use 1
        seen = []
        try:
            time_call(lambda: seen.append(torch.get_num_threads()), min_run_time=0.01)
        finally:
            torch.set_num_threads(before)
        assert seen and set(seen) == {2}, f"fn ran with thread counts {set(seen)}, expected {{2}}"

    @pytest.mark.parametrize("min_run_time", [0, -1.0, math.inf, math.nan, True, "0.2"])
    def test_rejects_bad_min_run_time(self, min_run_time):
        with pytest.raises(ValueError, match="min_run_time must be a positive number"):
            time_call(lambda: None, min_run_time=min_run_time)

    def test_rejects_non_callable(self):
        with pytest.raises(TypeError, match="fn must be callable"):
            time_call(42)


class TestMultiplyCounts:
    def test_softmax_by_hand(self):
        # scores 3·5·4 = 60, weights @ v 3·5·2 = 30
        assert macs_softmax(3, 5, 4, 2) == 90

    def test_linear_by_hand(self):
        # S = φ(K)ᵀV 5·4·2 = 40, φ(Q)S 3·4·2 = 24
        assert macs_linear(3, 5, 4, 2) == 64

    @pytest.mark.parametrize("n", [64, 1000, 4096])
    def test_self_attention_matches_article(self, n):
        d = 64
        assert macs_softmax(n, n, d, d) == 2 * n**2 * d
        assert macs_linear(n, n, d, d) == 2 * n * d**2
        assert macs_softmax(n, n, d, d) / macs_linear(n, n, d, d) == pytest.approx(n / d, rel=1e-15)

    @pytest.mark.parametrize("bad", [0, -3, 2.5, True, None], ids=repr)
    def test_rejects_non_positive_sizes(self, bad):
        with pytest.raises(ValueError, match="m must be a positive int"):
            macs_softmax(4, bad, 4, 4)
        with pytest.raises(ValueError, match="f must be a positive int"):
            macs_linear(4, 4, bad, 4)
