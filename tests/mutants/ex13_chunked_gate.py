"""ex13_chunked_gate: the gated ledger with one gate per token, chunk by chunk, with exp(G_i − G_j) kept whole."""

import torch
import torch.nn.functional as F

from course_tools.grading import load_exercise

from .common import attention_trivial, make_mutants, trivial_answers


def _chunked(q, k, v, log_decay, chunk_size, *, split=False, mask_after=False, mask=True, whole_sequence=False,
             decay_state=True, exclusive=False, drop_last=False, read_after_write=False, scale=True,
             float32_ledger=False):
    """A configurable loop over chunks for the ex13 mutants; the defaults give the right answer.

    ``split``: exp(G_i − G_j) computed as exp(G_i)·exp(−G_j) (and exp(G_C − G_j) likewise); ``mask_after``: the
    mask j > i applied by multiplying after exp; ``whole_sequence``: G summed from the sequence's start, not the
    chunk's; ``exclusive``: G_i sums the gates before i, not up to i; ``read_after_write``: the chunk's own
    entries reach S₀ before its queries read it.
    """
    n, dk, dv = q.shape[-2], q.shape[-1], v.shape[-1]
    S = torch.zeros(dk, dv) if float32_ledger else q.new_zeros(*q.shape[:-2], dk, dv)
    G_all, plates = log_decay.cumsum(-1), []
    for a in range(0, n - n % chunk_size if drop_last else n, chunk_size):
        qc, kc, vc = (x[..., a : a + chunk_size, :] for x in (q, k, v))
        g = log_decay[..., a : a + chunk_size]
        G = G_all[..., a : a + chunk_size] if whole_sequence else g.cumsum(-1)
        G = G - g if exclusive else G
        future = torch.ones(G.shape[-1], G.shape[-1], dtype=torch.bool).triu(1)
        if split:  # exp(G_i)·exp(−G_j): inf · 0 once the gates sum below −88
            L = (G.exp().unsqueeze(-1) * (-G).exp().unsqueeze(-2)).tril()
            to_end = (G[..., -1:].exp() * (-G).exp()).unsqueeze(-1)
        else:
            exponent = G.unsqueeze(-1) - G.unsqueeze(-2)
            if not mask:
                L = exponent.exp()
            else:
                L = exponent.exp() * ~future if mask_after else exponent.masked_fill(future, -torch.inf).exp()
            to_end = (G[..., -1:] - G).exp().unsqueeze(-1)
        keep = G[..., -1:, None].exp() if decay_state else 1.0
        write = (kc * to_end).transpose(-2, -1) @ vc
        S = keep * S + write if read_after_write else S
        plates.append(G.exp().unsqueeze(-1) * (qc @ S) + (qc @ kc.transpose(-2, -1) * L) @ vc)
        S = S if read_after_write else keep * S + write
    return (dk ** -0.5 if scale else 1.0) * torch.cat(plates, dim=-2)


def ex13_split_exponent(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, split=True)


def ex13_mask_after_exp(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, mask_after=True)  # exp(G_i − G_j) for j > i is e^(+…)


def ex13_running_product_ratio(q, k, v, log_decay, chunk_size):
    """The masked n×n form with the decay as a ratio of running products: 0/0 once the product underflows."""
    A = log_decay.exp().cumprod(-1)  # exp(G_i), G from the sequence's start [..., n]
    L = (A.unsqueeze(-1) / A.unsqueeze(-2)).tril()
    return q.shape[-1] ** -0.5 * (q @ k.transpose(-2, -1) * L) @ v


def ex13_gate_summed_over_sequence(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, whole_sequence=True)  # S₀ is faded twice


def ex13_state_not_decayed(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, decay_state=False)


def ex13_exclusive_cumsum(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, exclusive=True)


def ex13_last_partial_chunk_dropped(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, drop_last=True)


def ex13_ledger_includes_own_chunk(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, read_after_write=True)


def ex13_unmasked_block(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, mask=False)


def ex13_scale_missing(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, scale=False)


def ex13_float32_ledger(q, k, v, log_decay, chunk_size):
    return _chunked(q, k, v, log_decay, chunk_size, float32_ledger=True)  # float64 @ float32 raises


MUTANTS = make_mutants(
    (ex13_split_exponent, "strong_gates",
     "splits exp(G_i − G_j) as exp(G_i)·exp(−G_j), which overflows float32 for strong gates"),
    (ex13_mask_after_exp, "strong_gates",
     "masks j > i after exp, so e^(G_i − G_j) overflows there and inf · 0 gives NaN"),
    (ex13_running_product_ratio, "strong_gates",
     "divides running products of exp(g), which underflow to 0/0 for strong gates"),
    (ex13_gate_summed_over_sequence, "values any_chunk_size batch_dims strong_gates",
     "sums the gate from the sequence's start, not the chunk's, so S₀ is faded twice"),
    (ex13_state_not_decayed, "values any_chunk_size batch_dims strong_gates",
     "carries S₀ into the next chunk without fading it by exp(G_C)"),
    (ex13_exclusive_cumsum, "values any_chunk_size batch_dims strong_gates",
     "sums the gates before token i, not up to it (an exclusive cumsum): one gate off"),
    (ex13_last_partial_chunk_dropped, "shape_and_dtype values any_chunk_size strong_gates",
     "skips a partial last chunk, returning fewer than n rows"),
    (ex13_ledger_includes_own_chunk, "values any_chunk_size batch_dims no_future_leakage strong_gates",
     "adds a chunk to the ledger before its queries read it: later keys leak"),
    (ex13_unmasked_block, "values any_chunk_size batch_dims no_future_leakage strong_gates",
     "leaves each chunk's block unmasked, so queries see later keys of their chunk"),
    (ex13_scale_missing, "values any_chunk_size batch_dims strong_gates", "leaves out the d_k^−½ scale of the read"),
    (ex13_float32_ledger, "shape_and_dtype values any_chunk_size batch_dims no_future_leakage",
     "starts the ledger as torch.zeros(dk, dv), so float64 inputs crash on a float32 ledger"),
)
OVERFLOW = "exp(−G_j) overflows float32 once a chunk's gates sum below −88"
MISTAKE_FEEDBACK = [
    ("ex13_split_exponent", "strong_gates", "NaN/inf entries"),
    ("ex13_split_exponent", "strong_gates", OVERFLOW),
    ("ex13_split_exponent", "strong_gates", "keep exp(G_i − G_j) as one difference"),
    ("ex13_mask_after_exp", "strong_gates", "mask j > i to −inf BEFORE exp"),
    ("ex13_running_product_ratio", "strong_gates", "a ratio of running products"),
    ("ex13_last_partial_chunk_dropped", "shape_and_dtype", "output has shape [20, 3], expected [23, 3] = [..., n, dv]"),
    ("ex13_ledger_includes_own_chunk", "no_future_leakage", "the future leaks into the past"),
    ("ex13_float32_ledger", "values", "your ledger is float32 while the inputs are float64"),
]
EXACTLY_FAILS = [  # the split exponent is right wherever it is finite: only the strong gates catch it
    ("ex13_split_exponent", {"strong_gates"}),
    ("ex13_mask_after_exp", {"strong_gates"}),
    ("ex13_running_product_ratio", {"strong_gates"}),
    ("ex13_float32_ledger", {t.name for t in load_exercise("ex13_chunked_gate").tests} - {"strong_gates"}),
]


def ex13_masked_matrix(q, k, v, log_decay, chunk_size):
    """One masked n×n block in log space, G from the sequence's start: right, but memory grows as n²."""
    G = log_decay.cumsum(-1)
    future = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).triu(1)
    L = (G.unsqueeze(-1) - G.unsqueeze(-2)).masked_fill(future, -torch.inf).exp()
    return q.shape[-1] ** -0.5 * (q @ k.transpose(-2, -1) * L) @ v


def ex13_token_by_token(q, k, v, log_decay, chunk_size):
    """The recurrence itself, ignoring chunk_size: the same numbers, one token at a time."""
    S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
    plates = []
    for t in range(q.shape[-2]):
        S = log_decay[..., t, None, None].exp() * S + k[..., t, :, None] * v[..., t, None, :]
        plates.append((q[..., t, None, :] @ S).squeeze(-2))
    return q.shape[-1] ** -0.5 * torch.stack(plates, dim=-2)


def ex13_all_chunks_at_once(q, k, v, log_decay, chunk_size):
    """Padded to whole chunks (q = k = v = 0, g = 0 write and forget nothing), every block in one batched matmul,
    then a loop over chunks for the ledger alone."""
    n, C = q.shape[-2], min(chunk_size, q.shape[-2])
    pad = -n % C
    qc, kc, vc = (F.pad(x, (0, 0, 0, pad)).unflatten(-2, (-1, C)) for x in (q, k, v))  # [..., nc, C, ·]
    G = F.pad(log_decay, (0, pad)).unflatten(-1, (-1, C)).cumsum(-1)  # [..., nc, C]
    future = torch.ones(C, C, dtype=torch.bool).triu(1)
    L = (G.unsqueeze(-1) - G.unsqueeze(-2)).masked_fill(future, -torch.inf).exp()
    within = (qc @ kc.transpose(-2, -1) * L) @ vc
    writes = (kc * (G[..., -1:] - G).exp().unsqueeze(-1)).transpose(-2, -1) @ vc  # [..., nc, dk, dv]
    S, plates = torch.zeros_like(writes[..., 0, :, :]), []
    for c in range(G.shape[-2]):
        plates.append(G[..., c, :, None].exp() * (qc[..., c, :, :] @ S) + within[..., c, :, :])
        S = G[..., c, -1, None, None].exp() * S + writes[..., c, :, :]
    return q.shape[-1] ** -0.5 * torch.cat(plates, dim=-2)[..., :n, :]


ALTERNATIVES = [ex13_masked_matrix, ex13_token_by_token, ex13_all_chunks_at_once]
TRIVIAL = trivial_answers("ex13", attention_trivial)
