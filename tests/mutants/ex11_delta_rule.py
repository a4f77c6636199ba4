"""ex11_delta_rule: S ← S + β k̂ (v − Sᵀk̂)ᵀ token by token; query t reads Sᵀq̂ after writing token t."""

import torch
import torch.nn.functional as F

from .common import attention_trivial, make_mutants, trivial_answers


def _delta_rule(q, k, v, beta, *, use_beta=True, read_first=False, normalise=True, sign=1.0, carry=True,
                transposed_read=False, final_read=False, float32_ledger=False):
    """A configurable recurrent delta rule the ex11 mutants are built from; the defaults give the right answer.

    ``float32_ledger``: the natural start ``S = torch.zeros(d, dv)``, float32 whatever the inputs are.
    """
    if normalise:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])  # [..., d, dv]
    S = torch.zeros(q.shape[-1], v.shape[-1]) if float32_ledger else S
    outputs = []
    for t in range(q.shape[-2]):
        q_t, k_t, v_t = q[..., t, :], k[..., t, :], v[..., t, :]
        if not carry:
            S = torch.zeros_like(S)
        if read_first:
            outputs.append((q_t.unsqueeze(-2) @ S).squeeze(-2))
        error = sign * (v_t - (k_t.unsqueeze(-2) @ S).squeeze(-2))  # v_t − Sᵀk_t [..., dv]
        strength = beta[..., t, None] if use_beta else 1.0
        S = S + k_t.unsqueeze(-1) * (strength * error).unsqueeze(-2)
        if not read_first:
            read = (S @ q_t.unsqueeze(-1)).squeeze(-1) if transposed_read else (q_t.unsqueeze(-2) @ S).squeeze(-2)
            outputs.append(read)
    return q @ S if final_read else torch.stack(outputs, dim=-2)


def ex11_float32_ledger(q, k, v, beta):
    return _delta_rule(q, k, v, beta, float32_ledger=True)  # float64 inputs meet a float32 ledger: torch raises


def ex11_ignores_beta(q, k, v, beta):
    return _delta_rule(q, k, v, beta, use_beta=False)


def ex11_reads_before_writing(q, k, v, beta):
    return _delta_rule(q, k, v, beta, read_first=True)


def ex11_unnormalised_keys(q, k, v, beta):
    return _delta_rule(q, k, v, beta, normalise=False)


def ex11_error_sign_flipped(q, k, v, beta):
    return _delta_rule(q, k, v, beta, sign=-1.0)


def ex11_ledger_transposed(q, k, v, beta):
    return _delta_rule(q, k, v, beta, transposed_read=True)  # S q instead of Sᵀq: [..., d], not [..., dv]


def ex11_state_not_carried(q, k, v, beta):
    return _delta_rule(q, k, v, beta, carry=False)


def ex11_reads_final_ledger(q, k, v, beta):
    return _delta_rule(q, k, v, beta, final_read=True)  # every query reads S_nᵀq̂_t: the future leaks into the past


MUTANTS = make_mutants(
    (ex11_float32_ledger, "shape_and_dtype values writes_before_reading exact_read_back key_length_does_not_matter "
                          "no_future_leakage",
     "starts the ledger as torch.zeros(d, dv), so float64 inputs crash on a float32 ledger"),
    (ex11_ignores_beta, "values batch_dims writes_before_reading",
     "ignores β and writes every correction at full strength"),
    (ex11_reads_before_writing, "values batch_dims writes_before_reading exact_read_back",
     "reads the ledger before writing token t, so query t misses its own key-value pair"),
    (ex11_unnormalised_keys, "values batch_dims writes_before_reading exact_read_back key_length_does_not_matter",
     "skips the L2 normalisation of the queries and keys"),
    (ex11_error_sign_flipped, "values batch_dims writes_before_reading exact_read_back",
     "writes the error as Sᵀk − v instead of v − Sᵀk, pushing the ledger away from v"),
    (ex11_ledger_transposed, "shape_and_dtype values batch_dims writes_before_reading exact_read_back "
                             "key_length_does_not_matter no_future_leakage",
     "reads the [d, dv] ledger as S q instead of Sᵀq: a [..., d] output, or a crash"),
    (ex11_state_not_carried, "values batch_dims",  # with β = 1 the last read is still exact
     "resets the ledger to zero at every token, so nothing is carried over"),
    (ex11_reads_final_ledger, "values batch_dims writes_before_reading no_future_leakage",
     "reads every query from the final ledger, so the future leaks into the past"),
)
MISTAKE_FEEDBACK = [
    ("ex11_reads_before_writing", "writes_before_reading", "write token t into the ledger before reading it"),
    ("ex11_error_sign_flipped", "exact_read_back", "(v − Sᵀk̂, not Sᵀk̂ − v)"),
    ("ex11_unnormalised_keys", "key_length_does_not_matter", "scaling q and k by 10 changed the output"),
    ("ex11_reads_final_ledger", "no_future_leakage", "the future leaks into the past"),
    ("ex11_ledger_transposed", "shape_and_dtype", "raised RuntimeError"),  # torch's own words follow
    ("ex11_float32_ledger", "values", "your ledger is float32 while the inputs are float64"),
    ("ex11_float32_ledger", "shape_and_dtype", "create S with q.new_zeros(d, dv)"),
]


def ex11_strength_named_otherwise(q, k, v, strength):
    """The fourth parameter called `strength`, not `beta`: the grader passes every input by position."""
    return _delta_rule(q, k, v, strength)


def ex11_values_by_keys_ledger(q, k, v, beta):
    """The ledger laid out [dv, d] (S ← S + β (v − S k̂) k̂ᵀ, read S q̂) and updated as (I − β k̂k̂ᵀ) form."""
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    S = q.new_zeros(*q.shape[:-2], v.shape[-1], q.shape[-1])  # [..., dv, d]
    eye = torch.eye(q.shape[-1], dtype=q.dtype)
    outputs = []
    for t in range(q.shape[-2]):
        k_t, b = k[..., t, :], beta[..., t, None, None]
        S = S @ (eye - b * k_t.unsqueeze(-1) * k_t.unsqueeze(-2)) + b * v[..., t, :, None] * k_t.unsqueeze(-2)
        outputs.append((S @ q[..., t, :, None]).squeeze(-1))
    return torch.stack(outputs, dim=-2)


ALTERNATIVES = [ex11_values_by_keys_ledger, ex11_strength_named_otherwise]
TRIVIAL = trivial_answers("ex11", attention_trivial)
