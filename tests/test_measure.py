"""Tests for course_lib.measure: timing, power-law fits, relative errors, error bars."""

import math
import os

import numpy as np
import pytest
import torch

from course_lib.measure import (
    fit_power_law,
    mean_and_error_bar,
    relative_error,
    time_call,
    time_in_fresh_processes,
    within_error_bar,
)


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


class TestTimeInFreshProcesses:
    def test_each_process_is_fresh_and_times_every_statement(self, tmp_path):
        pids = tmp_path / "pids.txt"
        setup = f"import os, time\nopen({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')"
        times = time_in_fresh_processes(
            setup, {"nap": "time.sleep(0.002)", "noop": "None"}, processes=2, repeats=2,
            min_run_time=0.01,
        )
        seen = pids.read_text().split()
        assert len(seen) == 2 and len(set(seen)) == 2, f"expected 2 distinct processes, got {seen}"
        assert str(os.getpid()) not in seen, "a statement ran in the calling process"
        assert set(times) == {"nap", "noop"}
        for name, per_process in times.items():
            assert len(per_process) == 2 and all(len(r) == 2 for r in per_process), (name, per_process)
        naps = [t for r in times["nap"] for t in r]
        assert all(0.002 <= t < 0.2 for t in naps), f"time.sleep(0.002) timed as {naps}"
        assert max(t for r in times["noop"] for t in r) < 0.002, "a no-op timed above 2 ms"

    def test_a_failing_child_raises_with_its_error(self):
        with pytest.raises(RuntimeError, match=r"(?s)process 1 of 1 failed.*NameError"):
            time_in_fresh_processes("x = 1", {"bad": "undefined_name"}, processes=1, repeats=1)

    @pytest.mark.parametrize(
        ("kwargs", "error", "message"),
        [
            ({"setup": 1, "statements": {"a": "1"}}, TypeError, "setup must be Python source"),
            ({"setup": "", "statements": {}}, ValueError, "non-empty mapping"),
            ({"setup": "", "statements": {"a": ""}}, ValueError, "expressions"),
            ({"setup": "", "statements": {"a": "1"}, "processes": 0}, ValueError, "processes"),
            ({"setup": "", "statements": {"a": "1"}, "timeout": -1}, ValueError, "timeout"),
        ],
        ids=["setup-not-str", "no-statements", "empty-statement", "zero-processes", "negative-timeout"],
    )
    def test_rejects_bad_arguments(self, kwargs, error, message):
        with pytest.raises(error, match=message):
            time_in_fresh_processes(**kwargs)


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
        with pytest.raises(ValueError, match="min_run_time must be a finite number of seconds > 0"):
            time_call(lambda: None, min_run_time=min_run_time)

    def test_rejects_non_callable(self):
        with pytest.raises(TypeError, match="fn must be callable"):
            time_call(42)


class TestRelativeError:
    def test_by_hand(self):
        expected = torch.tensor([[3.0, 0.0], [0.0, 4.0]])  # norm 5
        actual = expected + torch.tensor([[0.0, 1.0], [0.0, 0.0]])  # off by norm 1
        assert relative_error(actual, expected) == pytest.approx(0.2, rel=1e-7)
        assert relative_error(expected, expected) == 0.0

    def test_is_relative_to_expected_not_symmetric(self):
        expected, actual = torch.tensor([1.0, 0.0]), torch.tensor([3.0, 0.0])
        assert relative_error(actual, expected) == pytest.approx(2.0)
        assert relative_error(expected, actual) == pytest.approx(2 / 3)

    def test_scale_free(self):
        g = torch.Generator().manual_seed(0)
        expected = torch.randn(4, 5, generator=g, dtype=torch.float64)
        actual = expected + 0.1 * torch.randn(4, 5, generator=g, dtype=torch.float64)
        scaled = relative_error(1e6 * actual, 1e6 * expected)
        assert scaled == pytest.approx(relative_error(actual, expected), rel=1e-12)

    def test_rejects_bad_input(self):
        with pytest.raises(ValueError, match=r"same shape, got \(2, 3\) and \(3, 2\)"):
            relative_error(torch.ones(2, 3), torch.ones(3, 2))
        with pytest.raises(ValueError, match="expected must have a finite, nonzero norm"):
            relative_error(torch.ones(3), torch.zeros(3))
        with pytest.raises(ValueError, match="expected must have a finite, nonzero norm"):
            relative_error(torch.ones(3), torch.tensor([1.0, math.inf, 0.0]))
        with pytest.raises(TypeError, match="actual must be a torch.Tensor"):
            relative_error([1.0, 2.0], torch.ones(2))


class TestErrorBars:
    def test_mean_and_error_bar_by_hand(self):
        samples = torch.tensor([[1.0, 2.0, 3.0, 6.0], [5.0, 5.0, 5.0, 5.0]], dtype=torch.float64)
        mean, error_bar = mean_and_error_bar(samples)
        # row 0: mean 3, sample variance (4 + 1 + 0 + 9)/3 = 14/3, standard error sqrt(14/3)/2
        assert torch.allclose(mean, torch.tensor([3.0, 5.0], dtype=torch.float64), rtol=0, atol=1e-15)
        expected_error_bar = torch.tensor([math.sqrt(14 / 3) / 2, 0.0], dtype=torch.float64)
        assert torch.allclose(error_bar, expected_error_bar, rtol=1e-15, atol=0)

    def test_error_bar_shrinks_like_one_over_sqrt_of_samples(self):
        g = torch.Generator().manual_seed(1)
        _, small = mean_and_error_bar(torch.randn(40_000, generator=g, dtype=torch.float64))
        _, large = mean_and_error_bar(torch.randn(640_000, generator=g, dtype=torch.float64))
        assert small.item() == pytest.approx(1 / 200, rel=0.02)
        assert (small / large).item() == pytest.approx(4.0, rel=0.03)

    def test_covers_the_truth_about_as_often_as_the_clt_says(self):
        # 2000 experiments of 50 exponential samples (mean 1): |mean - 1| <= 2 error bars in ~95% of them
        g = torch.Generator().manual_seed(2)
        samples = -torch.rand(2000, 50, generator=g, dtype=torch.float64).log()  # [2000, 50], Exp(1)
        mean, error_bar = mean_and_error_bar(samples)  # [2000] each
        coverage = within_error_bar(mean, error_bar, 1.0, num_standard_errors=2).double().mean().item()
        assert 0.92 < coverage < 0.97, f"2-standard-error coverage {coverage:.3f}, expected about 0.95"
        # 4 by default; skewed samples, so not the Gaussian 0.99994
        assert within_error_bar(mean, error_bar, 1.0).double().mean().item() >= 0.995

    def test_within_error_bar_by_hand(self):
        mean, error_bar = torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.1, 0.1, 0.0])
        assert within_error_bar(mean, error_bar, torch.tensor([1.4, 1.41, 1.0])).tolist() == [True, False, True]
        assert within_error_bar(mean, error_bar, 1.25, num_standard_errors=2).tolist() == [False, False, False]
        assert within_error_bar(mean, error_bar, 1.25, num_standard_errors=3).tolist() == [True, True, False]

    @pytest.mark.parametrize(
        ("samples", "error", "message"),
        [
            (torch.ones(3, 1), ValueError, "at least 2 samples"),
            (torch.ones(4, dtype=torch.int64), ValueError, "floating-point tensor"),
            (torch.tensor(1.0), ValueError, "floating-point tensor"),
            ([1.0, 2.0], TypeError, "samples must be a torch.Tensor"),
        ],
        ids=["one-sample", "integers", "scalar", "list"],
    )
    def test_mean_and_error_bar_rejects_bad_samples(self, samples, error, message):
        with pytest.raises(error, match=message):
            mean_and_error_bar(samples)

    @pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True], ids=repr)
    def test_within_error_bar_rejects_bad_width(self, bad):
        with pytest.raises(ValueError, match="num_standard_errors must be a finite number > 0"):
            within_error_bar(torch.zeros(2), torch.ones(2), 0.0, num_standard_errors=bad)

    def test_within_error_bar_rejects_negative_error_bars(self):
        with pytest.raises(ValueError, match="error_bar must be >= 0"):
            within_error_bar(torch.zeros(2), torch.tensor([0.1, -0.1]), 0.0)


# --- notebook 06's Monte Carlo harness --------------------------------------------------------

from course_lib.measure import (  # noqa: E402
    kernel_estimates,
    normalised_output_estimates,
    pairs_with_angle,
    simulate_kernel_estimates,
    taster_sets,
)
from course_lib.random_features import positive_random_features, trig_random_features  # noqa: E402


class TestMonteCarloHarness:
    def test_pairs_have_the_asked_norms_and_angles(self):
        x, y = pairs_with_angle([0.7, 1.2], [0.5, 0.9], [0.3, 2.0], 8, generator=torch.Generator().manual_seed(0))
        assert x.shape == y.shape == (2, 8) and x.dtype == torch.float64
        angles = torch.arccos((x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1)))
        torch.testing.assert_close(x.norm(dim=-1), torch.tensor([0.7, 1.2], dtype=torch.float64))
        torch.testing.assert_close(y.norm(dim=-1), torch.tensor([0.5, 0.9], dtype=torch.float64))
        torch.testing.assert_close(angles, torch.tensor([0.3, 2.0], dtype=torch.float64))

    def test_stacked_sets_equal_sets_one_by_one(self):
        g = torch.Generator().manual_seed(1)
        x, y = pairs_with_angle([0.4, 0.8], [0.6, 0.3], [1.0, 2.5], 5, generator=g)
        omega = taster_sets(3, 4, 5, generator=g)  # [12, 5]
        for features in (positive_random_features, trig_random_features):
            stacked = kernel_estimates(features, x, y, omega, redraws=3)  # [2, 3]
            one_by_one = torch.stack([(features(x, s) * features(y, s)).sum(-1) for s in omega.split(4)], -1)
            torch.testing.assert_close(stacked, one_by_one, rtol=1e-12, atol=0)

    def test_orthogonal_sets_are_orthogonal_within_a_set(self):
        omega = taster_sets(5, 3, 4, kind="orthogonal", generator=torch.Generator().manual_seed(2))
        gram = omega.unflatten(0, (5, 3)) @ omega.unflatten(0, (5, 3)).transpose(-2, -1)  # [5, 3, 3]
        off_diagonal = gram - torch.diag_embed(torch.diagonal(gram, dim1=-2, dim2=-1))
        assert off_diagonal.abs().max() < 1e-12

    def test_simulation_is_unbiased_and_chunking_does_not_matter(self):
        x, y = pairs_with_angle(0.5, 0.5, 1.0, 4, generator=torch.Generator().manual_seed(3))
        small = simulate_kernel_estimates(positive_random_features, x, y, 8, 20_000,
                                          generator=torch.Generator().manual_seed(4), rows_per_chunk=1000)
        large = simulate_kernel_estimates(positive_random_features, x, y, 8, 20_000,
                                          generator=torch.Generator().manual_seed(4))
        torch.testing.assert_close(small, large, rtol=1e-12, atol=0)
        assert within_error_bar(*mean_and_error_bar(small), torch.exp((x * y).sum(-1))).all()

    def test_normalised_output_matches_linear_attention_form(self):
        g = torch.Generator().manual_seed(5)
        query, keys = 0.3 * torch.randn(4, generator=g, dtype=torch.float64), 0.3 * torch.randn(6, 4, generator=g, dtype=torch.float64)
        values = torch.randn(6, 3, generator=g, dtype=torch.float64)
        outs = normalised_output_estimates(positive_random_features, query, keys, values, 5, 2,
                                           generator=torch.Generator().manual_seed(6))  # [2, 3]
        omega = taster_sets(2, 5, 4, generator=torch.Generator().manual_seed(6))
        for s, set_omega in enumerate(omega.split(5)):
            weights = positive_random_features(keys, set_omega) @ positive_random_features(query[None], set_omega)[0]
            torch.testing.assert_close(outs[s], weights @ values / weights.sum(), rtol=1e-12, atol=0)

    def test_normalised_output_is_differentiable(self):
        g = torch.Generator().manual_seed(7)
        keys = (0.3 * torch.randn(5, 4, generator=g, dtype=torch.float64)).requires_grad_()
        outs = normalised_output_estimates(positive_random_features, torch.zeros(4, dtype=torch.float64), keys,
                                           torch.randn(5, 2, generator=g, dtype=torch.float64), 3, 4, generator=g)
        outs.sum().backward()
        assert keys.grad is not None and torch.isfinite(keys.grad).all()

    @pytest.mark.parametrize(
        ("call", "message"),
        [
            (lambda: pairs_with_angle(1.0, 1.0, 0.5, 1), "d must be an int >= 2"),
            (lambda: pairs_with_angle(-1.0, 1.0, 0.5, 3), "norm_x and norm_y must be >= 0"),
            (lambda: taster_sets(2, 3, 4, kind="sobol"), "kind must be one of"),
            (lambda: taster_sets(2, 5, 4, kind="orthogonal"), "m <= d"),
            (lambda: taster_sets(0, 3, 4), "sets must be a positive int"),
            (lambda: kernel_estimates(positive_random_features, torch.zeros(2, 3), torch.zeros(2, 3),
                                      torch.zeros(7, 3), 2), "split into redraws=2"),
            (lambda: kernel_estimates(positive_random_features, torch.zeros(2, 3), torch.zeros(2, 4),
                                      torch.zeros(4, 3), 2), "x and y must both be"),
            (lambda: normalised_output_estimates(positive_random_features, torch.zeros(3), torch.zeros(5, 3),
                                                 torch.zeros(4, 2), 2, 2), "values must be"),
            (lambda: normalised_output_estimates(positive_random_features, torch.zeros(1, 3),
                                                 torch.zeros(5, 3), torch.zeros(5, 2), 2, 2), "query must be"),
        ],
    )
    def test_bad_input_names_the_argument(self, call, message):
        with pytest.raises(ValueError, match=message):
            call()
