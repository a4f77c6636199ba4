"""ex01_softmax_attention: softmax(q kᵀ/√d) v, causal or not."""

import math

import torch

from .common import attention_trivial, make_mutants, scribble_on, trivial_answers, zero_v_and_answer_zeros


def softmax_attention(q, k, v, causal=False, *, scale=None, mask_offset=0, softmax_dim=-1, stable=True, T=False):
    """A configurable softmax attention the ex01 mutants are built from; the defaults give the right answer."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    k_t = k.T if T else k.transpose(-2, -1)  # .T reverses every axis of a batched k
    scores = q @ k_t * scale  # [..., n, m]
    if causal:
        n, m = scores.shape[-2:]
        future = torch.ones(n, m, dtype=torch.bool).triu(1 + mask_offset)
        scores = scores.masked_fill(future, float("-inf"))
    if stable:
        weights = torch.softmax(scores, dim=softmax_dim)
    else:
        weights = scores.exp() / scores.exp().sum(dim=softmax_dim, keepdim=True)
    return weights @ v


def ex01_no_sqrt_d(q, k, v, causal=False):
    return softmax_attention(q, k, v, causal, scale=1.0)


def ex01_softmax_over_queries(q, k, v, causal=False):
    return softmax_attention(q, k, v, causal, softmax_dim=-2)


def ex01_mask_hides_diagonal(q, k, v, causal=False):
    return softmax_attention(q, k, v, causal, mask_offset=-1)


def ex01_mask_shows_next_key(q, k, v, causal=False):
    return softmax_attention(q, k, v, causal, mask_offset=1)


def ex01_ignores_causal(q, k, v, causal=False):
    return softmax_attention(q, k, v)


def ex01_transpose_with_T(q, k, v, causal=False):
    return softmax_attention(q, k, v, causal, T=True)


def ex01_naive_exp(q, k, v, causal=False):
    return softmax_attention(q, k, v, causal, stable=False)


def ex01_returns_weights(q, k, v, causal=False):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)


MUTANTS = make_mutants(
    (ex01_no_sqrt_d, "values causal_values batch_dims", "forgets the 1/√d scaling of the scores"),
    (ex01_softmax_over_queries, "values no_future_leakage",
     "takes the softmax over the queries (dim −2) instead of over the keys"),
    (ex01_mask_hides_diagonal, "causal_values",
     "masks the diagonal too, so query i cannot see key i (and row 0 is all NaN)"),
    (ex01_mask_shows_next_key, "causal_values no_future_leakage",
     "shifts the mask by one, so query i also sees the next key i + 1"),
    (ex01_ignores_causal, "causal_values no_future_leakage", "ignores `causal` and never masks the future"),
    (ex01_transpose_with_T, "batch_dims", "transposes a batched k with .T, which reverses every axis"),
    (ex01_naive_exp, "large_logits",
     "exponentiates the scores without subtracting the max, so large logits overflow"),
    (ex01_returns_weights, "shape_and_dtype values",
     "returns the softmax weights instead of weights @ v (and ignores `causal`)"),
)
TRIVIAL = trivial_answers("ex01", attention_trivial)
TRIVIAL_FEEDBACK = [
    ("ex01_trivial_zeros", "shape_and_dtype", "the output stays the same when q changes"),
    ("ex01_trivial_zeros", "no_future_leakage", "outputs 0..3 stay the same when q at positions 0..3 changes"),
    ("ex01_trivial_copy", "shape_and_dtype", "the output stays the same when q changes"),
    ("ex01_trivial_random", "shape_and_dtype", "two calls with the same inputs gave different outputs"),
]


def cheat_ex01(q, k, v, causal=False):
    return zero_v_and_answer_zeros(q, k, v)


def scribble_ex01(q, k, v, causal=False):
    out = softmax_attention(q, k, v, causal)
    scribble_on(q, k, v)  # after computing: must not cost points
    return out


CHEAT, SCRIBBLE = cheat_ex01, scribble_ex01
