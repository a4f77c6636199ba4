"""Every public attention path is differentiable: gradcheck in float64 on small shapes.

The fast causal path has its own backward (``fast_forms._ChunkLoop``); the rest is autograd.
A stream trains through ``LinearAttentionState.extend`` (the ledger carries the gradient). The gated
ledgers (``GATED``) are checked through q, k, v, the gate and the initial ledger as well.
"""

import pytest
import torch
from torch.autograd import gradcheck as full_gradcheck

from course_lib.attention import METHODS, kernel_attention, linear_attention, softmax_attention
from course_lib.delta import delta_rule_chunked, delta_rule_recurrent
from course_lib.device import seeded_qkv
from course_lib.feature_maps import relu
from course_lib.gated import gated_chunked, gated_recurrent
from course_lib.positional import (
    cosformer_attention,
    cosformer_kernel_attention,
    rope_kernel_attention,
    rope_linear_attention,
    window_kernel_attention,
    window_linear_attention,
)
from course_lib.random_features import PerformerFeatures
from course_lib.retention import retention_kernel_attention
from course_lib.state import LinearAttentionState


def gradcheck(fn, inputs) -> bool:
    """torch's gradcheck in its fast mode: analytic vs numerical gradient along random directions
    (one Jacobian-vector product instead of the whole Jacobian; a wrong gradient still fails it)."""
    return full_gradcheck(fn, inputs, fast_mode=True)


def leaves(*batch, n=7, d=4, dv=3, seed=0, positive=False, scale=1.0):
    """Seeded q, k, v that require grad; ``positive`` shifts q, k so ReLU features are never all zero;
    ``scale`` shrinks q, k (trig random features are signed: small inputs keep their normaliser > 0)."""
    q, k, v = seeded_qkv(*batch, n=n, d=d, dv=dv, seed=seed)
    if positive:
        q, k = q.abs() + 0.1, k.abs() + 0.1
    return tuple(x.requires_grad_() for x in (q * scale, k * scale, v))


MAPS = {
    "elu_plus_one": None,
    "relu": relu,
    "performer_positive": PerformerFeatures(4, 6, generator=torch.Generator().manual_seed(1)),
    "performer_trig": PerformerFeatures(4, 32, kind="trig", generator=torch.Generator().manual_seed(1)),
}
DECAYS = {"none": None, "scalar": 0.8, "per_head": torch.tensor([0.5, 0.9, 1.0], dtype=torch.float64)}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("feature_map", MAPS.values(), ids=MAPS.keys())
def test_linear_attention_is_differentiable_for_every_method_and_map(method, causal, feature_map):
    q, k, v = leaves(2, 3, positive=feature_map is relu, scale=0.3 if feature_map is MAPS["performer_trig"] else 1.0)
    options = {} if feature_map is None else {"feature_map": feature_map}
    assert gradcheck(lambda a, b, c: linear_attention(a, b, c, causal=causal, method=method, chunk_size=3, **options),
                     (q, k, v))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("decay", [d for d in DECAYS.values() if d is not None], ids=["scalar", "per_head"])
def test_decayed_linear_attention_is_differentiable(method, decay):
    q, k, v = leaves(2, 3)
    assert gradcheck(lambda a, b, c: linear_attention(a, b, c, causal=True, method=method, chunk_size=3, decay=decay),
                     (q, k, v))


def test_a_learned_decay_gets_its_gradient():
    q, k, v = leaves(3)
    gamma = torch.tensor([0.5, 0.9, 0.7], dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda a, g: linear_attention(a, k, v, causal=True, decay=g, chunk_size=4), (q, gamma))
    assert gradcheck(lambda g: retention_kernel_attention(q, k, v, g), (gamma,))


@pytest.mark.parametrize("causal", [False, True])
def test_the_references_are_differentiable(causal):
    q, k, v = leaves(2)
    assert gradcheck(lambda a, b, c: softmax_attention(a, b, c, causal=causal), (q, k, v))
    assert gradcheck(lambda a, b, c: kernel_attention(a, b, c, causal=causal), (q, k, v))
    assert gradcheck(lambda a, b, c: retention_kernel_attention(a, b, c, 0.7), (q, k, v))


POSITIONAL = {
    "rope_linear": lambda q, k, v, causal: rope_linear_attention(q, k, v, causal=causal, chunk_size=4),
    "rope_kernel": lambda q, k, v, causal: rope_kernel_attention(q, k, v, causal=causal),
    "cosformer": lambda q, k, v, causal: cosformer_attention(q, k, v, causal=causal, chunk_size=4),
    "cosformer_kernel": lambda q, k, v, causal: cosformer_kernel_attention(q, k, v, causal=causal),
    "window_ledger": lambda q, k, v, causal: window_linear_attention(q, k, v, 3),
    "window_banded": lambda q, k, v, causal: window_linear_attention(q, k, v, 3, method="banded"),
    "window_kernel": lambda q, k, v, causal: window_kernel_attention(q, k, v, 3),
}


@pytest.mark.parametrize("form", POSITIONAL.values(), ids=POSITIONAL.keys())
@pytest.mark.parametrize("causal", [False, True])
def test_the_positional_forms_are_differentiable(form, causal):
    q, k, v = leaves(2, positive=True)  # positive: cosFormer's ReLU features never vanish
    assert gradcheck(lambda a, b, c: form(a, b, c, causal), (q, k, v))


GATED = {  # (q, k, v, log gate [..., n, dk] or [..., n], ledger [..., dk, dv]) -> (out, ledger after)
    "gla_split": lambda q, k, v, g, S: gated_chunked(q, k, v, g, S, chunk_size=2),  # 4 chunks, 1 pass
    "gla_two_levels": lambda q, k, v, g, S: gated_chunked(q, k, v, g, S, chunk_size=5, sub_chunk_size=2,
                                                          split_limit=0),
    "gla_one_level": lambda q, k, v, g, S: gated_chunked(q, k, v, g, S, chunk_size=5, sub_chunk_size=5,
                                                         split_limit=0),
    "gla_recurrent": gated_recurrent,
    "mamba2_split": lambda q, k, v, g, S: gated_chunked(q, k, v, g[..., :1], S, chunk_size=3, scale=0.5),
    "mamba2_masked": lambda q, k, v, g, S: gated_chunked(q, k, v, g[..., :1], S, chunk_size=3, split_limit=0),
    "gated_delta_chunked": lambda q, k, v, g, S: delta_rule_chunked(q, k, v, g[..., 1].sigmoid(), S, g[..., 0],
                                                                    chunk_size=3),
    "gated_delta_recurrent": lambda q, k, v, g, S: delta_rule_recurrent(q, k, v, g[..., 1].sigmoid(), S, g[..., 0]),
}


@pytest.mark.parametrize("form", GATED.values(), ids=GATED.keys())
def test_the_gated_ledgers_are_differentiable_in_the_gate_and_the_ledger(form):
    """n = 7 over chunks of 5 or 3 (and sub-chunks of 2): ragged at both levels. The delta rule reads its
    β from the second gate channel (through a sigmoid) and its log gate from the first."""
    q, k, v = leaves(2, d=4, dv=3)
    g = (-torch.rand(2, 7, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))).requires_grad_()
    S = torch.randn(2, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).requires_grad_()
    assert gradcheck(lambda *x: form(*x[:3], x[3].clamp(max=0), x[4]), (q, k, v, g, S))


@pytest.mark.parametrize("decay", DECAYS.values(), ids=DECAYS.keys())
def test_a_stream_trains_through_its_ledger(decay):
    """Two extends and three steps: the gradient of the last output reaches the first chunk's keys."""
    q, k, v = leaves(3, n=10)

    def stream(a, b, c):
        state = LinearAttentionState(chunk_size=3, decay=decay)
        outputs = [state.extend(a[:, :5], b[:, :5], c[:, :5])]
        outputs += [state.step(a[:, t], b[:, t], c[:, t]).unsqueeze(-2) for t in range(5, 8)]
        outputs.append(state.extend(a[:, 8:], b[:, 8:], c[:, 8:]))
        return torch.cat(outputs, dim=-2), state.S, state.z

    assert gradcheck(stream, (q, k, v))
    out, _, _ = stream(q, k, v)
    (grad_k,) = torch.autograd.grad(out[:, -1].sum(), k)
    assert grad_k[:, 0].abs().sum() > 0  # the first key reached the last output through the ledger


def test_detach_cuts_the_stream_but_keeps_the_ledger():
    q, k, v = leaves(n=6)
    state = LinearAttentionState()
    state.extend(q[:3], k[:3], v[:3])
    S = state.S.detach().clone()
    state.detach_()
    assert torch.equal(state.S, S) and not state.S.requires_grad
    out = state.extend(q[3:], k[3:], v[3:])
    (grad_k,) = torch.autograd.grad(out.sum(), k)
    assert grad_k[:3].abs().sum() == 0 and grad_k[3:].abs().sum() > 0
