"""Tests for course_lib.capacity: storing key→value pairs in a fixed-size state and reading them back."""

import math

import pytest
import torch

from course_lib.capacity import (
    orthonormal_keys,
    random_keys_error,
    random_unit_keys,
    recall,
    recall_error,
    state_error_bound,
    store,
)


def test_store_is_the_sum_of_outer_products():
    g = torch.Generator().manual_seed(0)
    keys, values = torch.randn(5, 3, generator=g, dtype=torch.float64), torch.randn(5, 2, generator=g, dtype=torch.float64)
    outer = sum(torch.outer(k, v) for k, v in zip(keys, values))
    torch.testing.assert_close(store(keys, values), outer, rtol=1e-14, atol=1e-14)


def test_recall_is_gram_times_values():
    g = torch.Generator().manual_seed(1)
    keys, values = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(6, 3, generator=g, dtype=torch.float64)
    torch.testing.assert_close(recall(store(keys, values), keys), keys @ keys.T @ values, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize(("n", "f"), [(1, 4), (3, 8), (8, 8)])
def test_orthonormal_keys_recall_exactly(n, f):
    keys = orthonormal_keys(n, f, generator=torch.Generator().manual_seed(n))
    values = torch.randn(n, 5, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    torch.testing.assert_close(keys @ keys.T, torch.eye(n, dtype=torch.float64), rtol=0, atol=1e-13)
    assert recall_error(keys, values).item() < 1e-13


@pytest.mark.parametrize(("n", "f"), [(12, 8), (32, 8), (40, 16)])
def test_parseval_frame_reaches_the_bound(n, f):
    keys = orthonormal_keys(n, f, generator=torch.Generator().manual_seed(n))
    error = recall_error(keys, torch.eye(n, dtype=torch.float64), scale=1.0)
    assert error.item() == pytest.approx(state_error_bound(n, f), rel=1e-12)


def test_no_rank_f_readout_beats_the_bound():
    g = torch.Generator().manual_seed(3)
    n, f = 20, 6
    for _ in range(20):
        readout = torch.randn(n, f, generator=g, dtype=torch.float64) @ torch.randn(f, n, generator=g, dtype=torch.float64)
        best_scale = (readout.trace() / readout.pow(2).sum()).item()  # the gain that helps it most
        error = ((best_scale * readout - torch.eye(n, dtype=torch.float64)).norm() / math.sqrt(n)).item()
        assert error >= state_error_bound(n, f) - 1e-12


def test_random_unit_keys_match_the_interference_formula():
    n, f, trials = 24, 16, 400
    g = torch.Generator().manual_seed(4)
    squared = torch.stack([recall_error(random_unit_keys(n, f, generator=g), torch.eye(n, dtype=torch.float64)) ** 2
                           for _ in range(trials)])
    assert random_unit_keys(n, f, generator=g).norm(dim=-1).sub(1).abs().max() < 1e-14
    standard_error = squared.std() / math.sqrt(trials)
    assert abs(squared.mean() - random_keys_error(n, f) ** 2) < 4 * standard_error


def test_recall_error_is_differentiable():
    keys = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    recall_error(keys, torch.eye(5, dtype=torch.float64)).backward()
    assert keys.grad is not None and torch.isfinite(keys.grad).all()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: store(torch.zeros(4, 3), torch.zeros(5, 2)), "must share"),
        (lambda: recall(torch.zeros(3, 2), torch.zeros(4, 5)), "queries must have f = 3"),
        (lambda: random_unit_keys(0, 3), "n must be a positive int"),
        (lambda: orthonormal_keys(3, 0), "f must be a positive int"),
        (lambda: state_error_bound(2.5, 3), "n must be a positive int"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
