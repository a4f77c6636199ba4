"""The lean one-token step: the same outputs, ledger and refusals as ``extend``, token after token."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.attention import linear_attention
from course_lib.device import seeded_qkv
from course_lib.feature_maps import elu_plus_one, relu
from course_lib.random_features import PerformerFeatures
from course_lib.state import LinearAttentionState

MAPS = {"elu_plus_one": elu_plus_one, "relu": relu,
        "performer": PerformerFeatures(4, 6, generator=torch.Generator().manual_seed(1), kind="positive")}


def fed_by_steps(state: LinearAttentionState, q, k, v, *, forbid_extend_after_first: pytest.MonkeyPatch | None = None):
    """Outputs [..., n, dv] of ``state.step`` token by token; optionally fail if a later token calls ``extend``."""
    outputs = [state.step(q[..., 0, :], k[..., 0, :], v[..., 0, :])]
    if forbid_extend_after_first is not None:
        forbid_extend_after_first.setattr(state, "extend", lambda *args: pytest.fail("step left the fast path"))
    outputs += [state.step(q[..., t, :], k[..., t, :], v[..., t, :]) for t in range(1, q.shape[-2])]
    return torch.stack(outputs, dim=-2)


@pytest.mark.parametrize("name", MAPS)
@pytest.mark.parametrize("decay", [None, 0.9, "per_head"])
@pytest.mark.parametrize("eps", [0.0, 1e-3])
def test_the_fast_step_equals_causal_linear_attention(name, decay, eps, monkeypatch):
    q, k, v = seeded_qkv(2, 3, n=12, d=4, dv=5)
    if name == "relu":  # a row of q with no positive entry has no normaliser under ReLU
        q, k = q.abs(), k.abs()
    gamma = torch.tensor([[0.5, 0.8, 1.0]], dtype=q.dtype) if decay == "per_head" else decay  # [1, heads]
    state = LinearAttentionState(MAPS[name], eps=eps, decay=gamma)
    got = fed_by_steps(state, q, k, v, forbid_extend_after_first=monkeypatch)
    expected = linear_attention(q, k, v, feature_map=MAPS[name], causal=True, eps=eps, decay=gamma)
    assert (got - expected).abs().max() < 1e-12
    assert state.tokens_seen == 12


def test_a_float64_ledger_and_half_inputs_match_extend():
    q, k, v = seeded_qkv(2, n=9, d=4, dv=3, dtype=torch.float32)
    for dtype, ledger_dtype in ((torch.float32, torch.float64), (torch.float16, None), (torch.bfloat16, None)):
        a, b, c = (x.to(dtype) for x in (q, k, v))
        by_steps = fed_by_steps(LinearAttentionState(ledger_dtype=ledger_dtype), a, b, c)
        by_extend = LinearAttentionState(ledger_dtype=ledger_dtype).extend(a, b, c)
        gap = (by_steps.double() - by_extend.double()).abs().max()
        assert by_steps.dtype == dtype
        assert gap <= (1e-6 if dtype == torch.float32 else 0.0), f"{dtype}: steps differ from extend by {gap}"


def test_steps_between_chunks_keep_one_ledger():
    q, k, v = seeded_qkv(3, n=20, d=4, dv=2)
    state = LinearAttentionState()
    parts = [state.extend(q[:, :5], k[:, :5], v[:, :5]), fed_by_steps(state, q[:, 5:15], k[:, 5:15], v[:, 5:15]),
             state.extend(q[:, 15:], k[:, 15:], v[:, 15:])]
    assert (torch.cat(parts, dim=-2) - linear_attention(q, k, v, causal=True)).abs().max() < 1e-12


def test_an_earlier_ledger_is_not_overwritten_by_later_steps():
    q, k, v = seeded_qkv(2, n=4, d=3)
    state = LinearAttentionState()
    state.step(q[:, 0], k[:, 0], v[:, 0])
    state.step(q[:, 1], k[:, 1], v[:, 1])
    S, z = state.S, state.z
    S_copy, z_copy = S.clone(), z.clone()
    state.step(q[:, 2], k[:, 2], v[:, 2])
    assert torch.equal(S, S_copy) and torch.equal(z, z_copy) and not torch.equal(state.S, S)


FUZZ = settings(max_examples=60, deadline=None)


@FUZZ
@given(name=st.sampled_from(sorted(MAPS)), which=st.sampled_from("qkv"),
       bad=st.sampled_from([math.nan, math.inf, -math.inf]), head=st.integers(0, 2), column=st.integers(0, 3))
def test_a_bad_token_on_the_fast_path_is_refused_like_extend_and_leaves_the_ledger(name, which, bad, head, column):
    q, k, v = seeded_qkv(3, n=4, d=4, dv=4)
    q, k = q.abs(), k.abs()  # every map, ReLU too, has a normaliser > 0 for the good tokens
    state = LinearAttentionState(MAPS[name])
    fed_by_steps(state, q[:, :3], k[:, :3], v[:, :3])
    S, z = state.S.clone(), state.z.clone()
    token = {"q": q[:, 3].clone(), "k": k[:, 3].clone(), "v": v[:, 3].clone()}
    token[which][head, column] = bad
    with pytest.raises(ValueError, match=f"^{which} must hold finite values, found 1 NaN/inf entries$"):
        state.step(*token.values())
    assert torch.equal(state.S, S) and torch.equal(state.z, z) and state.tokens_seen == 3


@pytest.mark.parametrize("name", ["elu_plus_one", "relu"])
def test_an_underflowing_query_on_the_fast_path_is_a_degenerate_normaliser(name):
    q, k, v = seeded_qkv(2, n=3, d=4)
    state = LinearAttentionState(MAPS[name])
    fed_by_steps(state, q[:, :2].abs(), k[:, :2].abs(), v[:, :2])
    with pytest.raises(ValueError, match="degenerate normaliser: .* for 1 of 2 queries"):
        state.step(torch.stack([q[0, 2].abs(), torch.full((4,), -2000.0, dtype=q.dtype)]), k[:, 2], v[:, 2])
    assert state.tokens_seen == 2


def test_a_token_that_needs_a_gradient_goes_through_extend():
    q, k, v = seeded_qkv(2, n=3, d=4)
    state = LinearAttentionState()
    fed_by_steps(state, q[:, :2], k[:, :2], v[:, :2])
    q_t = q[:, 2].clone().requires_grad_()
    (grad,) = torch.autograd.grad(state.step(q_t, k[:, 2], v[:, 2]).sum(), q_t)
    whole = q.clone().requires_grad_()
    (expected,) = torch.autograd.grad(linear_attention(whole, k, v, causal=True)[:, 2].sum(), whole)
    assert (grad - expected[:, 2]).abs().max() < 1e-12 and grad.abs().sum() > 0
