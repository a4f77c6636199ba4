"""The delta rule: the chunked WY form equals the recurrence, reads back what it wrote, streams, trains, refuses."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.delta import DeltaRuleState, delta_rule_attention, delta_rule_chunked, delta_rule_recurrent
from course_lib.device import seeded_qkv


def make_beta(*shape: int, seed: int = 1, dtype=torch.float64) -> torch.Tensor:
    """Write strengths in [0.1, 1), [*shape] (the last dim is n)."""
    return 0.1 + 0.9 * torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def by_definition(q, k, v, beta):
    """S_t = S_{t−1} + β_t k_t (v_t − S_{t−1}ᵀk_t)ᵀ, o_t = S_tᵀq_t on normalised q, k: one batch entry, plain loops."""
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    S = torch.zeros(q.shape[-1], v.shape[-1], dtype=q.dtype)
    outputs = []
    for t in range(q.shape[0]):
        S = S + beta[t] * torch.outer(k[t], v[t] - S.T @ k[t])
        outputs.append(S.T @ q[t])
    return torch.stack(outputs)


def test_the_recurrent_form_is_the_definition():
    q, k, v = seeded_qkv(n=9, d=4, dv=3)
    beta = make_beta(9)
    got = delta_rule_attention(q, k, v, beta, method="recurrent")
    assert (got - by_definition(q, k, v, beta)).abs().max() < 1e-14


@pytest.mark.parametrize("n, chunk_size", [(1, None), (37, 16), (64, 64), (65, 8), (20, 64), (12, 1)])
def test_the_chunked_form_equals_the_recurrence(n, chunk_size):
    q, k, v = seeded_qkv(2, 3, n=n, d=8, dv=5)
    beta = make_beta(2, 3, n)
    recurrent = delta_rule_attention(q, k, v, beta, method="recurrent")
    chunked = delta_rule_attention(q, k, v, beta, chunk_size=chunk_size)
    assert (chunked - recurrent).abs().max() < 1e-10


def test_both_forms_return_the_same_ledger_from_the_same_start():
    q, k, v = seeded_qkv(2, n=30, d=4, dv=3)
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    beta, start = make_beta(2, 30), torch.randn(2, 4, 3, dtype=torch.float64)
    out_r, S_r = delta_rule_recurrent(q, k, v, beta, start)
    out_c, S_c = delta_rule_chunked(q, k, v, beta, start, chunk_size=7)
    assert (out_r - out_c).abs().max() < 1e-10 and (S_r - S_c).abs().max() < 1e-10


def test_with_beta_one_and_a_unit_key_the_ledger_reads_back_the_value_just_written():
    q, k, v = seeded_qkv(n=6, d=4, dv=3)
    q[-1] = k[-1]  # query the last key right after its write
    out = delta_rule_attention(q, k, v, torch.ones(6, dtype=torch.float64))
    assert (out[-1] - v[-1]).abs().max() < 1e-14
    plain_sum = (F.normalize(k, dim=-1)[-1] @ (F.normalize(k, dim=-1).T @ v))  # linear attention's ledger, unnormalised
    assert (plain_sum - v[-1]).abs().max() > 0.1  # the additive ledger does not: the other pairs interfere


def test_one_step_is_gradient_descent_on_the_read_error():
    _, k, v = seeded_qkv(n=1, d=4, dv=3)
    k_t, v_t, beta = F.normalize(k[0], dim=0), v[0], 0.3
    S = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    loss = 0.5 * (S.T @ k_t - v_t).pow(2).sum()
    (grad,) = torch.autograd.grad(loss, S)
    _, S_next = delta_rule_recurrent(k_t[None], k_t[None], v_t[None], torch.tensor([beta], dtype=torch.float64),
                                     S.detach())
    assert (S_next - (S.detach() - beta * grad)).abs().max() < 1e-14


@pytest.mark.parametrize("method", ["chunked", "recurrent"])
def test_gradcheck(method):
    q, k, v = seeded_qkv(1, 2, n=7, d=3, dv=2)
    beta = make_beta(1, 2, 7)
    inputs = tuple(x.requires_grad_() for x in (q, k, v, beta))
    assert torch.autograd.gradcheck(lambda *a: delta_rule_attention(*a, method=method, chunk_size=3), inputs)


def test_the_streaming_state_equals_one_call_and_keeps_its_size():
    q, k, v = seeded_qkv(2, n=25, d=4, dv=3)
    beta = make_beta(2, 25)
    state = DeltaRuleState(chunk_size=4)
    parts = [state.extend(q[:, :10], k[:, :10], v[:, :10], beta[:, :10])]
    size = state.nbytes
    parts += [state.step(q[:, t], k[:, t], v[:, t], beta[:, t]).unsqueeze(-2) for t in range(10, 15)]
    parts.append(state.extend(q[:, 15:], k[:, 15:], v[:, 15:], beta[:, 15:]))
    assert (torch.cat(parts, dim=-2) - delta_rule_attention(q, k, v, beta)).abs().max() < 1e-12
    assert state.tokens_seen == 25 and state.nbytes == size == 2 * 4 * 3 * 8
    state.reset()
    assert state.S is None and state.nbytes == 0


def test_gradients_flow_through_the_stream_until_detached():
    q, k, v = seeded_qkv(n=8, d=3, dv=2)
    v.requires_grad_()
    state = DeltaRuleState()
    state.extend(q[:4], k[:4], v[:4], make_beta(4))
    later = state.extend(q[4:], k[4:], v[4:], make_beta(4, seed=2))
    (grad,) = torch.autograd.grad(later.sum(), v)
    assert grad[:4].abs().sum() > 0  # the first piece's values reach the later outputs through the ledger
    state.detach_()
    assert not state.S.requires_grad


def test_half_inputs_run_in_float32_and_come_back_in_their_dtype():
    q, k, v = seeded_qkv(2, n=10, d=4, dv=3, dtype=torch.float32)
    beta = make_beta(2, 10, dtype=torch.float32)
    expected = delta_rule_attention(q, k, v, beta)
    for dtype in (torch.float16, torch.bfloat16):
        got = delta_rule_attention(*(x.to(dtype) for x in (q, k, v, beta)))
        assert got.dtype == dtype and (got.float() - expected).abs().max() < 0.05


def test_beta_per_head_broadcasts_over_the_batch():
    q, k, v = seeded_qkv(2, 3, n=6, d=4, dv=2)
    beta = make_beta(3, 6)  # [heads, n]
    got = delta_rule_attention(q, k, v, beta)
    expected = delta_rule_attention(q, k, v, beta.expand(2, 3, 6))
    assert torch.equal(got, expected)


REFUSALS = {
    "beta above one": (dict(beta=torch.full((5,), 1.5, dtype=torch.float64)), "beta must lie in (0, 1]"),
    "beta zero": (dict(beta=torch.zeros(5, dtype=torch.float64)), "beta must lie in (0, 1]"),
    "beta wrong length": (dict(beta=torch.ones(4, dtype=torch.float64)), "beta must be [..., n]"),
    "beta float32": (dict(beta=torch.ones(5)), "beta must share dtype"),
    "beta not a tensor": (dict(beta=0.5), "beta must be a torch.Tensor"),
    "beta batch": (dict(q=torch.ones(3, 5, 4, dtype=torch.float64), beta=torch.ones(2, 5, dtype=torch.float64)),
                   "dims must broadcast, got q (3, 5, 4), k (5, 4), v (5, 3), beta (2, 5, 1)"),
    "k and v lengths": (dict(v=torch.ones(4, 3, dtype=torch.float64)), "k and v must have the same length"),
    "method": (dict(method="parallel"), "method must be one of"),
    "chunk size": (dict(chunk_size=0), "chunk_size must be a positive int"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_bad_arguments_are_refused_by_name(case):
    q, k, v = seeded_qkv(n=5, d=4, dv=3)
    args = dict(q=q, k=k, v=v, beta=make_beta(5))
    change, message = REFUSALS[case]
    args |= change
    extra = {key: args.pop(key) for key in ("method", "chunk_size") if key in args}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        delta_rule_attention(args["q"], args["k"], args["v"], args["beta"], **extra)


def test_a_stream_refuses_inputs_of_another_size():
    q, k, v = seeded_qkv(n=5, d=4, dv=3)
    state = DeltaRuleState()
    state.extend(q, k, v, make_beta(5))
    with pytest.raises(ValueError, match="do not match the ledger built so far"):
        state.extend(q[:, :3], k[:, :3], v, make_beta(5))


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from("qkv"), position=st.integers(0, 6 * 3 - 1),
       bad=st.sampled_from([float("nan"), float("inf"), -float("inf")]),
       method=st.sampled_from(["chunked", "recurrent"]))
def test_a_bad_value_anywhere_is_refused_with_its_name(name, position, bad, method):
    q, k, v = seeded_qkv(n=6, d=3, dv=3)
    inputs = {"q": q, "k": k, "v": v}
    inputs[name].view(-1)[position] = bad
    with pytest.raises(ValueError, match=f"^{name} must hold finite values"):
        delta_rule_attention(q, k, v, make_beta(6), method=method)


# --- the gated delta rule (Gated DeltaNet): S_t = exp(g_t)(I − β_t k_t k_tᵀ)S_{t−1} + β_t k_t v_tᵀ ------------


def make_log_decay(*shape: int, strength: float = 1.0, seed: int = 2, dtype=torch.float64) -> torch.Tensor:
    """Log gates in (−strength, 0], [*shape] (the last dim is n)."""
    return -strength * torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def gated_by_definition(q, k, v, beta, log_decay):
    """The gated rule with the matrices written out: one batch entry, plain loops."""
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    eye = torch.eye(q.shape[-1], dtype=q.dtype)
    S = torch.zeros(q.shape[-1], v.shape[-1], dtype=q.dtype)
    outputs = []
    for t in range(q.shape[0]):
        S = log_decay[t].exp() * (eye - beta[t] * torch.outer(k[t], k[t])) @ S + beta[t] * torch.outer(k[t], v[t])
        outputs.append(S.T @ q[t])
    return torch.stack(outputs)


@pytest.mark.parametrize("method", ["recurrent", "chunked"])
def test_the_gated_rule_is_its_definition(method):
    q, k, v = seeded_qkv(n=11, d=4, dv=3)
    beta, g = make_beta(11), make_log_decay(11)
    got = delta_rule_attention(q, k, v, beta, log_decay=g, method=method, chunk_size=4)
    assert (got - gated_by_definition(q, k, v, beta, g)).abs().max() < 1e-13


@pytest.mark.parametrize("n, chunk_size", [(1, None), (37, 16), (64, 64), (65, 8), (20, 64)])
def test_the_gated_chunked_form_equals_the_recurrence_on_ragged_lengths(n, chunk_size):
    q, k, v = seeded_qkv(2, 3, n=n, d=8, dv=5)
    beta, g = make_beta(2, 3, n), make_log_decay(2, 3, n)
    recurrent = delta_rule_attention(q, k, v, beta, log_decay=g, method="recurrent")
    chunked = delta_rule_attention(q, k, v, beta, log_decay=g, chunk_size=chunk_size)
    assert (recurrent - chunked).abs().max() < 1e-10


def test_a_gate_of_zero_is_the_ungated_rule():
    q, k, v = seeded_qkv(2, n=30, d=8, dv=5)
    beta = make_beta(2, 30)
    ungated = delta_rule_attention(q, k, v, beta, chunk_size=8)
    assert torch.allclose(delta_rule_attention(q, k, v, beta, log_decay=torch.zeros_like(beta), chunk_size=8), ungated,
                          atol=1e-14)


def test_strong_gates_stay_finite_in_float32_and_match_the_float64_recurrence():
    q, k, v = seeded_qkv(1, 2, n=200, d=16, dv=8)
    beta, g = make_beta(1, 2, 200), make_log_decay(1, 2, 200, strength=10.0)
    exact = delta_rule_attention(q, k, v, beta, log_decay=g, method="recurrent")
    fast = delta_rule_attention(*(x.float() for x in (q, k, v, beta)), log_decay=g.float(), chunk_size=64)
    assert torch.isfinite(fast).all()
    assert (fast.double() - exact).abs().max() < 1e-4 * exact.abs().max()


def test_the_gated_stream_equals_one_call():
    q, k, v = seeded_qkv(2, n=25, d=8, dv=5)
    beta, g = make_beta(2, 25), make_log_decay(2, 25)
    whole = delta_rule_attention(q, k, v, beta, log_decay=g, chunk_size=4)
    stream = DeltaRuleState(chunk_size=4)
    first = stream.extend(q[:, :17], k[:, :17], v[:, :17], beta[:, :17], g[:, :17])
    rest = [stream.step(q[:, t], k[:, t], v[:, t], beta[:, t], g[:, t]) for t in range(17, 25)]
    assert torch.allclose(torch.cat([first, torch.stack(rest, dim=1)], dim=1), whole, atol=1e-12)


@pytest.mark.parametrize("method", ["recurrent", "chunked"])
def test_gradcheck_through_the_gate(method):
    q, k, v = (x.requires_grad_() for x in seeded_qkv(1, n=6, d=3, dv=2))
    beta, g = make_beta(1, 6).requires_grad_(), make_log_decay(1, 6).requires_grad_()
    run = lambda q, k, v, beta, g: delta_rule_attention(q, k, v, beta, log_decay=g.clamp(max=0), method=method,
                                                        chunk_size=4)
    assert torch.autograd.gradcheck(run, (q, k, v, beta, g))


@pytest.mark.parametrize("bad, message", [
    (lambda g: g + 0.5, "log_decay must be finite and <= 0"),
    (lambda g: g.unsqueeze(-1).expand(2, 12, 8), r"log_decay must be \[..., n\] = \[..., 12\]"),
    (lambda g: g[:, :-1], r"log_decay must be \[..., n\]"),
])
def test_a_bad_gate_is_refused_by_name(bad, message):
    q, k, v = seeded_qkv(2, n=12, d=8, dv=5)
    with pytest.raises(ValueError, match=message):
        delta_rule_attention(q, k, v, make_beta(2, 12), log_decay=bad(make_log_decay(2, 12)))
