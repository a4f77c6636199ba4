"""Decay (retention): every evaluation order equals the explicit γ^{i−j} oracle, in constant memory."""

import math

import pytest
import torch

from course_lib.attention import kernel_attention, linear_attention
from course_lib.device import seeded_qkv
from course_lib.retention import retention_kernel_attention
from course_lib.state import LinearAttentionState

DECAYS = {
    "gamma=1": 1.0,
    "gamma=0.9": 0.9,
    "gamma=0.3": 0.3,
    "per_head": torch.tensor([0.99, 0.8, 0.5], dtype=torch.float64),  # one γ per head, as in RetNet
}


@pytest.mark.parametrize("decay", DECAYS.values(), ids=DECAYS.keys())
@pytest.mark.parametrize("method", ["auto", "parallel", "recurrent", "chunked"])
@pytest.mark.parametrize("chunk_size", [1, 4, 7, 64])
def test_every_method_equals_the_oracle(decay, method, chunk_size):
    q, k, v = seeded_qkv(2, 3, n=23, d=4, dv=5)
    expected = retention_kernel_attention(q, k, v, decay)
    out = linear_attention(q, k, v, causal=True, decay=decay, method=method, chunk_size=chunk_size)
    assert (out - expected).abs().max() < 1e-12


def test_oracle_is_the_explicitly_weighted_kernel_matrix():
    q, k, v = seeded_qkv(n=6, d=3)
    phi_q, phi_k = torch.nn.functional.elu(q) + 1, torch.nn.functional.elu(k) + 1
    i = torch.arange(6)
    weights = torch.where(i[:, None] >= i[None, :], 0.7 ** (i[:, None] - i[None, :]).double(), 0.0)
    scores = (phi_q @ phi_k.T) * weights
    expected = (scores @ v) / scores.sum(-1, keepdim=True)
    assert torch.allclose(retention_kernel_attention(q, k, v, 0.7), expected, atol=1e-14, rtol=0)


def test_no_decay_is_plain_causal_linear_attention():
    q, k, v = seeded_qkv(2, n=17, d=4)
    assert (retention_kernel_attention(q, k, v, 1.0) - kernel_attention(q, k, v, causal=True)).abs().max() < 1e-13


@pytest.mark.parametrize("split", [[40], [1, 7, 13, 2, 17], [1] * 40], ids=["one", "ragged", "tokens"])
def test_the_fading_ledger_streams_in_any_chunking(split):
    q, k, v = seeded_qkv(3, n=40, d=4, dv=2)
    decay = DECAYS["per_head"]
    expected = retention_kernel_attention(q, k, v, decay)
    state, outputs, start = LinearAttentionState(decay=decay, chunk_size=5), [], 0
    for size in split:
        piece = slice(start, start + size)
        outputs.append(state.extend(q[..., piece, :], k[..., piece, :], v[..., piece, :]))
        start += size
        assert state.nbytes == 3 * (4 * 2 + 4) * 8
    assert (torch.cat(outputs, dim=-2) - expected).abs().max() < 1e-12


def test_long_sequences_with_strong_decay_stay_finite_and_exact():
    """γ^{i} underflows long before i = 3000 at γ = 0.5: every exponent is ≤ 0, so nothing overflows."""
    q, k, v = seeded_qkv(n=3000, d=4, seed=1)
    chunked = linear_attention(q, k, v, causal=True, decay=0.5, chunk_size=64)
    recurrent = linear_attention(q[:200], k[:200], v[:200], causal=True, decay=0.5, method="recurrent")
    assert torch.isfinite(chunked).all()
    assert (chunked[:200] - recurrent).abs().max() < 1e-12


def test_decay_forgets_the_distant_past():
    """With γ = 0.5 a key 60 tokens back weighs 2^-60 relative: changing it moves nothing visible."""
    q, k, v = seeded_qkv(n=80, d=4, seed=2)
    v2 = v.clone()
    v2[0] += 100.0
    out = linear_attention(q, k, v, causal=True, decay=0.5)
    out2 = linear_attention(q, k, v2, causal=True, decay=0.5)
    assert (out[-1] - out2[-1]).abs().max() < 1e-12
    assert (out[1] - out2[1]).abs().max() > 1.0


def test_a_future_token_never_changes_a_past_output():
    q, k, v = seeded_qkv(n=30, d=4, seed=3)
    k2 = k.clone()
    k2[20:] *= 5
    before = linear_attention(q, k, v, causal=True, decay=0.8)
    after = linear_attention(q, k2, v, causal=True, decay=0.8)
    assert torch.equal(before[:20], after[:20]) or (before[:20] - after[:20]).abs().max() < 1e-14


@pytest.mark.parametrize(
    "decay, message",
    [
        (0.0, "decay must lie in \\(0, 1\\]"),
        (1.5, "decay must lie in \\(0, 1\\]"),
        (math.nan, "decay must lie in \\(0, 1\\]"),
        (torch.tensor([0.9, 0.8]), "decay of shape \\(2,\\) must broadcast to the batch dims \\(2, 3\\)"),
    ],
)
def test_bad_decay_is_refused(decay, message):
    with pytest.raises(ValueError, match=message):
        linear_attention(*seeded_qkv(2, 3, n=5, d=4), causal=True, decay=decay)


def test_decay_needs_causal():
    with pytest.raises(ValueError, match="decay weights the past by"):
        linear_attention(*seeded_qkv(n=5, d=4), decay=0.9, causal=False)


def test_decay_weights_are_the_oracles_factor():
    from course_lib.retention import decay_weights

    W = decay_weights(5, 0.7)
    i = torch.arange(5)
    expected = torch.where(i[:, None] >= i[None, :], 0.7 ** (i[:, None] - i[None, :]).double(), 0.0)
    assert (W - expected).abs().max() < 1e-15
    q, k, v = seeded_qkv(n=5, d=3)
    phi_q, phi_k = torch.nn.functional.elu(q) + 1, torch.nn.functional.elu(k) + 1
    scores = (phi_q @ phi_k.T) * W
    assert (retention_kernel_attention(q, k, v, 0.7) - (scores @ v) / scores.sum(-1, keepdim=True)).abs().max() < 1e-14
    gamma = DECAYS["per_head"].clone().requires_grad_(True)
    per_head = decay_weights(4, gamma)
    assert per_head.shape == (3, 4, 4) and abs(per_head[2, 3, 0].item() - 0.5**3) < 1e-15
    per_head.sum().backward()  # differentiable in γ
    assert gamma.grad is not None and torch.isfinite(gamma.grad).all()
    with pytest.raises(ValueError, match="decay must lie in"):
        decay_weights(4, 1.5)
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        decay_weights(0, 0.5)
