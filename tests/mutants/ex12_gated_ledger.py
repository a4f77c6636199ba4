"""ex12_gated_ledger: S ← diag(exp(g_t)) S + k_t v_tᵀ token by token, o_t = d_k^−½ S_tᵀq_t; returns (out, S)."""

import torch

from .common import make_mutants, rows_of, trivial_answers


def _gated(q, k, v, log_decay, state=None, *, gate_after_write=False, sign=1.0, gate_axis=-1, token_gate=(None, None),
           by_size=False, use_state=True, normaliser=False, scale=True, read_first=False, final_read=False,
           scale_in_state=False):
    """A configurable recurrent gated ledger the ex12 mutants are built from; the defaults give the right answer.

    ``gate_axis``: where exp(g_t) [..., dk] is unsqueezed (−2 fades S's dv columns instead of its dk rows);
    ``token_gate``: how a gate per token [..., n] is indexed at token t (``(None,)`` gives [..., 1], not
    [..., 1, 1]); ``by_size``: the two gate shapes told apart by the last dim's size, not by the number of dims.
    """
    dk, dv = q.shape[-1], v.shape[-1]
    c = dk ** -0.5 if scale else 1.0
    per_channel = log_decay.shape[-1] == dk if by_size else log_decay.dim() == q.dim()
    S = q.new_zeros(*q.shape[:-2], dk, dv) if state is None or not use_state else state
    z = q.new_zeros(*q.shape[:-2], dk)  # the normaliser's sum of faded keys
    outputs = []
    for t in range(q.shape[-2]):
        if per_channel:
            keep = (sign * log_decay[..., t, :]).exp().unsqueeze(gate_axis)  # [..., dk, 1]
        else:
            keep = (sign * log_decay[..., t][(..., *token_gate)]).exp()  # [..., 1, 1]
        q_t, write = q[..., t, :], (c if scale_in_state else 1.0) * k[..., t, :].unsqueeze(-1) * v[..., t, :].unsqueeze(-2)
        if read_first:
            outputs.append(c * (q_t.unsqueeze(-2) @ S).squeeze(-2))  # S_{t−1}ᵀ q_t
        S = keep * (S + write) if gate_after_write else keep * S + write
        if normaliser:
            z = (keep[..., 0] if per_channel else keep[..., 0, 0, None]) * z + k[..., t, :]
        if not read_first:
            read = (q_t.unsqueeze(-2) @ S).squeeze(-2)  # S_tᵀ q_t [..., dv]
            outputs.append((1.0 if scale_in_state else c) * (read / (z * q_t).sum(-1, keepdim=True) if normaliser
                                                             else read))
    out = torch.stack(outputs, dim=-2)
    return (c * (q @ S) if final_read else out), S


def ex12_gate_after_write(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, gate_after_write=True)  # exp(g_t)(S + k vᵀ): token t fades itself


def ex12_gate_sign_flipped(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, sign=-1.0)  # exp(−g) ≥ 1: the past grows instead of fading


def ex12_channel_gate_on_values_axis(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, gate_axis=-2)  # [..., 1, dk] × [..., dk, dv]: a crash unless dk = dv


def ex12_token_gate_on_wrong_axis(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, token_gate=(None,))  # [..., 1]: the heads meet S's rows


def ex12_gate_shape_by_size(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, by_size=True)  # a gate per token with n = dk taken per channel


def ex12_state_ignored(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, use_state=False)


def ex12_normaliser_kept(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, normaliser=True)


def ex12_scale_missing(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, scale=False)


def ex12_scale_folded_into_state(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, scale_in_state=True)  # right outputs from zeros, a wrong state


def ex12_reads_before_writing(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, read_first=True)  # query t misses window t's own entry


def ex12_reads_final_ledger(q, k, v, log_decay, state=None):
    return _gated(q, k, v, log_decay, state, final_read=True)  # every query reads S_n: the future leaks


MUTANTS = make_mutants(
    (ex12_gate_after_write, "per_channel_gates scalar_gates given_state chained_calls batch_dims",
     "fades after writing, S = exp(g_t)(S + k vᵀ), so each token's own entry is faded too"),
    (ex12_gate_sign_flipped, "per_channel_gates scalar_gates given_state chained_calls batch_dims",
     "multiplies by exp(−g_t) ≥ 1, so the past grows instead of fading"),
    (ex12_channel_gate_on_values_axis, "shape_and_dtype per_channel_gates chained_calls batch_dims no_future_leakage",
     "unsqueezes a per-channel gate on the wrong side, so it meets S's dv axis, not dk"),
    (ex12_token_gate_on_wrong_axis, "batch_dims",
     "shapes a gate per token [..., 1], not [..., 1, 1]: with head dims it scales the wrong axis"),
    (ex12_gate_shape_by_size, "scalar_gates",
     "tells the gate's shapes apart by size, so a gate per token with n = dk looks per channel"),
    (ex12_state_ignored, "given_state chained_calls batch_dims",
     "starts every call from zeros, ignoring the state it is given"),
    (ex12_normaliser_kept, "per_channel_gates scalar_gates given_state chained_calls batch_dims",
     "divides by a normaliser q_tᵀz_t that the gated ledger does not have"),
    (ex12_scale_missing, "per_channel_gates scalar_gates given_state chained_calls batch_dims",
     "leaves out the d_k^−½ scale of the read"),
    (ex12_scale_folded_into_state, "per_channel_gates scalar_gates given_state chained_calls batch_dims",
     "folds d_k^−½ into the ledger, so the state it hands on is scaled"),
    (ex12_reads_before_writing, "per_channel_gates scalar_gates given_state chained_calls batch_dims",
     "reads the ledger before writing token t, so query t misses its own key-value pair"),
    (ex12_reads_final_ledger, "per_channel_gates scalar_gates given_state chained_calls batch_dims no_future_leakage",
     "reads every query from the final ledger, so the future leaks into the past"),
)
MISTAKE_FEEDBACK = [
    ("ex12_state_ignored", "chained_calls", "must start from the state the first returned"),
    ("ex12_state_ignored", "given_state", "S_{−1} is the state given, not zeros"),
    ("ex12_scale_folded_into_state", "per_channel_gates", "the outputs are right, but the state"),
    ("ex12_gate_shape_by_size", "scalar_gates", "tell the gate's two shapes apart by their number of dims"),
    ("ex12_channel_gate_on_values_axis", "per_channel_gates", "the gate meets the ledger S [..., dk, dv] on the wrong"),
    ("ex12_token_gate_on_wrong_axis", "batch_dims", "the batch dims are mishandled"),
    ("ex12_reads_final_ledger", "no_future_leakage", "the future leaks into the past"),
]


def ex12_masked_matrix(q, k, v, gate, start=None):
    """No loop over tokens: o_i = d_k^−½ [Σ_{j≤i} Σ_c q_ic k_jc exp(G_ic − G_jc) v_j + (q_i ∘ exp(G_i))ᵀS₀],
    with G the running sum of the gate, masked to −∞ above the diagonal before exp; parameters named otherwise."""
    dk, n = q.shape[-1], q.shape[-2]
    gates = gate if gate.dim() == q.dim() else gate.unsqueeze(-1).expand(*gate.shape, dk)  # [..., n, dk]
    G = gates.cumsum(-2)  # [..., n, dk]
    future = torch.ones(n, n, dtype=torch.bool).triu(1)[..., None]
    weights = (G.unsqueeze(-2) - G.unsqueeze(-3)).masked_fill(future, -torch.inf).exp()  # [..., i, j, dk]
    out = torch.einsum("...ic,...jc,...ijc,...jd->...id", q, k, weights, v)
    S = (k * (G[..., -1:, :] - G).exp()).transpose(-2, -1) @ v  # Σ_j (k_j ∘ exp(G_n − G_j)) v_jᵀ
    if start is not None:
        out = out + (q * G.exp()) @ start
        S = S + G[..., -1, :, None].exp() * start
    return dk ** -0.5 * out, S


def ex12_gate_expanded_returns_a_list(q, k, v, log_decay, state=None):
    """The loop with the gate broadcast by expanding it to [..., n, dk] first, returning a list."""
    gates = log_decay if log_decay.dim() == q.dim() else log_decay[..., None].expand_as(q)
    out, S = _gated(q, k, v, gates, state)
    return [out, S]


ALTERNATIVES = [ex12_masked_matrix, ex12_gate_expanded_returns_a_list]


def _trivial(kind):
    """(q, k, v, g, state=None) -> zeros, v's rows or random numbers, with a ledger of the same kind."""

    def answer(q, k, v, log_decay, state=None):
        out_shape, state_shape = (*q.shape[:-1], v.shape[-1]), (*q.shape[:-2], q.shape[-1], v.shape[-1])
        if kind == "zeros":
            return torch.zeros(out_shape, dtype=q.dtype), torch.zeros(state_shape, dtype=q.dtype)
        if kind == "copy":
            return rows_of(q, v), (torch.zeros(state_shape, dtype=q.dtype) if state is None else state.clone())
        return torch.randn(out_shape, dtype=q.dtype), torch.randn(state_shape, dtype=q.dtype)

    return answer


TRIVIAL = trivial_answers("ex12", _trivial)
