"""ex02_linear_attention: φ(q)ᵀ Σ φ(k) vᵀ / φ(q)ᵀ Σ φ(k) with φ = elu + 1, non-causal."""

import math

import torch
import torch.nn.functional as F

from course_lib import attention
from course_lib.feature_maps import elu_plus_one

from .common import attention_trivial, make_mutants, scribble_on, trivial_answers, zero_v_and_answer_zeros


def _linear_attention(q, k, v, *, phi=elu_plus_one, normalise=True, unsqueeze=True, T=False):
    """A configurable linear attention the ex02 mutants are built from."""
    phi_q, phi_k = phi(q), phi(k)  # [..., n, d], [..., m, d]
    phi_k_t = phi_k.T if T else phi_k.transpose(-2, -1)
    numerator = phi_q @ (phi_k_t @ v)  # [..., n, dv]
    if not normalise:
        return numerator
    denominator = phi_q @ phi_k.sum(-2).unsqueeze(-1)  # [..., n, 1]
    return numerator / (denominator if unsqueeze else denominator.squeeze(-1))


def ex02_no_normaliser(q, k, v):
    return _linear_attention(q, k, v, normalise=False)


def ex02_softmax_instead_of_kernel(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def ex02_relu_features(q, k, v):
    return _linear_attention(q, k, v, phi=F.relu)


def ex02_exp_features(q, k, v):
    return _linear_attention(q, k, v, phi=torch.exp)


def ex02_elu_without_plus_one(q, k, v):
    return _linear_attention(q, k, v, phi=F.elu)


def ex02_divides_by_n(q, k, v):
    return _linear_attention(q, k, v, normalise=False) / k.shape[-2]


def ex02_transpose_with_T(q, k, v):
    return _linear_attention(q, k, v, T=True)


def ex02_quadratic(q, k, v):
    scores = elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)  # [..., n, m]
    return scores @ v / scores.sum(-1, keepdim=True)


def ex02_returns_blackboard(q, k, v):
    return elu_plus_one(k).transpose(-2, -1) @ v  # [..., d, dv]: written, never read


def ex02_normaliser_not_unsqueezed(q, k, v):
    return _linear_attention(q, k, v, unsqueeze=False)


MUTANTS = make_mutants(
    (ex02_no_normaliser, "values constant_values",
     "leaves out the normaliser φ(q)ᵀΣφ(k) and returns the numerator alone"),
    (ex02_softmax_instead_of_kernel, "values", "computes ordinary softmax attention instead of the elu + 1 kernel"),
    (ex02_relu_features, "values", "uses relu as the feature map instead of elu + 1"),
    (ex02_exp_features, "values", "uses exp as the feature map instead of elu + 1"),
    (ex02_elu_without_plus_one, "values", "uses elu without the + 1, so features and weights can be negative"),
    (ex02_divides_by_n, "values constant_values",
     "divides the numerator by the number of keys instead of by the normaliser"),
    (ex02_transpose_with_T, "batch_dims", "transposes a batched φ(k) with .T, which reverses every axis"),
    (ex02_quadratic, "long_sequence",
     "builds the n×m table φ(Q)φ(K)ᵀ before multiplying by V, so memory grows as n·m"),
    (ex02_returns_blackboard, "shape_and_dtype",
     "returns the blackboard φ(K)ᵀV [..., d, dv] without letting the queries read it"),
    (ex02_normaliser_not_unsqueezed, "shape_and_dtype values",
     "divides by a [..., n] normaliser, which broadcasts along dv instead of n"),
)
MISTAKE_FEEDBACK = [
    ("ex02_normaliser_not_unsqueezed", "shape_and_dtype", "give the normaliser a trailing axis, [..., n, 1]"),
    ("ex02_normaliser_not_unsqueezed", "constant_values", "give the normaliser a trailing axis, [..., n, 1]"),
]
TRIVIAL = trivial_answers("ex02", attention_trivial)


def cheat_ex02(q, k, v):
    return zero_v_and_answer_zeros(q, k, v)


def scribble_ex02(q, k, v):
    out = attention.linear_attention(q, k, v)
    scribble_on(q, k, v)
    return out


CHEAT, SCRIBBLE = cheat_ex02, scribble_ex02
