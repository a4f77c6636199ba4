"""Closed-form accuracy of the random-feature estimators against seeded Monte Carlo, plus exact special cases."""

import math

import pytest
import torch

from course_lib.estimator_theory import (
    fixed_length_kernel,
    mse_orthogonal,
    mse_positive,
    mse_trig,
    softmax_kernel,
    theorem2_bound,
)
from course_lib.measure import mean_and_error_bar, within_error_bar
from course_lib.random_features import (
    iid_gaussian,
    orthogonal_gaussian,
    positive_random_features,
    trig_random_features,
)

D = 4
SETS = 100_000  # independent sets of tasters per simulation
TOLERANCE = 4.5  # standard errors: a correct formula fails about once in 150,000 checks (CLT)


def pair(norm_x: float, norm_y: float, degrees: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y [D] float64 with the given norms and angle."""
    angle = math.radians(degrees)
    x = torch.tensor([norm_x, 0.0, 0.0, 0.0], dtype=torch.float64)
    y = norm_y * torch.tensor([math.cos(angle), math.sin(angle), 0.0, 0.0], dtype=torch.float64)
    return x, y


# ‖x + y‖² ≤ 0.6 keeps the positive estimator's squared errors light-tailed enough for 10⁵ sets
PAIRS = {"acute": pair(0.45, 0.4, 60), "right": pair(0.5, 0.4, 90), "obtuse": pair(0.7, 0.7, 130)}
X, Y = (torch.stack(side) for side in zip(*PAIRS.values()))  # [3, D] each: all pairs in one simulation


def iid_sets(m: int, generator: torch.Generator, *, d: int = D, sets: int = SETS) -> torch.Tensor:
    return iid_gaussian(sets * m, d, generator=generator).unflatten(0, (sets, m))  # [sets, m, d]


def orthogonal_sets(m: int, generator: torch.Generator, *, d: int = D, sets: int = SETS) -> torch.Tensor:
    rows = -(-m // d) * d  # whole blocks per set, so that sets are independent
    return orthogonal_gaussian(sets * rows, d, generator=generator).unflatten(0, (sets, rows))[:, :m]  # [sets, m, d]


def simulate(features, omega: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """φ(x_p)ᵀφ(y_p) for pairs x, y [P, d] and every set of tasters in omega [sets, m, d]: [P, sets]."""
    return (features(x, omega) * features(y, omega)).sum(-1).T  # features: [sets, P, f]


def assert_mse_matches(estimates: torch.Tensor, x: torch.Tensor, y: torch.Tensor, theory: torch.Tensor) -> None:
    """The measured MSE of estimates [P, sets] is within TOLERANCE error bars of theory [P], for every pair."""
    mse, error_bar = mean_and_error_bar((estimates - softmax_kernel(x, y)[:, None]) ** 2)  # [P] each
    assert (error_bar < 0.03 * theory).all(), f"too few sets to test anything: error bars {error_bar}, theory {theory}"
    agrees = within_error_bar(mse, error_bar, theory, num_standard_errors=TOLERANCE)
    assert agrees.all(), f"measured MSE {mse.tolist()} ± {error_bar.tolist()}, formula {theory.tolist()}"


@pytest.mark.parametrize("m", [1, 3])
class TestAgainstMonteCarlo:
    def test_mse_positive(self, m):
        omega = iid_sets(m, torch.Generator().manual_seed(m))
        assert_mse_matches(simulate(positive_random_features, omega, X, Y), X, Y, mse_positive(X, Y, m))

    def test_mse_trig(self, m):
        omega = iid_sets(m, torch.Generator().manual_seed(10 + m))
        assert_mse_matches(simulate(trig_random_features, omega, X, Y), X, Y, mse_trig(X, Y, m))

    def test_mse_orthogonal(self, m):
        omega = orthogonal_sets(m, torch.Generator().manual_seed(20 + m))
        assert_mse_matches(simulate(positive_random_features, omega, X, Y), X, Y, mse_orthogonal(X, Y, m))


def test_mse_orthogonal_over_more_than_one_block():
    m = D + 2  # one full block of D orthogonal tasters and 2 rows of an independent one
    omega = orthogonal_sets(m, torch.Generator().manual_seed(25))
    assert_mse_matches(simulate(positive_random_features, omega, X, Y), X, Y, mse_orthogonal(X, Y, m))


def test_orthogonal_gain_is_resolved():
    """In d = m = 16 orthogonal sets match the exact formula (0.78 × iid) and not the iid one."""
    m = 16
    x = torch.zeros(1, m, dtype=torch.float64)
    x[0, 0] = 0.5
    y = x.clone()  # ‖x + y‖² = 1
    omega = orthogonal_sets(m, torch.Generator().manual_seed(30), d=m, sets=20_000)
    estimates = simulate(positive_random_features, omega, x, y)  # [1, sets]
    assert_mse_matches(estimates, x, y, mse_orthogonal(x, y, m))
    mse, error_bar = mean_and_error_bar((estimates - softmax_kernel(x, y)[:, None]) ** 2)
    assert not within_error_bar(mse, error_bar, mse_positive(x, y, m), num_standard_errors=TOLERANCE).any()


def test_fixed_length_kernel_is_what_fixed_length_rows_estimate():
    x, y = (side[None] for side in pair(0.8, 0.7, 20))  # [1, D] each
    directions = iid_sets(D, torch.Generator().manual_seed(40))
    directions = directions / directions.norm(dim=-1, keepdim=True)  # [SETS, D, D], uniform unit rows
    for length in (1.0, math.sqrt(D)):
        mean, error_bar = mean_and_error_bar(simulate(positive_random_features, length * directions, x, y))
        expected, unbiased = fixed_length_kernel(x, y, length), softmax_kernel(x, y)
        assert within_error_bar(mean, error_bar, expected, num_standard_errors=TOLERANCE).all(), f"length {length}"
        assert not within_error_bar(mean, error_bar, unbiased, num_standard_errors=TOLERANCE).any(), "no bias seen"


def test_fixed_length_kernel_series_by_hand():
    # d = 2: ₀F₁(; 1; z) = Σ z^k / (k!)² = I₀(2√z), the modified Bessel function
    x, y = torch.tensor([0.3, 0.4], dtype=torch.float64), torch.tensor([0.5, -0.1], dtype=torch.float64)
    z = (x + y).pow(2).sum() * 4.0 / 4  # length 2
    expected = math.exp(-(0.25 + 0.26) / 2) * float(torch.special.i0(2 * z.sqrt()))
    assert fixed_length_kernel(x, y, 2.0).item() == pytest.approx(expected, rel=1e-14)


class TestExactCases:
    @pytest.mark.parametrize("m", [1, 7])
    def test_positive_is_exact_for_opposite_vectors(self, m):
        x = torch.tensor([0.3, -1.2, 0.7, 2.0], dtype=torch.float64)
        assert mse_positive(x, -x, m).item() == 0.0
        assert mse_orthogonal(x, -x, m).item() == 0.0

    @pytest.mark.parametrize("m", [1, 7])
    def test_trig_is_exact_for_equal_vectors(self, m):
        x = torch.tensor([0.3, -1.2, 0.7, 2.0], dtype=torch.float64)
        assert mse_trig(x, x, m).item() == 0.0

    @pytest.mark.parametrize("m", [2, 3, 16])
    def test_iid_mse_scales_exactly_as_one_over_m(self, m):
        assert torch.equal(mse_positive(X, Y, m), mse_positive(X, Y, 1) / m)
        assert torch.equal(mse_trig(X, Y, m), mse_trig(X, Y, 1) / m)

    @pytest.mark.parametrize("d", [2, 4, 16, 64])
    def test_orthogonal_below_bound_below_iid(self, d):
        g = torch.Generator().manual_seed(d)
        x, y = torch.randn(2, 8, d, generator=g, dtype=torch.float64)  # 8 pairs, [8, d] each
        x, y = 0.6 * x / x.norm(dim=-1, keepdim=True), 0.6 * y / y.norm(dim=-1, keepdim=True)  # of norm 0.6
        for m in range(2, d + 1):
            orthogonal, bound, iid = mse_orthogonal(x, y, m), theorem2_bound(x, y, m), mse_positive(x, y, m)
            assert (orthogonal <= bound).all() and (bound < iid).all(), f"d={d}, m={m}"

    def test_one_taster_has_nothing_to_be_orthogonal_to(self):
        x, y = PAIRS["acute"]
        assert torch.equal(mse_orthogonal(x, y, 1), mse_positive(x, y, 1))
        assert torch.equal(theorem2_bound(x, y, 1), mse_positive(x, y, 1))

    def test_relative_errors_have_the_closed_forms_of_notebook_06(self):
        x, y = PAIRS["obtuse"]
        s, t, sm = (x + y).pow(2).sum(), (x - y).pow(2).sum(), softmax_kernel(x, y)
        assert (mse_positive(x, y, 5) / sm**2).item() == pytest.approx(math.expm1(s) / 5, rel=1e-12)
        assert (mse_trig(x, y, 5) / sm**2).item() == pytest.approx(2 * math.sinh(t / 2) ** 2 / 5, rel=1e-12)

    def test_broadcasts_over_leading_dims(self):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(3, 1, D, generator=g, dtype=torch.float64)
        y = torch.randn(5, D, generator=g, dtype=torch.float64)
        for formula in (mse_positive, mse_trig, mse_orthogonal, theorem2_bound):
            batched = formula(x, y, 3)
            assert batched.shape == (3, 5)
            assert torch.allclose(batched[2, 4], formula(x[2, 0], y[4], 3), rtol=1e-14, atol=0)
        assert softmax_kernel(x, y).shape == fixed_length_kernel(x, y, 1.0).shape == (3, 5)


class TestValidation:
    x, y = PAIRS["acute"]

    @pytest.mark.parametrize("formula", [mse_positive, mse_trig, mse_orthogonal, theorem2_bound])
    @pytest.mark.parametrize("m", [0, -2, 2.5, True, None], ids=repr)
    def test_rejects_bad_m(self, formula, m):
        with pytest.raises(ValueError, match=r"m \(the number of tasters\) must be a positive int"):
            formula(self.x, self.y, m)

    def test_rejects_mismatched_dims(self):
        with pytest.raises(ValueError, match="x and y must have the same feature dim, got 4 and 3"):
            mse_positive(self.x, self.y[:3], 2)

    def test_rejects_non_tensors_and_integer_tensors(self):
        with pytest.raises(TypeError, match="x must be a torch.Tensor"):
            softmax_kernel([0.1, 0.2], self.y)
        with pytest.raises(ValueError, match="y must have a floating-point dtype"):
            mse_trig(self.x, torch.ones(D, dtype=torch.int64), 2)

    def test_theorem2_needs_one_block(self):
        with pytest.raises(ValueError, match="m <= d orthogonal tasters.*got m=5 and d=4"):
            theorem2_bound(self.x, self.y, 5)

    @pytest.mark.parametrize("length", [0, -1.0, math.inf, math.nan, True], ids=repr)
    def test_rejects_bad_length(self, length):
        with pytest.raises(ValueError, match="length must be a finite number > 0"):
            fixed_length_kernel(self.x, self.y, length)


# --- the normalised output: delta-method bias and variance ----------------------------------------

from course_lib.estimator_theory import ratio_bias_delta, ratio_variance_delta  # noqa: E402
from course_lib.measure import normalised_output_estimates  # noqa: E402


def _attention_problem(seed: int = 0, scale: float = 0.15):
    g = torch.Generator().manual_seed(seed)
    query = scale * torch.randn(4, generator=g, dtype=torch.float64)
    keys = scale * torch.randn(5, 4, generator=g, dtype=torch.float64)
    return query, keys, torch.randn(5, 2, generator=g, dtype=torch.float64)


def test_delta_method_scales_like_one_over_m():
    query, keys, values = _attention_problem()
    torch.testing.assert_close(ratio_bias_delta(query, keys, values, 8) * 8, ratio_bias_delta(query, keys, values, 1))
    torch.testing.assert_close(ratio_variance_delta(query, keys, values, 8) * 8,
                               ratio_variance_delta(query, keys, values, 1))


def test_no_bias_and_no_noise_when_all_values_are_equal():
    query, keys, _ = _attention_problem()
    values = torch.ones(5, 2, dtype=torch.float64)  # every output is exactly 1: nothing to be biased
    assert ratio_bias_delta(query, keys, values, 4).abs().max() < 1e-15
    assert ratio_variance_delta(query, keys, values, 4).abs().max() < 1e-15


def test_delta_method_matches_monte_carlo_at_large_m():
    query, keys, values = _attention_problem(seed=1)
    m, redraws = 32, 40_000
    outs = normalised_output_estimates(positive_random_features, query, keys, values, m, redraws,
                                       generator=torch.Generator().manual_seed(2))  # [R, dv]
    target = torch.softmax(keys @ query, dim=0) @ values
    mean, error_bar = mean_and_error_bar((outs - target).T)  # [dv] each: the measured bias
    predicted = ratio_bias_delta(query, keys, values, m)
    assert within_error_bar(mean, error_bar, predicted, num_standard_errors=TOLERANCE).all(), (mean, predicted)
    torch.testing.assert_close(outs.var(0), ratio_variance_delta(query, keys, values, m), rtol=0.05, atol=0)


def test_ratio_functions_refuse_bad_shapes():
    query, keys, values = _attention_problem()
    with pytest.raises(ValueError, match="query must be"):
        ratio_bias_delta(query[None], keys, values, 2)
    with pytest.raises(ValueError, match="values must be"):
        ratio_variance_delta(query, keys, values[:3], 2)
    with pytest.raises(ValueError, match="m \\(the number of tasters\\)"):
        ratio_bias_delta(query, keys, values, 0)
