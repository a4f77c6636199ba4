"""The ledger: any way of feeding the stream equals causal linear attention, in constant memory."""

import pytest
import torch

from course_lib.attention import linear_attention
from course_lib.device import seeded_qkv
from course_lib.feature_maps import elu_plus_one
from course_lib.state import LinearAttentionState

SPLITS = {"one_chunk": [40], "even": [10, 10, 10, 10], "ragged": [1, 7, 13, 2, 17], "tokens": [1] * 40}


@pytest.mark.parametrize("split", SPLITS.values(), ids=SPLITS.keys())
@pytest.mark.parametrize("chunk_size", [1, 5, 64])
def test_extend_in_any_chunking_equals_causal_linear_attention(split, chunk_size):
    q, k, v = seeded_qkv(2, 3, n=40, d=6, dv=4)
    expected = linear_attention(q, k, v, causal=True)
    state = LinearAttentionState(chunk_size=chunk_size)
    outputs, start = [], 0
    for size in split:
        piece = slice(start, start + size)
        outputs.append(state.extend(q[..., piece, :], k[..., piece, :], v[..., piece, :]))
        start += size
    assert (torch.cat(outputs, dim=-2) - expected).abs().max() < 1e-12
    assert state.tokens_seen == 40


def test_step_equals_causal_linear_attention():
    q, k, v = seeded_qkv(3, n=25, d=4, dv=2)
    state = LinearAttentionState()
    outputs = torch.stack([state.step(q[:, t], k[:, t], v[:, t]) for t in range(25)], dim=-2)
    assert outputs.shape == (3, 25, 2)
    assert (outputs - linear_attention(q, k, v, causal=True)).abs().max() < 1e-12


def test_state_is_the_ledger_sums():
    q, k, v = seeded_qkv(n=12, d=3, dv=5)
    state = LinearAttentionState()
    state.extend(q, k, v)
    phi_k = torch.nn.functional.elu(k) + 1
    assert torch.allclose(state.S, phi_k.T @ v, atol=1e-13, rtol=0)  # S = Σ φ(k_j) v_jᵀ  [d, dv]
    assert torch.allclose(state.z, phi_k.sum(0), atol=1e-13, rtol=0)  # z = Σ φ(k_j)       [d]


def test_nbytes_stays_constant_along_the_stream():
    q, k, v = seeded_qkv(2, 4, n=300, d=8, dv=8, dtype=torch.float32)
    state = LinearAttentionState()
    assert state.nbytes == 0
    sizes = []
    for t in range(300):
        state.step(q[..., t, :], k[..., t, :], v[..., t, :])
        sizes.append(state.nbytes)
    assert set(sizes) == {2 * 4 * (8 * 8 + 8) * 4}  # heads × (d·dv + d) numbers × 4 bytes


def test_reset_forgets_the_stream():
    q, k, v = seeded_qkv(n=10, d=3)
    state = LinearAttentionState()
    first = state.extend(q, k, v)
    state.reset()
    assert state.nbytes == 0 and state.tokens_seen == 0
    assert torch.equal(state.extend(q, k, v), first)


def test_mismatched_chunk_is_refused_and_leaves_the_ledger_untouched():
    q, k, v = seeded_qkv(n=10, d=3)
    state = LinearAttentionState()
    state.extend(q, k, v)
    S, z = state.S.clone(), state.z.clone()
    with pytest.raises(ValueError, match="dv=2 but the ledger was built with dv=3"):
        state.extend(q, k, v[..., :2])
    with pytest.raises(ValueError, match="do not match the ledger"):
        state.extend(q[..., :2], k[..., :2], v)
    with pytest.raises(ValueError, match="degenerate normaliser"):
        state.extend(q[:1] - 2000, k[:1] - 2000, v[:1])
    assert torch.equal(state.S, S) and torch.equal(state.z, z) and state.tokens_seen == 10


def test_step_needs_one_token_tensors():
    state = LinearAttentionState()
    with pytest.raises(ValueError, match=r"q_t must be a tensor of shape \[\.\.\., d\]"):
        state.step(torch.tensor(1.0), torch.ones(3), torch.ones(3))


def drift(ledger_dtype, tokens: int = 6000) -> float:
    """Relative error of the ledger z after ``tokens`` float32 tokens decoded one ``step`` at a time."""
    q, k, v = seeded_qkv(n=tokens, d=8, seed=4, dtype=torch.float32)
    state = LinearAttentionState(ledger_dtype=ledger_dtype)
    for t in range(tokens):
        out = state.step(q[t], k[t], v[t])
    assert out.dtype == torch.float32
    exact = (torch.nn.functional.elu(k.double()) + 1).sum(0)  # z after the whole stream, in float64
    return float((state.z.double() - exact).norm() / exact.norm())


def test_a_float64_ledger_removes_the_drift_of_a_long_float32_stream():
    """6000 float32 additions to z drift by ~1e-6 (relative); a float64 ledger leaves ~3e-10."""
    plain, wide = drift(None), drift(torch.float64)
    assert wide < 1e-7 < plain
    assert plain > 20 * wide


def test_ledger_dtype_must_be_a_floating_dtype():
    with pytest.raises(ValueError, match="ledger_dtype must be a floating-point torch.dtype or None, got torch.int64"):
        LinearAttentionState(ledger_dtype=torch.int64)


@pytest.mark.parametrize("ledger_dtype", [None, torch.float64], ids=["same_dtype", "float64_ledger"])
def test_steps_after_a_chunk_continue_the_stream(ledger_dtype):
    """The one-token fast path (after the first token) and extend share one ledger."""
    q, k, v = seeded_qkv(2, n=30, d=5, dv=3, dtype=torch.float32)
    state = LinearAttentionState(ledger_dtype=ledger_dtype)
    outputs = [state.extend(q[:, :10], k[:, :10], v[:, :10])]
    outputs += [state.step(q[:, t], k[:, t], v[:, t]).unsqueeze(-2) for t in range(10, 20)]
    outputs.append(state.extend(q[:, 20:], k[:, 20:], v[:, 20:]))
    expected = linear_attention(q.double(), k.double(), v.double(), causal=True)
    got = torch.cat(outputs, dim=-2)
    assert got.dtype == torch.float32 and state.tokens_seen == 30
    assert (got.double() - expected).abs().max() < 1e-5
    assert state.S.dtype == (ledger_dtype or torch.float32) and state.S.shape == (2, 5, 3) and state.z.shape == (2, 5)


def test_a_refused_step_leaves_the_ledger_untouched():
    q, k, v = seeded_qkv(n=6, d=3)
    state = LinearAttentionState()
    state.extend(q, k, v)
    S, z = state.S.clone(), state.z.clone()
    with pytest.raises(ValueError, match="dv=2 but the ledger was built with dv=3"):
        state.step(q[0], k[0], v[0, :2])
    with pytest.raises(ValueError, match="degenerate normaliser"):
        state.step(q[0] - 2000, k[0] - 2000, v[0])
    with pytest.raises(ValueError, match="v must hold finite values"):
        state.step(q[0], k[0], v[0] * torch.inf)
    assert torch.equal(state.S, S) and torch.equal(state.z, z) and state.tokens_seen == 6


def test_a_wider_ledger_widens_the_features_not_the_inputs():
    """ledger_dtype=float64 on float32 inputs: φ is computed in float32, then summed in float64."""
    q, k, v = seeded_qkv(2, n=300, d=4, dtype=torch.float32)
    state = LinearAttentionState(ledger_dtype=torch.float64)
    state.extend(q, k, v)
    widened_after = elu_plus_one(k).double().sum(-2)  # float32 φ, float64 sum
    widened_before = elu_plus_one(k.double()).sum(-2)
    assert (state.z - widened_after).abs().max() < 1e-12
    assert (state.z - widened_before).abs().max() > 1e-9  # the two differ: the test can tell them apart
