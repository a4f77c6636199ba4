import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.feature_maps import (
    bad_values_reach_the_sums,
    elu_plus_one,
    identity,
    into_buffers,
    query_key_features,
    relu,
)


def test_elu_plus_one_is_x_plus_one_above_zero_and_exp_below():
    x = torch.linspace(-6, 6, 121, dtype=torch.float64)
    expected = torch.where(x > 0, x + 1, torch.exp(x))
    assert torch.allclose(elu_plus_one(x), expected, atol=1e-15, rtol=0)
    assert torch.allclose(elu_plus_one(x), F.elu(x) + 1, atol=1e-15, rtol=0)


def test_elu_plus_one_keeps_relative_precision_where_the_literal_form_cancels():
    x = torch.tensor([-20.0, -50.0, -100.0])
    assert (F.elu(x) + 1 == 0).all()  # exp(x) − 1 + 1 cancels in float32
    assert torch.allclose(elu_plus_one(x), torch.exp(x), rtol=1e-6, atol=0)
    assert (elu_plus_one(x) > 0).all()


def test_elu_plus_one_underflows_only_where_exp_does():
    assert elu_plus_one(torch.tensor([-700.0], dtype=torch.float64)).item() > 0
    assert elu_plus_one(torch.tensor([-2000.0], dtype=torch.float64)).item() == 0.0
    assert elu_plus_one(torch.tensor([-120.0])).item() == 0.0


def test_elu_plus_one_gradient_is_finite_on_both_branches():
    x = torch.tensor([-3.0, 0.0, 200.0], requires_grad=True)
    elu_plus_one(x).sum().backward()
    assert torch.allclose(x.grad, torch.tensor([torch.exp(torch.tensor(-3.0)).item(), 1.0, 1.0]))


def test_relu_and_identity_are_what_they_say():
    x = torch.tensor([-2.0, 0.5])
    assert torch.equal(relu(x), torch.tensor([0.0, 0.5])) and torch.equal(identity(x), x)


def test_query_key_features_use_the_stabilised_pair_when_a_map_has_one():
    class Pair:
        def __call__(self, x):
            raise AssertionError("the plain map must not be used when for_queries/for_keys exist")

        def for_queries(self, x):
            return x + 1

        def for_keys(self, x):
            return x + 2

    q, k = torch.zeros(2, 3), torch.zeros(4, 3)
    phi_q, phi_k = query_key_features(Pair(), q, k)
    assert torch.equal(phi_q, q + 1) and torch.equal(phi_k, k + 2)
    phi_q, phi_k = query_key_features(elu_plus_one, q, k)
    assert torch.equal(phi_q, torch.ones(2, 3)) and torch.equal(phi_k, torch.ones(4, 3))


def test_taylor_features_reproduce_the_truncated_exponential_series():
    from course_lib.feature_maps import taylor_features

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(4, 3, generator=g, dtype=torch.float64), torch.randn(5, 3, generator=g, dtype=torch.float64)
    for order in (0, 1, 2, 4):
        series = sum((q @ k.T) ** p / math.factorial(p) for p in range(order + 1))
        phi_q, phi_k = taylor_features(q, order), taylor_features(k, order)
        assert phi_q.shape == (4, sum(3**p for p in range(order + 1)))
        assert torch.allclose(phi_q @ phi_k.T, series * torch.ones(4, 5, dtype=torch.float64), rtol=1e-12, atol=1e-12)


def test_taylor_features_refuse_bad_order_and_keep_gradients():
    from course_lib.feature_maps import taylor_features

    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    taylor_features(x, 3).sum().backward()
    assert torch.isfinite(x.grad).all()
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match="order"):
            taylor_features(x, bad)
    with pytest.raises(ValueError, match="x"):
        taylor_features(torch.ones(3, dtype=torch.int64), 2)


def test_elu_plus_one_backward_is_min_phi_one_and_twice_differentiable():
    """The custom backward grad · min(φ, 1) equals autograd through the two branches, also one order up."""
    x = torch.tensor([-30.0, -3.0, -1e-3, 1e-3, 2.0, 50.0], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(elu_plus_one(x).sum(), x)
    branches = torch.where(x > 0, x + 1, torch.exp(x))
    (want,) = torch.autograd.grad(branches.sum(), x)
    torch.testing.assert_close(grad, want, atol=0, rtol=1e-15)
    assert torch.autograd.gradgradcheck(elu_plus_one, (x,))  # away from the kink at 0
    with torch.no_grad():
        assert torch.equal(elu_plus_one(x), branches)


def test_only_a_map_that_keeps_bad_values_bad_skips_the_input_checksum():
    """elu + 1 sends ±∞ and NaN to ±∞ or NaN and stays ≥ 0; ReLU sends −∞ to 0 and so needs the checksum."""
    bad = torch.tensor([math.inf, -math.inf, math.nan])
    good = torch.linspace(-800.0, 50.0, 101, dtype=torch.float64)
    assert bad_values_reach_the_sums(elu_plus_one)
    assert not torch.isfinite(elu_plus_one(bad)).any() and (elu_plus_one(good) >= 0).all()
    assert not bad_values_reach_the_sums(relu) and relu(bad)[1] == 0


def test_only_elu_plus_one_writes_into_buffers_and_it_gives_the_same_features():
    x = torch.linspace(-50.0, 50.0, 101, dtype=torch.float64)
    out, scratch = torch.empty_like(x), torch.empty_like(x)
    assert into_buffers(elu_plus_one)(x, out, scratch) is out and torch.equal(out, elu_plus_one(x))
    assert into_buffers(relu) is None and into_buffers(identity) is None
