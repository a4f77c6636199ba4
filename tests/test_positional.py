"""course_lib.positional: RoPE's relative property, and oracle = linear form for each positional remedy."""

import math

import pytest
import torch

from course_lib.attention import METHODS, linear_attention
from course_lib.device import seeded_qkv
from course_lib.feature_maps import elu_plus_one, relu
from course_lib.positional import (
    cosformer_attention,
    cosformer_kernel_attention,
    rope,
    rope_kernel_attention,
    rope_kernel_weights,
    rope_linear_attention,
    rope_matrix,
)

# (batch dims, n, m, d, dv): n = 1, odd n, batch dims, cross attention (n ≠ m)
SHAPES = {
    "batch": ((2, 3), 9, 9, 8, 8),
    "n=1": ((3,), 1, 1, 4, 4),
    "odd_n": ((), 7, 7, 6, 3),
    "cross": ((2,), 5, 11, 4, 6),
}
CASES = [
    pytest.param(shape, causal, id=f"{name}-{'causal' if causal else 'full'}")
    for name, shape in SHAPES.items()
    for causal in (False, True)
    if not causal or shape[1] == shape[2]
]
REMEDIES = {"rope_linear": rope_linear_attention, "cosformer": cosformer_attention}


def positive_qkv(*batch, n, m=None, d, dv=None, seed=0, device="cpu"):
    """seeded_qkv with q, k shifted by +1.5: ReLU features (cosFormer) then do not vanish, so the normaliser is > 0.

    With d = 4, a query and a key share no positive entry with probability (1 − 0.93²)⁴ ≈ 3e-4.
    """
    q, k, v = seeded_qkv(*batch, n=n, m=m, d=d, dv=dv, seed=seed, device=device)
    return q + 1.5, k + 1.5, v


def rotation(p: float, d: int, base: float = 10000.0) -> torch.Tensor:
    """R_p [d, d] written out block by block: [[cos, −sin], [sin, cos]] on dims (2i, 2i+1) at angle p·θ_i."""
    R = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        a = p * base ** (-2 * i / d)
        block = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(block, dtype=R.dtype)
    return R


# --- rope -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [((), 1, 2), ((2, 3), 7, 8), ((4,), 16, 64)], ids=["n=1", "batch", "d=64"])
def test_rope_is_complex_multiplication_by_a_unit_phase(shape):
    batch, n, d = shape
    x = torch.randn(*batch, n, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    positions = torch.arange(n, dtype=torch.float64)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # [d/2]
    phase = torch.polar(torch.ones(n, d // 2, dtype=torch.float64), positions[:, None] * theta)  # e^{i p θ}
    expected = torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (d // 2, 2)).contiguous()) * phase)
    assert (rope(x) - expected.flatten(-2)).abs().max() < 1e-12


def test_rope_applies_the_block_rotation_at_each_given_position():
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    positions = torch.tensor([5, 0, 17, 3, 1000, 2])  # not arange: every row its own position
    out = rope(x, positions=positions, base=100.0)
    for t, p in enumerate(positions.tolist()):
        assert (out[t] - rotation(p, 8, base=100.0) @ x[t]).abs().max() < 1e-12
        assert (rope_matrix(p, 8, base=100.0) - rotation(p, 8, base=100.0)).abs().max() < 1e-12
    assert torch.equal(rope(x), rope(x, positions=torch.arange(6)))  # the default is arange(n)
    assert not torch.allclose(out, rope(x))


def test_rope_preserves_norms_and_position_zero_is_the_identity():
    x = torch.randn(2, 9, 16, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert (rope(x).norm(dim=-1) - x.norm(dim=-1)).abs().max() < 1e-12
    assert torch.equal(rope(x)[..., 0, :], x[..., 0, :])


def test_rotated_dot_product_depends_only_on_the_offset():
    g = torch.Generator().manual_seed(4)
    q, k = (torch.randn(12, 8, generator=g, dtype=torch.float64) for _ in range(2))
    positions = torch.arange(12)
    scores = rope(q, positions=positions) @ rope(k, positions=positions).T  # [n, n], (R_i q_i)ᵀ(R_j k_j)
    shifted = rope(q, positions=positions + 1000) @ rope(k, positions=positions + 1000).T
    assert (scores - shifted).abs().max() < 1e-12
    relative = torch.stack([torch.stack([q[i] @ rotation(j - i, 8) @ k[j] for j in range(12)]) for i in range(12)])
    assert (scores - relative).abs().max() < 1e-12  # = q_iᵀ R_{j−i} k_j


def test_features_of_rotated_vectors_are_not_relative():
    """φ(R_i q)ᵀφ(R_j k) changes when both positions shift by the same offset: φ does not commute with R."""
    g = torch.Generator().manual_seed(5)
    q, k = (torch.randn(8, 8, generator=g, dtype=torch.float64) for _ in range(2))
    positions = torch.arange(8)
    scores = elu_plus_one(rope(q, positions=positions)) @ elu_plus_one(rope(k, positions=positions)).T
    shifted = elu_plus_one(rope(q, positions=positions + 3)) @ elu_plus_one(rope(k, positions=positions + 3)).T
    assert (scores - shifted).abs().max() > 0.1  # O(1) scores moved by O(0.1): far above rounding


def test_rope_keeps_float32_and_is_accurate_at_large_positions():
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(6))
    positions = torch.tensor([0, 10_000, 100_000, 1_000_000])
    out = rope(x, positions=positions)
    assert out.dtype == torch.float32
    # angles are formed in float64, so the float32 result is float32 rounding of the exact rotation
    assert (out.double() - rope(x.double(), positions=positions)).abs().max() < 1e-5


# --- oracle = linear form -----------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape, causal", CASES)
def test_rope_linear_attention_equals_its_oracle(method, shape, causal):
    batch, n, m, d, dv = shape
    q, k, v = seeded_qkv(*batch, n=n, m=m, d=d, dv=dv, seed=7)
    expected = rope_kernel_attention(q, k, v, causal=causal)
    actual = rope_linear_attention(q, k, v, causal=causal, method=method, chunk_size=3)
    assert actual.shape == (*batch, n, dv)
    assert (actual - expected).abs().max() < 1e-10


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape, causal", CASES)
def test_cosformer_equals_its_oracle(method, shape, causal):
    batch, n, m, d, dv = shape
    q, k, v = positive_qkv(*batch, n=n, m=m, d=d, dv=dv, seed=8)
    for horizon in (None, 2 * max(n, m) + 1):
        expected = cosformer_kernel_attention(q, k, v, causal=causal, horizon=horizon)
        actual = cosformer_attention(q, k, v, causal=causal, horizon=horizon, method=method, chunk_size=3)
        assert actual.shape == (*batch, n, dv)
        assert (actual - expected).abs().max() < 1e-10


@pytest.mark.parametrize("causal", [False, True])
def test_oracles_follow_the_papers_formulas_written_as_loops(causal):
    q, k, v = positive_qkv(n=5, d=4, dv=2, seed=9)
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)
    rope_out, cos_out = torch.zeros(5, 2, dtype=torch.float64), torch.zeros(5, 2, dtype=torch.float64)
    for i in range(5):
        keys = range(i + 1) if causal else range(5)
        # RoFormer eq. 19: rotated numerator, plain denominator
        num = sum((rotation(i, 4) @ phi_q[i]) @ (rotation(j, 4) @ phi_k[j]) * v[j] for j in keys)
        rope_out[i] = num / sum(phi_q[i] @ phi_k[j] for j in keys)
        # cosFormer eq. 9-11 with M = n = 5
        s = [relu(q[i]) @ relu(k[j]) * math.cos(math.pi * (i - j) / (2 * 5)) for j in keys]
        cos_out[i] = sum(s_j * v[j] for s_j, j in zip(s, keys, strict=True)) / sum(s)
    assert (rope_kernel_attention(q, k, v, causal=causal) - rope_out).abs().max() < 1e-12
    assert (cosformer_kernel_attention(q, k, v, causal=causal) - cos_out).abs().max() < 1e-12


def test_rope_numerator_weights_can_be_negative_and_rows_need_not_sum_to_one():
    q, k, _ = seeded_qkv(n=8, d=2, seed=10)  # one pair, θ_0 = 1 rad: offsets 2..4 turn it past 90°
    weights = rope_kernel_weights(q, k)  # [n, n]
    assert weights.min() < -0.01
    assert (weights.sum(-1) - 1).abs().max() > 0.01
    assert torch.allclose(rope_linear_attention(q, k, torch.eye(8, dtype=torch.float64)), weights, atol=1e-12)


def test_cosformer_weights_are_non_negative_and_decay_with_distance():
    n = 6
    q = torch.ones(n, 3, dtype=torch.float64)  # every token alike: only the distance re-weighting differs
    weights = cosformer_attention(q, q, torch.eye(n, dtype=torch.float64))  # [n, n]: row i = query i's weights
    assert (weights >= 0).all()
    assert (weights[0, :-1] > weights[0, 1:]).all()  # from query 0, farther keys weigh less
    decay = torch.cos(torch.pi * torch.arange(n, dtype=torch.float64) / (2 * n))  # cos(π(0 − j)/(2M)), M = n
    assert torch.allclose(weights[0], decay / decay.sum(), atol=1e-12)


# --- causality and order -------------------------------------------------------------------


@pytest.mark.parametrize("remedy", REMEDIES.values(), ids=REMEDIES.keys())
@pytest.mark.parametrize("method", METHODS)
def test_causal_remedies_do_not_leak_the_future(remedy, method):
    n, t = 10, 4
    q, k, v = positive_qkv(2, n=n, d=4, seed=11)
    q2, k2, v2 = (x.clone() for x in (q, k, v))
    for x, y in zip((q2, k2, v2), positive_qkv(2, n=n, d=4, seed=12), strict=True):
        x[..., t + 1 :, :] = y[..., t + 1 :, :]  # only the future changes
    before = remedy(q, k, v, causal=True, method=method, chunk_size=3)
    after = remedy(q2, k2, v2, causal=True, method=method, chunk_size=3)
    assert torch.equal(before[..., : t + 1, :], after[..., : t + 1, :])
    assert not torch.allclose(before[..., t + 1 :, :], after[..., t + 1 :, :])


def _permuted_keys_change(attention, seed: int) -> float:
    q, k, v = positive_qkv(n=9, d=8, seed=seed)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(seed))
    return float((attention(q, k, v) - attention(q, k[perm], v[perm])).abs().max())


def test_linear_attention_without_positions_ignores_the_order_of_keys():
    assert _permuted_keys_change(linear_attention, seed=13) < 1e-12
    assert _permuted_keys_change(lambda q, k, v: linear_attention(q, k, v, relu), seed=13) < 1e-12


def test_rope_linear_attention_sees_the_order_of_keys():
    assert _permuted_keys_change(rope_linear_attention, seed=13) > 1e-3


def test_cosformer_sees_the_order_of_keys():
    assert _permuted_keys_change(cosformer_attention, seed=13) > 1e-3


# --- validation -----------------------------------------------------------------------------


def test_rope_rejects_bad_arguments():
    x = torch.zeros(4, 6)
    with pytest.raises(ValueError, match="x's last dim must be even, got d=5"):
        rope(torch.zeros(4, 5))
    with pytest.raises(ValueError, match=r"positions must be a tensor of shape \[n\] = \[4\] .*got \(3,\)"):
        rope(x, positions=torch.arange(3))
    with pytest.raises(ValueError, match="positions must be a tensor of shape .*got list"):
        rope(x, positions=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="positions must hold finite values"):
        rope(x, positions=torch.tensor([0.0, 1.0, float("nan"), 3.0]))
    with pytest.raises(ValueError, match="base must be a finite number > 0, got 0"):
        rope(x, base=0)
    with pytest.raises(ValueError, match="x must have a floating-point dtype"):
        rope(torch.zeros(4, 6, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"d must be even \(R_p rotates pairs of dims\), got d=3"):
        rope_matrix(1, 3)


@pytest.mark.parametrize("remedy", REMEDIES.values(), ids=REMEDIES.keys())
def test_remedies_follow_the_validation_contract(remedy):
    q, k, v = positive_qkv(n=4, m=5, d=4, seed=14)
    with pytest.raises(ValueError, match="q and k need the same length, got n=4 and m=5"):
        remedy(q, k, v, causal=True)
    with pytest.raises(ValueError, match="k and v must have the same length, got 5 and 4"):
        remedy(q, k, v[:4])
    with pytest.raises(ValueError, match="method must be one of"):
        remedy(q, k, v, method="fast")
    with pytest.raises(ValueError, match="eps must be a finite number >= 0"):
        remedy(q, k, v, eps=-1.0)
    with pytest.raises(ValueError, match="q must hold finite values"):
        remedy(q * torch.nan, k, v)


def test_rope_attention_needs_an_even_feature_count():
    q, k, v = seeded_qkv(n=4, d=5, seed=15)
    for fn in (rope_linear_attention, rope_kernel_attention):
        with pytest.raises(ValueError, match="feature_map must give an even count, got f=5"):
            fn(q, k, v)


def test_cosformer_horizon_must_cover_the_sequence_and_relu_can_vanish():
    q, k, v = positive_qkv(n=6, m=8, d=4, seed=16)
    too_short = r"horizon M must be an int >= 8 \(the sequence length max\(n, m\)\), got 7"
    for fn in (cosformer_attention, cosformer_kernel_attention):
        with pytest.raises(ValueError, match=too_short):
            fn(q, k, v, horizon=7)
        with pytest.raises(ValueError, match="degenerate normaliser"):
            fn(-q.abs(), k, v)  # ReLU(q) = 0: a query with no positive feature has nothing to normalise by


# --- devices --------------------------------------------------------------------------------

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_matches_cpu(causal):
    q, k, v = positive_qkv(2, n=50, d=8, seed=17)
    x = q.float()
    assert (rope(x.cuda()).cpu() - rope(x)).abs().max() < 1e-5
    for remedy in REMEDIES.values():
        actual = remedy(q.cuda(), k.cuda(), v.cuda(), causal=causal)
        assert actual.device.type == "cuda"
        assert (actual.cpu() - remedy(q, k, v, causal=causal)).abs().max() < 1e-10


# --- the article's remedies: absolute positions before φ, a sliding window; position weights ------

from course_lib.attention import kernel_attention  # noqa: E402
from course_lib.positional import (  # noqa: E402
    add_absolute_positions,
    cosformer_weights,
    sinusoidal_positions,
    window_kernel_attention,
    window_linear_attention,
    window_weights,
)


def test_sinusoidal_table_follows_the_formula_and_shifts_each_row():
    P = sinusoidal_positions(5, 6, base=100.0)
    for p in range(5):
        for i in range(3):
            angle = p * 100.0 ** (-2 * i / 6)
            assert abs(P[p, 2 * i] - math.sin(angle)) < 1e-15 and abs(P[p, 2 * i + 1] - math.cos(angle)) < 1e-15
    x = torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(20), dtype=torch.float64)
    assert torch.equal(add_absolute_positions(x, base=100.0, scale=0.5), x + 0.5 * P)
    assert sinusoidal_positions(3, 4, dtype=torch.float32).dtype == torch.float32


def test_absolute_positions_keep_the_ledger_and_see_the_order_but_are_not_relative():
    q, k, v = seeded_qkv(n=12, d=4, seed=21)
    qa, ka = add_absolute_positions(q), add_absolute_positions(k)
    for causal in (False, True):
        expected = kernel_attention(qa, ka, v, causal=causal)
        assert (linear_attention(qa, ka, v, causal=causal) - expected).abs().max() < 1e-12
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(22))
    shuffled = linear_attention(qa, add_absolute_positions(k[perm]), v[perm])
    assert (shuffled - linear_attention(qa, ka, v)).abs().max() > 1e-3  # the order is seen
    same_q, same_k = add_absolute_positions(q[:1].expand(12, 4)), add_absolute_positions(k[:1].expand(12, 4))
    scores = elu_plus_one(same_q) @ elu_plus_one(same_k).T
    assert (scores.diagonal(1).max() - scores.diagonal(1).min()) > 1e-2  # not a function of j − i


def test_cosformer_weights_are_the_oracles_factor():
    q, k, v = positive_qkv(n=7, m=9, d=4, seed=23)
    W = cosformer_weights(7, 9)
    assert W.shape == (7, 9) and abs(W[2, 5] - math.cos(math.pi * -3 / 18)) < 1e-15
    scores = (relu(q) @ relu(k).T) * W
    expected = (scores @ v) / scores.sum(-1, keepdim=True)
    assert (cosformer_kernel_attention(q, k, v) - expected).abs().max() < 1e-13
    causal = cosformer_weights(6, causal=True, horizon=10)
    assert torch.equal(causal, cosformer_weights(6, horizon=10).tril())


def test_window_weights_are_a_band_of_width_w():
    W = window_weights(6, 3)
    for i in range(6):
        for j in range(6):
            assert W[i, j] == (1.0 if 0 <= i - j < 3 else 0.0)
    assert torch.equal(window_weights(4, 9), torch.ones(4, 4, dtype=torch.float64).tril())


@pytest.mark.parametrize("method", ["ledger", "banded"])
@pytest.mark.parametrize("window", [1, 3, 8, 30])
@pytest.mark.parametrize("batch", [(), (2, 3)], ids=["single", "batch"])
def test_window_linear_attention_equals_its_oracle(method, window, batch):
    q, k, v = seeded_qkv(*batch, n=11, d=4, dv=3, seed=24)
    out = window_linear_attention(q, k, v, window, method=method)
    assert (out - window_kernel_attention(q, k, v, window)).abs().max() < 1e-12


def test_window_one_returns_each_value_and_a_long_window_is_plain_causal():
    q, k, v = seeded_qkv(n=9, d=4, seed=25)
    assert (window_linear_attention(q, k, v, 1) - v).abs().max() < 1e-12
    assert (window_linear_attention(q, k, v, 9) - kernel_attention(q, k, v, causal=True)).abs().max() < 1e-12


def test_window_sees_order_only_as_in_or_out_of_the_window():
    q, k, v = seeded_qkv(n=10, d=4, seed=26)
    inside = torch.tensor([0, 1, 2, 3, 4, 5, 9, 6, 8, 7])  # shuffles the last 4 keys among themselves
    across = torch.tensor([9, 1, 2, 3, 4, 5, 6, 7, 8, 0])  # swaps a key in the window with one outside
    last = window_linear_attention(q, k, v, 4)[-1]
    assert (window_linear_attention(q, k[inside], v[inside], 4)[-1] - last).abs().max() < 1e-12
    assert (window_linear_attention(q, k[across], v[across], 4)[-1] - last).abs().max() > 1e-3


def test_window_does_not_leak_the_future_and_is_differentiable():
    q, k, v = seeded_qkv(n=8, d=4, seed=27)
    changed = v.clone()
    changed[5:] += 10.0
    for method in ("ledger", "banded"):
        before, after = window_linear_attention(q, k, v, 3, method=method), window_linear_attention(
            q, k, changed, 3, method=method)
        assert torch.equal(before[:5], after[:5])
    for fn in (window_kernel_attention, window_linear_attention):
        q.grad = None
        fn(q.requires_grad_(True), k, v, 3).sum().backward()
        assert q.grad is not None and torch.isfinite(q.grad).all()
    banded = window_linear_attention(q, k, v, 3, method="banded").sum()
    assert torch.autograd.grad(banded, q)[0].isfinite().all()


def test_new_position_functions_refuse_bad_arguments():
    q, k, v = seeded_qkv(n=4, d=4, seed=28)
    with pytest.raises(ValueError, match="window must be a positive int .* got 0"):
        window_linear_attention(q, k, v, 0)
    with pytest.raises(ValueError, match="window must be a positive int .* got 2.5"):
        window_kernel_attention(q, k, v, 2.5)
    with pytest.raises(ValueError, match=r"method must be one of \('ledger', 'banded'\), got 'fast'"):
        window_linear_attention(q, k, v, 2, method="fast")
    with pytest.raises(ValueError, match="q and k need the same length"):
        window_linear_attention(q, k[:3], v[:3], 2)
    with pytest.raises(ValueError, match="d must be even .* got d=3"):
        sinusoidal_positions(4, 3)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        cosformer_weights(0)
    with pytest.raises(ValueError, match="causal weights need n = m, got n=3 and m=4"):
        cosformer_weights(3, 4, causal=True)
    with pytest.raises(ValueError, match="x's last dim must be even"):
        add_absolute_positions(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="scale must be a finite number"):
        add_absolute_positions(q, scale=float("nan"))
