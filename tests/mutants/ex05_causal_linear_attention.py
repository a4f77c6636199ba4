"""ex05_causal_linear_attention: elu + 1 linear attention where query i reads the ledger after key i."""

import torch

from course_lib import attention
from course_lib.feature_maps import elu_plus_one

from .common import attention_trivial, make_mutants, scribble_on, trivial_answers, zero_v_and_answer_zeros


def _causal_linear(q, k, v, *, prefix=True, exclusive=False, normalise=True, eps=0.0, batched=True):
    """A configurable causal elu+1 linear attention by prefix sums, for the ex05 mutants."""
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # [..., n, d]
    outer = torch.einsum("...nd,...ne->...nde" if batched else "nd,ne->nde", phi_k, v)  # [..., n, d, dv]
    if prefix:
        S, z = outer.cumsum(-3), phi_k.cumsum(-2)  # [..., n, d, dv], [..., n, d]: the ledger after key i
    else:
        S, z = outer.sum(-3, keepdim=True), phi_k.sum(-2, keepdim=True)  # every query reads the whole sequence
    if exclusive:
        S, z = S - outer, z - phi_k  # the ledger before key i: query 0 reads an empty one
    numerator = torch.einsum("...nd,...nde->...ne", phi_q, S)  # [..., n, dv]
    if not normalise:
        return numerator
    return numerator / ((phi_q * z).sum(-1, keepdim=True) + eps)


def ex05_sums_all_keys(q, k, v):
    return _causal_linear(q, k, v, prefix=False)


def ex05_exclusive_prefix(q, k, v):
    return _causal_linear(q, k, v, exclusive=True)  # 0 / 0 at position 0


def ex05_exclusive_prefix_eps(q, k, v):
    return _causal_linear(q, k, v, exclusive=True, eps=1e-6)  # position 0 gets 0 instead of NaN


def ex05_no_normaliser(q, k, v):
    return _causal_linear(q, k, v, normalise=False)


def ex05_einsum_without_batch(q, k, v):
    return _causal_linear(q, k, v, batched=False)


def ex05_quadratic(q, k, v):
    scores = (elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)).tril()  # [..., n, n]: 4 TiB at n = 2**20
    return scores @ v / scores.sum(-1, keepdim=True)


def ex05_returns_ledger(q, k, v):
    return torch.einsum("...nd,...ne->...nde", elu_plus_one(k), v).cumsum(-3)  # [..., n, d, dv]: never read


def ex05_float64_ledger(q, k, v):
    return _causal_linear(q.double(), k.double(), v.double())  # float64 out for float32 in


MUTANTS = make_mutants(
    (ex05_sums_all_keys, "values no_future_leakage first_position",
     "sums the whole sequence into the ledger, so the future leaks into the past"),
    (ex05_exclusive_prefix, "shape_and_dtype values first_position",
     "uses an exclusive prefix sum: query i misses key i and query 0 gets 0/0 = NaN"),
    (ex05_exclusive_prefix_eps, "values first_position",
     "uses an exclusive prefix sum plus ε: query i misses key i and query 0 outputs 0"),
    (ex05_no_normaliser, "values first_position constant_values",
     "leaves out the normaliser φ(q_i)ᵀz_i and returns the numerator alone"),
    (ex05_einsum_without_batch, "batch_dims",
     "builds the outer products with einsum('nd,ne->nde'), which fails on batched inputs"),
    (ex05_quadratic, "long_sequence", "builds the masked n×n score table, so memory grows as n²"),
    (ex05_returns_ledger, "shape_and_dtype",
     "returns the running ledger [..., n, d, dv] without letting the queries read it"),
    (ex05_float64_ledger, "shape_and_dtype long_sequence",
     "accumulates in float64 and forgets to cast the output back to the inputs' dtype"),
)
MISTAKE_FEEDBACK = [
    ("ex05_sums_all_keys", "no_future_leakage", "output at position 0 changed when only the tokens after position 3"),
    ("ex05_exclusive_prefix", "first_position", "(first at index (0, 0)); query i reads the ledger AFTER key i"),
    ("ex05_exclusive_prefix_eps", "first_position", "output at position 0 is [0.0, 0.0, 0.0], expected v_0 = ["),
    ("ex05_no_normaliser", "constant_values", "each query's weights must sum to 1"),
    ("ex05_quadratic", "long_sequence", "can't allocate memory"),
    ("ex05_float64_ledger", "shape_and_dtype", "output has dtype torch.float64, expected torch.float32"),
]


def ex05_course_lib(q, k, v):
    """The chunkwise-parallel route (course_lib, chunks of 64) instead of one cumulative sum."""
    return attention.linear_attention(q, k, v, causal=True)


def ex05_float64_ledger_cast_back(q, k, v):
    """The ledger accumulated in float64 for accuracy, the plates returned in the inputs' dtype."""
    return ex05_float64_ledger(q, k, v).to(q.dtype)


ALTERNATIVES = [ex05_course_lib, ex05_float64_ledger_cast_back]
TRIVIAL = trivial_answers("ex05", attention_trivial)


def cheat_ex05(q, k, v):
    return zero_v_and_answer_zeros(q, k, v)


def scribble_ex05(q, k, v):
    out = attention.linear_attention(q, k, v, causal=True, chunk_size=64)
    scribble_on(q, k, v)
    return out


CHEAT, SCRIBBLE = cheat_ex05, scribble_ex05
