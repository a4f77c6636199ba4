"""course_lib.position_probes: the order and relative-position probes of notebooks 07 and 09."""

import pytest
import torch

from course_lib.attention import linear_attention, softmax_attention
from course_lib.device import seeded_qkv
from course_lib.feature_maps import elu_plus_one
from course_lib.position_probes import diagonal_spread, max_abs_difference, shuffle_change
from course_lib.positional import rope, rope_linear_attention


def test_max_abs_difference_is_the_largest_entry_gap():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert max_abs_difference(a, a + torch.tensor([[0.0, -0.5], [0.25, 0.0]])) == 0.5
    assert max_abs_difference(torch.zeros(0), torch.zeros(0)) == 0.0
    with pytest.raises(ValueError, match=r"same shape, got \(2, 2\) and \(4,\)"):
        max_abs_difference(a, a.flatten())
    with pytest.raises(ValueError, match="must be tensors, got Tensor and list"):
        max_abs_difference(a, [1.0])


def test_shuffle_change_is_zero_for_order_blind_schemes_and_not_for_rope():
    q, k, v = seeded_qkv(2, n=10, d=4, seed=1)
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(2))
    assert shuffle_change(linear_attention, q, k, v, perm) < 1e-12
    assert shuffle_change(softmax_attention, q, k, v, perm) < 1e-12
    assert shuffle_change(rope_linear_attention, q, k, v, perm) > 1e-3
    causal = lambda q, k, v: linear_attention(q, k, v, causal=True)  # noqa: E731
    assert shuffle_change(causal, q, k, v, perm, causal=True) < 1e-12  # the last row sees every key
    rows = (causal(q, k, v) - causal(q, k[..., perm, :], v[..., perm, :])).abs().max()
    assert rows > 1e-3  # earlier rows change, which is why only the last one is compared


def test_shuffle_change_needs_a_permutation():
    q, k, v = seeded_qkv(n=4, d=2)
    for bad in (torch.tensor([0, 1, 2]), torch.tensor([0, 0, 1, 2]), [0, 1, 2, 3]):
        with pytest.raises(ValueError, match="perm must be a permutation of 0..3"):
            shuffle_change(linear_attention, q, k, v, bad)


def test_diagonal_spread_is_zero_exactly_for_functions_of_the_offset():
    i = torch.arange(6, dtype=torch.float64)
    relative = torch.cos(i[:, None] - i[None, :]) + (i[None, :] - i[:, None]) ** 2  # f(j − i)
    assert diagonal_spread(relative) == 0.0
    absolute = relative + 0.1 * i[:, None]  # depends on i too
    assert abs(diagonal_spread(absolute) - 0.5) < 1e-12  # the main diagonal: i = 0..5, so 5 · 0.1
    assert diagonal_spread(torch.ones(3, 5)) == 0.0  # rectangular
    q, k = seeded_qkv(n=16, d=8, seed=3)[:2]
    same_q, same_k = q[0].expand(16, 8), k[0].expand(16, 8)
    assert diagonal_spread(rope(same_q) @ rope(same_k).T) < 1e-12
    assert diagonal_spread(elu_plus_one(rope(same_q)) @ elu_plus_one(rope(same_k)).T) > 1e-2


def test_diagonal_spread_refuses_what_is_not_a_matrix():
    for bad in (torch.zeros(3), torch.zeros(2, 2, 2), torch.zeros(0, 3), [[1.0]]):
        with pytest.raises(ValueError, match="scores must be a non-empty \\[n, m\\] tensor"):
            diagonal_spread(bad)
