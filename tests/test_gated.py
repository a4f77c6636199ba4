"""course_lib.gated: the recurrence is the definition, the chunked form agrees with it (ragged lengths,
both gate shapes, chained calls, strong gates in float32; per-channel gates through sub-chunks of every
size, the one-level form included), gradients, and refusals that name the argument."""

import pytest
import torch

from course_lib import gated
from course_lib.device import seeded_qkv
from course_lib.gated import CHUNKS_PER_PASS, SPLIT_LIMIT, gated_chunked, gated_linear_attention, gated_recurrent

torch.set_num_threads(2)


def inputs(shape=(2, 3), n=37, dk=8, dv=5, *, per_channel=True, strength=1.0, dtype=torch.float64, seed=0):
    """q, k, v [*shape, n, ·] (``seeded_qkv``) and log gates in (−strength, 0], from fixed CPU generators."""
    q, k, v = seeded_qkv(*shape, n=n, d=dk, dv=dv, seed=seed, dtype=dtype)
    gate_shape = (*shape, n, dk) if per_channel else (*shape, n)
    return q, k, v, -strength * torch.rand(gate_shape, generator=torch.Generator().manual_seed(seed + 1), dtype=dtype)


def by_hand(q, k, v, log_decay, scale):
    """S_t = diag(exp(g_t)) S_{t−1} + k_t v_tᵀ with explicit loops over every entry (float64)."""
    n, dk, dv = q.shape[-2], q.shape[-1], v.shape[-1]
    S = torch.zeros(dk, dv, dtype=torch.float64)
    out = torch.zeros(n, dv, dtype=torch.float64)
    for t in range(n):
        for a in range(dk):
            gate = float(log_decay[t, a] if log_decay.dim() == 2 else log_decay[t])
            for b in range(dv):
                S[a, b] = torch.exp(torch.tensor(gate)) * S[a, b] + k[t, a] * v[t, b]
        out[t] = scale * (q[t] @ S)
    return out


@pytest.mark.parametrize("per_channel", [True, False])
def test_the_recurrence_is_the_definition_written_out(per_channel):
    q, k, v, g = inputs((), n=6, dk=3, dv=2, per_channel=per_channel)
    got = gated_linear_attention(q, k, v, g, method="recurrent")
    assert torch.allclose(got, by_hand(q, k, v, g, 3 ** -0.5), atol=1e-12)


@pytest.mark.parametrize("per_channel", [True, False])
def test_the_masked_matrix_form_equals_the_recurrence(per_channel):
    """State-space duality: O = (L ∘ Q Kᵀ) V with L_ij = exp(G_i − G_j) (per channel: inside the sum)."""
    q, k, v, g = inputs((2,), n=11, per_channel=per_channel)
    G = (g if per_channel else g.unsqueeze(-1).expand_as(q)).cumsum(-2)  # [2, n, dk]
    L = (G.unsqueeze(-2) - G.unsqueeze(-3)).exp() * torch.ones(11, 11, dtype=torch.float64).tril()[..., None]
    scores = torch.einsum("bic,bjc,bijc->bij", q, k, L)
    assert torch.allclose(gated_linear_attention(q, k, v, g, scale=1.0, method="recurrent"), scores @ v, atol=1e-12)


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("n, chunk_size", [(37, 8), (37, 64), (64, 16), (1, 4), (9, 9), (100, 3)])
def test_chunked_equals_recurrent_in_float64_on_ragged_lengths(per_channel, n, chunk_size):
    """Several passes of CHUNKS_PER_PASS chunks where C is small, the last pass and chunk ragged."""
    q, k, v, g = inputs(n=n, per_channel=per_channel)
    recurrent = gated_linear_attention(q, k, v, g, method="recurrent")
    chunked = gated_linear_attention(q, k, v, g, chunk_size=chunk_size)
    assert (recurrent - chunked).abs().max() < 1e-10


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("split_limit, safe_passes", [(SPLIT_LIMIT, 1), (0.0, 3)], ids=["split", "never split"])
def test_each_pass_chooses_its_form_and_every_choice_is_the_recurrence(per_channel, split_limit, safe_passes,
                                                                        monkeypatch):
    """Three passes: mild gates, then −20 a token (a chunk of 4 sums to −80, over the limit: the safe form),
    then mild again; split_limit = 0 sends every pass to the safe form. float64, the last pass ragged."""
    C, per_pass = 4, 4 * CHUNKS_PER_PASS
    q, k, v, g = inputs(n=3 * per_pass - 5, per_channel=per_channel)
    gate = g if per_channel else g.unsqueeze(-1)  # the form takes [..., n, dk or 1]
    gate[..., per_pass:2 * per_pass, :] = -20.0
    safe = "_within_per_channel" if per_channel else "exp_below_diagonal"
    calls = []
    monkeypatch.setattr(gated, safe, lambda *a, form=getattr(gated, safe): calls.append(1) or form(*a))
    state = torch.randn(2, 3, 8, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    out, S = gated_recurrent(q, k, v, gate, state)
    fast, S_fast = gated_chunked(q, k, v, gate, state, chunk_size=C, split_limit=split_limit)
    assert len(calls) == safe_passes
    assert (fast - out).abs().max() < 1e-10 and (S_fast - S).abs().max() < 1e-10


@pytest.mark.parametrize("per_channel", [True, False])
def test_a_split_just_inside_its_limit_keeps_float32_accurate(per_channel):
    """Chunks of 64 whose gates sum to just above −SPLIT_LIMIT: the split's factors reach exp(±30),
    and the float32 result still matches the float64 recurrence to 1e-4 of its largest entry."""
    q, k, v, _ = inputs((1, 2), n=128, dk=16, dv=8, per_channel=per_channel)
    shape = (1, 2, 128, 16) if per_channel else (1, 2, 128, 1)
    g = torch.full(shape, -0.999 * SPLIT_LIMIT / 64, dtype=torch.float64)
    exact, _ = gated_recurrent(q, k, v, g, torch.zeros(1, 2, 16, 8, dtype=torch.float64))
    fast, S = gated_chunked(*(x.float() for x in (q, k, v, g)), torch.zeros(1, 2, 16, 8))
    assert torch.isfinite(fast).all() and torch.isfinite(S).all()
    assert (fast.double() - exact).abs().max() < 1e-4 * exact.abs().max()


@pytest.mark.parametrize("n, chunk_size, sub_chunk_size", [
    (37, 16, 4), (37, 16, 5), (64, 64, 8), (100, 64, 16), (100, 64, 7), (100, 64, 64), (100, 32, 100), (9, 9, 2),
    (1, 4, 8),
], ids=str)
def test_sub_chunks_equal_the_recurrence_in_float64(n, chunk_size, sub_chunk_size):
    """Two levels (c < C, ragged chunks and sub-chunks) and the one-level form (c >= C) give the definition."""
    q, k, v, g = inputs(n=n)
    state = torch.randn(2, 3, 8, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    out, S = gated_recurrent(q, k, v, g, state)
    fast, S_fast = gated_chunked(q, k, v, g, state, chunk_size=chunk_size, sub_chunk_size=sub_chunk_size,
                                 split_limit=0)
    assert (fast - out).abs().max() < 1e-10 and (S_fast - S).abs().max() < 1e-10


def test_the_chunked_form_scales_its_output():
    q, k, v, g = inputs(n=20)
    state = torch.zeros(2, 3, 8, 5, dtype=torch.float64)
    assert torch.allclose(gated_chunked(q, k, v, g, state, scale=0.25)[0], gated_chunked(q, k, v, g, state)[0] / 4)


@pytest.mark.parametrize("method", ["chunked", "recurrent"])
@pytest.mark.parametrize("per_channel", [True, False])
def test_chained_calls_equal_one_call(method, per_channel):
    q, k, v, g = inputs(n=45, per_channel=per_channel)
    whole, S_whole = gated_linear_attention(q, k, v, g, method=method, chunk_size=8, return_state=True)
    S, parts = None, []
    for piece in (slice(0, 13), slice(13, 14), slice(14, 45)):
        out, S = gated_linear_attention(q[..., piece, :], k[..., piece, :], v[..., piece, :], g[..., piece, :] if
                                        per_channel else g[..., piece], method=method, chunk_size=8,
                                        initial_state=S, return_state=True)
        parts.append(out)
    assert torch.allclose(torch.cat(parts, dim=-2), whole, atol=1e-12)
    assert torch.allclose(S, S_whole, atol=1e-12)


@pytest.mark.parametrize("per_channel", [True, False])
def test_strong_gates_stay_finite_in_float32_and_match_the_float64_recurrence(per_channel):
    """log gates down to −10 a token over 64-token chunks: the chunk's running sum reaches −640."""
    q, k, v, g = inputs((1, 2), n=200, dk=16, dv=8, per_channel=per_channel, strength=10.0)
    exact = gated_linear_attention(q, k, v, g, method="recurrent")
    fast = gated_linear_attention(*(x.float() for x in (q, k, v, g)), chunk_size=64)
    assert torch.isfinite(fast).all()
    assert (fast.double() - exact).abs().max() < 1e-4 * exact.abs().max()


@pytest.mark.parametrize("n, sub_chunk_size", [(203, 8), (203, 5), (203, 64), (70, 16)], ids=str)
@pytest.mark.parametrize("strength", [10.0, 40.0])
def test_strong_per_channel_gates_through_sub_chunks_stay_finite_in_float32(n, sub_chunk_size, strength):
    """Gates down to −40 a token: a sub-chunk of 8 sums to −320, so no factor may be split as exp(G)·exp(−G);
    the padded last sub-chunk (n = 203: 11 tokens in the last chunk) must not either."""
    q, k, v, g = inputs((1, 2), n=n, dk=16, dv=8, strength=strength)
    state = torch.zeros(1, 2, 16, 8, dtype=torch.float64)
    exact, _ = gated_recurrent(q, k, v, g, state)
    fast, S = gated_chunked(*(x.float() for x in (q, k, v, g, state)), sub_chunk_size=sub_chunk_size)
    assert torch.isfinite(fast).all() and torch.isfinite(S).all()
    assert (fast.double() - exact).abs().max() < 1e-4 * exact.abs().max()


def test_splitting_the_exponent_overflows_where_the_difference_does_not():
    """Why the chunked form keeps exp(G_i − G_j) whole: exp(G_i)·exp(−G_j) is inf·0 in float32."""
    g = torch.full((64,), -10.0)
    G = g.cumsum(0)
    split = G.exp()[:, None] * (-G).exp()[None, :]
    whole = (G[:, None] - G[None, :]).clamp(max=0).exp()
    assert torch.isinf((-G).exp()).any() and torch.isnan(split).any()
    assert torch.isfinite(whole).all()


def test_gates_of_zero_keep_everything_and_match_the_unnormalised_sum():
    q, k, v, _ = inputs((), n=10)
    out = gated_linear_attention(q, k, v, torch.zeros(10, dtype=torch.float64), scale=1.0)
    assert torch.allclose(out, (q @ k.T).tril() @ v, atol=1e-12)


def test_scale_defaults_to_one_over_root_dk():
    q, k, v, g = inputs((), n=7, dk=9)
    assert torch.allclose(gated_linear_attention(q, k, v, g), gated_linear_attention(q, k, v, g, scale=1.0) / 3)


def test_gate_and_state_broadcast_over_leading_dims():
    q, k, v, g = inputs((2, 3), n=12)
    shared = g[:1]  # one gate tensor for both batch entries [1, 3, n, dk]
    out = gated_linear_attention(q, k, v, shared)
    assert torch.allclose(out, gated_linear_attention(q, k, v, shared.expand_as(g)))
    state = torch.randn(3, 8, 5, dtype=torch.float64)  # one ledger per head
    out, S = gated_linear_attention(q, k, v, g, initial_state=state, return_state=True)
    assert S.shape == (2, 3, 8, 5)


def test_half_precision_runs_in_float32_and_comes_back_in_its_dtype():
    q, k, v, g = (x.to(torch.bfloat16) for x in inputs((1,), n=20, dtype=torch.float32))
    out, S = gated_linear_attention(q, k, v, g, return_state=True)
    assert out.dtype == torch.bfloat16 and S.dtype == torch.float32


@pytest.mark.parametrize("method", ["chunked", "recurrent"])
@pytest.mark.parametrize("per_channel", [True, False])
def test_gradcheck_through_every_input_and_the_gate(method, per_channel):
    q, k, v, g = inputs((1,), n=7, dk=3, dv=2, per_channel=per_channel)
    state = torch.randn(1, 3, 2, dtype=torch.float64)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, state)]

    def run(q, k, v, g, state):
        return gated_linear_attention(q, k, v, g.clamp(max=0), method=method, chunk_size=3, initial_state=state,
                                      return_state=True)

    assert torch.autograd.gradcheck(run, leaves)


@pytest.mark.parametrize("chunk_size, sub_chunk_size", [(6, 4), (7, 7), (3, 2)], ids=str)
def test_gradcheck_through_the_sub_chunks(chunk_size, sub_chunk_size):
    """q, k, v, the per-channel gate and the initial ledger, over ragged chunks and sub-chunks."""
    q, k, v, g = inputs((1,), n=13, dk=3, dv=2)
    state = torch.randn(1, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g, state)]

    def run(q, k, v, g, state):
        return gated_chunked(q, k, v, g.clamp(max=0), state, chunk_size=chunk_size, sub_chunk_size=sub_chunk_size,
                             split_limit=0)

    assert torch.autograd.gradcheck(run, leaves)


@pytest.mark.parametrize("bad, message", [
    (lambda g: g.abs() + 0.1, "log_decay must be finite and <= 0"),
    (lambda g: g.index_put((torch.tensor([0]), torch.tensor([2]), torch.tensor([4]), torch.tensor([1])),
                           torch.tensor(float("nan"), dtype=torch.float64)), r"the first at \(0, 2, 4, 1\): nan"),
    (lambda g: g.index_fill(-2, torch.tensor([3]), -float("inf")), "finite and <= 0"),
    (lambda g: g[..., :-1], r"log_decay must be \[..., n, dk\]"),
    (lambda g: g[..., 0, :], r"log_decay must be \[..., n, dk\]"),
    (lambda g: g.float(), "log_decay must share dtype and device with q"),
    (lambda g: [0.0], "log_decay must be a torch.Tensor"),
])
def test_bad_gates_are_refused_by_name(bad, message):
    q, k, v, g = inputs(n=12)
    with pytest.raises((ValueError, TypeError), match=message):
        gated_linear_attention(q, k, v, bad(g))


@pytest.mark.parametrize("kwargs, message", [
    ({"scale": float("nan")}, "scale must be a finite number"),
    ({"method": "parallel"}, "method must be one of"),
    ({"chunk_size": 0}, "chunk_size must be a positive int"),
    ({"initial_state": torch.zeros(2, 3, 8, 4, dtype=torch.float64)}, r"initial_state must be \[..., dk, dv\]"),
    ({"initial_state": torch.zeros(5, 3, 8, 5, dtype=torch.float64)}, "must broadcast to the batch dims"),
])
def test_bad_options_are_refused_by_name(kwargs, message):
    q, k, v, g = inputs(n=12)
    with pytest.raises((ValueError, TypeError), match=message):
        gated_linear_attention(q, k, v, g, **kwargs)


def test_a_non_finite_input_is_named():
    q, k, v, g = inputs(n=12)
    v = v.clone()
    v[0, 0, 3, 1] = float("inf")
    with pytest.raises(ValueError, match="v must hold finite values"):
        gated_linear_attention(q, k, v, g)


@pytest.mark.parametrize("per_channel", [True, False])
def test_the_stream_equals_one_call_and_keeps_its_size(per_channel):
    from course_lib.gated import GatedLedgerState

    q, k, v, g = inputs((2,), n=30, per_channel=per_channel)
    whole = gated_linear_attention(q, k, v, g, chunk_size=8)
    stream = GatedLedgerState(chunk_size=8)
    first = stream.extend(q[:, :19], k[:, :19], v[:, :19], g[:, :19])
    size = stream.nbytes
    rest = [stream.step(q[:, t], k[:, t], v[:, t], g[:, t]) for t in range(19, 30)]
    assert torch.allclose(torch.cat([first, torch.stack(rest, dim=1)], dim=1), whole, atol=1e-12)
    assert stream.nbytes == size == 2 * 8 * 5 * 8 and stream.tokens_seen == 30
    with pytest.raises(ValueError, match="do not match the ledger built so far"):
        stream.extend(q[:, :3, :4], k[:, :3, :4], v[:, :3], g[:, :3, :4] if per_channel else g[:, :3])
