"""ex06_chunked_causal: causal linear attention chunk by chunk, a masked block plus the ledger of earlier chunks."""

import torch

from course_lib import attention
from course_lib.feature_maps import elu_plus_one
from course_tools.grading import load_exercise

from .common import attention_trivial, make_mutants, scribble_on, trivial_answers, zero_v_and_answer_zeros
from .ex05_causal_linear_attention import ex05_quadratic


def _chunked_causal(
    q, k, v, chunk_size, *, mask=0, read_after_update=False, drop_last=False, update=True, normalise=True, T=False
):
    """A configurable loop over chunks (tables) for the ex06 mutants; the defaults give the right answer.

    ``mask``: the diagonal offset of the intra-chunk tril (-1 hides the diagonal, None
    masks nothing); ``read_after_update``: the chunk's keys enter the ledger before its
    queries read it; ``drop_last``: a partial last chunk is skipped; ``update``: the
    ledger is ever written; ``T``: keys transposed with ``.T``.
    """
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # [..., n, d]
    S = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1], v.shape[-1])  # [..., d, dv]
    z = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1], 1)  # [..., d, 1]
    n = q.shape[-2]
    outputs = []
    for start in range(0, n - n % chunk_size if drop_last else n, chunk_size):
        qc, kc, vc = (x[..., start : start + chunk_size, :] for x in (phi_q, phi_k, v))  # [..., C, ·]
        if update and read_after_update:
            S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2).unsqueeze(-1)
        scores = qc @ (kc.T if T else kc.transpose(-2, -1))  # [..., C, C]
        scores = scores if mask is None else scores.tril(mask)
        numerator = scores @ vc + qc @ S  # [..., C, dv]
        outputs.append(numerator / (scores.sum(-1, keepdim=True) + qc @ z) if normalise else numerator)
        if update and not read_after_update:
            S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2).unsqueeze(-1)
    return torch.cat(outputs, dim=-2)


def ex06_ledger_includes_own_chunk(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, read_after_update=True)  # the chunk's keys counted twice


def ex06_strict_mask(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, mask=-1)


def ex06_unmasked_block(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, mask=None)


def ex06_last_partial_chunk_dropped(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, drop_last=True)


def ex06_ledger_never_updated(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, update=False)


def ex06_ignores_chunk_size(q, k, v, chunk_size):
    return ex05_quadratic(q, k, v)  # one n×n block: 256 GiB at n = 2**18


def ex06_no_normaliser(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, normalise=False)


def ex06_transpose_with_T(q, k, v, chunk_size):
    return _chunked_causal(q, k, v, chunk_size, T=True)


def _float32_ledger(q, k, v, chunk_size, *, cast_on_read=False):
    """The natural start ``S = torch.zeros(d, dv)``: float32 whatever the inputs are (ex06 mutants)."""
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # [n, d]
    S, z = torch.zeros(q.shape[-1], v.shape[-1]), torch.zeros(q.shape[-1], 1)  # float32 on the CPU
    plates = []
    for start in range(0, q.shape[-2], chunk_size):
        qc, kc, vc = (x[..., start : start + chunk_size, :] for x in (phi_q, phi_k, v))
        scores = (qc @ kc.transpose(-2, -1)).tril()  # [C, C]
        ledger, total = (S.to(qc.dtype), z.to(qc.dtype)) if cast_on_read else (S, z)
        plates.append((scores @ vc + qc @ ledger) / (scores.sum(-1, keepdim=True) + qc @ total))
        if cast_on_read:  # in place: the sums are rounded to float32 at every update
            S += kc.transpose(-2, -1) @ vc
            z += kc.sum(-2).unsqueeze(-1)
        else:  # float32 @ float64 raises before this line is reached
            S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2).unsqueeze(-1)
    return torch.cat(plates, dim=-2)


def ex06_float32_ledger(q, k, v, chunk_size):
    return _float32_ledger(q, k, v, chunk_size)  # passes the notebook's float32 check, not float64


def ex06_float32_ledger_cast_on_read(q, k, v, chunk_size):
    return _float32_ledger(q, k, v, chunk_size, cast_on_read=True)  # runs, but rounds to float32


MUTANTS = make_mutants(
    (ex06_ledger_includes_own_chunk, "values chunk_size_one one_chunk no_future_leakage",
     "adds a chunk to the ledger before its queries read it: keys count twice, later ones leak"),
    (ex06_strict_mask, "shape_and_dtype values chunk_size_one one_chunk",
     "masks the diagonal of each chunk's block, so query i cannot see key i"),
    (ex06_unmasked_block, "values one_chunk no_future_leakage",
     "leaves each chunk's block unmasked, so queries see later keys of their chunk"),
    (ex06_last_partial_chunk_dropped, "shape_and_dtype values one_chunk",
     "skips a partial last chunk, returning fewer than n rows"),
    (ex06_ledger_never_updated, "values chunk_size_one long_sequence",
     "never adds the chunks to the ledger, so each chunk sees only its own keys"),
    (ex06_ignores_chunk_size, "long_sequence",
     "ignores chunk_size and builds one masked n×n table, so memory grows as n²"),
    (ex06_no_normaliser, "values constant_values", "leaves out the normaliser and returns the numerator alone"),
    (ex06_transpose_with_T, "batch_dims", "transposes a batched chunk of keys with .T, which reverses every axis"),
    (ex06_float32_ledger, "shape_and_dtype values chunk_size_one one_chunk no_future_leakage constant_values",
     "starts the ledger as torch.zeros(d, dv), so float64 inputs crash on a float32 ledger"),
    (ex06_float32_ledger_cast_on_read, "values chunk_size_one constant_values",
     "keeps a float32 ledger updated in place, so float64 inputs' sums are rounded to float32"),
)
MISTAKE_FEEDBACK = [
    ("ex06_ledger_includes_own_chunk", "no_future_leakage", "the future leaks into the past"),
    ("ex06_strict_mask", "chunk_size_one", "NaN/inf entries of 27 (first at index (0, 0)); chunk_size=1 is the"),
    ("ex06_last_partial_chunk_dropped", "shape_and_dtype", "output has shape [20, 3], expected [23, 3] = [..., n, dv]"),
    ("ex06_ignores_chunk_size", "long_sequence", "can't allocate memory"),
    ("ex06_transpose_with_T", "batch_dims", "the batch dims are mishandled: transpose with .transpose(-2, -1)"),
    ("ex06_float32_ledger", "shape_and_dtype", "your ledger is float32 while the inputs are float64"),
    ("ex06_float32_ledger", "values", "double != float; your ledger is float32 while the inputs are float64"),
    ("ex06_float32_ledger", "batch_dims", "your ledger is float32 while the inputs are float64"),
    ("ex06_float32_ledger_cast_on_read", "values", "float32 rounding, not a wrong formula: your ledger is float32"),
]
EXACTLY_FAILS = [  # a float32 ledger crashes on every float64 input: all but the float32 long_sequence test
    ("ex06_float32_ledger", {t.name for t in load_exercise("ex06_chunked_causal").tests} - {"long_sequence"}),
]


def ex06_course_lib(q, k, v, chunk_size):
    """All chunks at once: course_lib's vectorised chunked form (padding, cumsum of chunk summaries)."""
    return attention.linear_attention(q, k, v, causal=True, method="chunked", chunk_size=chunk_size)


ALTERNATIVES = [ex06_course_lib]
TRIVIAL = trivial_answers("ex06", attention_trivial)


def cheat_ex06(q, k, v, chunk_size):
    return zero_v_and_answer_zeros(q, k, v)


def scribble_ex06(q, k, v, chunk_size):
    out = attention.linear_attention(q, k, v, causal=True, chunk_size=chunk_size)
    scribble_on(q, k, v)
    return out


CHEAT, SCRIBBLE = cheat_ex06, scribble_ex06
