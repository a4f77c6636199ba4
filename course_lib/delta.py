"""The delta rule: a ledger that corrects what it stores instead of only adding to it (notebook 12).

DeltaNet (Schlag et al. 2021) reads the ledger at the new key, compares the reading with the new
value and writes back only the difference. In the course's layout (S [..., dk, dv], read as q S):

    S_t = S_{t−1} + β_t k_t (v_t − S_{t−1}ᵀ k_t)ᵀ = (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ,    o_t = S_tᵀ q_t

This is one step of online gradient descent on ½‖Sᵀk_t − v_t‖² with step size β_t ∈ (0, 1]; with
β = 1 and ‖k_t‖ = 1 the ledger reads back exactly v_t at k_t right after the write. There is no
normaliser. ``delta_rule_attention`` L2-normalises q and k (as DeltaNet does) before either form,
so every I − β k kᵀ has norm ≤ 1 and the ledger cannot blow up.

* ``delta_rule_recurrent``: the definition, one token at a time (the oracle).
* ``delta_rule_chunked``: chunks of C tokens in the WY / UT form (Yang et al. 2024). Inside a chunk
  that starts from S₀, write S_i = S₀ + Σ_{j≤i} k_j u_jᵀ; the pseudo-values u_i = β_i(v_i − S_{i−1}ᵀk_i)
  then solve a unit lower-triangular system, and everything else is matmuls:

      (I + stril(diag(β) K Kᵀ)) U = diag(β)(V − K S₀)   =>   U = T diag(β) V − T diag(β) K S₀
      O = Q S₀ + tril(Q Kᵀ) U,        S_C = S₀ + Kᵀ U

  T diag(β) V and T diag(β) K do not depend on S₀: one batched triangular solve for every chunk at
  once; only U's S₀ part, O and S_C are sequential (a loop over n/C chunks).

The gated delta rule (Gated DeltaNet, Yang, Kautz & Hatamizadeh 2025) fades the ledger first:
S_t = exp(g_t)(I − β_t k_t k_tᵀ)S_{t−1} + β_t k_t v_tᵀ, g_t ≤ 0 per token and head. With G_i the
running sum of g from the chunk's start and Γ_ij = exp(G_i − G_j) for j ≤ i (one difference, so
every factor lies in [0, 1] however strong the gates: notebook 13's float32 trap), the chunk becomes

      (I + stril(diag(β)(K Kᵀ ∘ Γ))) U = diag(β) V − diag(β e^G) K S₀
      O = (Q ∘ e^G) S₀ + tril(Q Kᵀ ∘ Γ) U,        S_C = e^{G_C} S₀ + (K ∘ e^{G_C − G})ᵀ U

and g = 0 gives back the ungated rule above.

Both are differentiable (out-of-place torch ops; ``solve_triangular`` has a backward).
"""

import torch
import torch.nn.functional as F

from course_lib.gated import exp_below_diagonal, in_chunks
from course_lib.state import CarriedLedger
from course_lib.validation import (
    Suspects,
    broadcast_batch,
    check_choice,
    check_inputs,
    check_int,
    check_log_decay,
    check_result,
    require_tensor,
)

METHODS = ("chunked", "recurrent")
DEFAULT_CHUNK = 64


def delta_rule_recurrent(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, state: torch.Tensor | None = None,
    log_decay: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The definition token by token: (out [..., n, dv], S after [..., dk, dv]).

    q, k [..., n, dk] (normalised by the caller), v [..., n, dv], beta [..., n]; ``state`` is the
    ledger before the first token (zeros when None); ``log_decay`` [..., n] (≤ 0, or None for no
    gate) fades the ledger by exp(g_t) before token t reads and writes it (the gated delta rule).
    """
    S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1]) if state is None else state  # [..., dk, dv]
    outputs = []
    for t in range(q.shape[-2]):
        k_t, v_t = k[..., t, :], v[..., t, :]  # [..., dk], [..., dv]
        if log_decay is not None:
            S = log_decay[..., t, None, None].exp() * S  # exp(g_t) S_{t−1}
        error = v_t - (k_t.unsqueeze(-2) @ S).squeeze(-2)  # v_t − Sᵀk_t [..., dv]
        S = S + k_t.unsqueeze(-1) * (beta[..., t, None] * error).unsqueeze(-2)  # + β k_t errorᵀ
        outputs.append((q[..., t, :].unsqueeze(-2) @ S).squeeze(-2))  # S_tᵀ q_t [..., dv]
    return torch.stack(outputs, dim=-2), S


def delta_rule_chunked(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, state: torch.Tensor | None = None,
    log_decay: torch.Tensor | None = None, *, chunk_size: int = DEFAULT_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The WY / UT chunked form (module docstring): (out [..., n, dv], S after [..., dk, dv]).

    Same arguments as ``delta_rule_recurrent``. A last chunk shorter than C is padded with
    tokens of k = v = q = 0, β = 0 and g = 0, which write and forget nothing (their u is 0) and are
    cut from the output. The gate enters as Γ_ij = exp(G_i − G_j), one difference of running sums.
    """
    n, dk, dv = q.shape[-2], q.shape[-1], v.shape[-1]
    C = min(chunk_size, n)
    log_decay = torch.zeros_like(beta) if log_decay is None else log_decay
    q, k, v, beta, log_decay = (in_chunks(x, C) for x in (q, k, v, beta.unsqueeze(-1), log_decay.unsqueeze(-1)))
    # [..., nc, C, ·], beta and log_decay [..., nc, C, 1]
    G = log_decay.cumsum(-2)  # running log gate from each chunk's start [..., nc, C, 1]
    gamma = exp_below_diagonal(G - G.transpose(-1, -2))  # Γ_ij = exp(G_i − G_j) for j ≤ i [..., nc, C, C]
    lower = ((beta * k) @ k.transpose(-1, -2) * gamma).tril(-1)  # stril(diag(β)(K Kᵀ ∘ Γ))
    solved = torch.linalg.solve_triangular(lower, torch.cat([beta * v, beta * G.exp() * k], dim=-1),
                                           upper=False, unitriangular=True)  # the unit diagonal is implied
    u_values, w = solved.split([dv, dk], dim=-1)  # T diag(β) V [..., nc, C, dv], T diag(β e^G) K [..., nc, C, dk]
    scores = q @ k.transpose(-1, -2) * gamma  # tril(Q Kᵀ ∘ Γ) [..., nc, C, C]
    q_read, k_write = q * G.exp(), k * (G[..., -1:, :] - G).exp()  # Q ∘ e^G, K ∘ e^(G_C − G)
    keep = G[..., -1, :].exp().unsqueeze(-1)  # exp(G_C) [..., nc, 1, 1]
    S = q.new_zeros(*q.shape[:-3], dk, dv) if state is None else state  # [..., dk, dv]
    outputs = []
    # unbind, not indexing: an index's backward writes a zero tensor of the whole operand, once per chunk
    for u_c, w_c, q_c, scores_c, keep_c, k_c in zip(*(x.unbind(-3) for x in (u_values, w, q_read, scores, keep,
                                                                            k_write))):
        u = u_c - w_c @ S  # [..., C, dv]
        outputs.append(q_c @ S + scores_c @ u)  # [..., C, dv]
        S = keep_c * S + k_c.transpose(-1, -2) @ u
    return torch.cat(outputs, dim=-2)[..., :n, :], S


def delta_rule_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, *, method: str = "chunked",
    chunk_size: int | None = None, log_decay: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal delta-rule attention (DeltaNet), [..., n, dv] (notebook 12 §2).

    q, k [..., n, dk], v [..., n, dv]; beta [..., n], one write strength in (0, 1] per token (and
    head: leading dims broadcast like q's). q and k are L2-normalised here, over their last dim.
    ``method``: "chunked" (the WY form, C = ``chunk_size`` or 64) or "recurrent" (the definition);
    they agree to rounding. ``log_decay`` [..., n]: the gated delta rule (Gated DeltaNet, Yang, Kautz &
    Hatamizadeh 2025), S_t = exp(g_t)(I − β_t k_t k_tᵀ)S_{t−1} + β_t k_t v_tᵀ, one log gate ≤ 0 per
    token (and head); None is g = 0. Differentiable in q, k, v, beta and log_decay. float16/bfloat16
    run in float32 and come back in their own dtype. For a stream fed in pieces use ``DeltaRuleState``.
    """
    out, _ = _run(q, k, v, beta, method, chunk_size, None, log_decay)
    return out


class DeltaRuleState(CarriedLedger):
    """A stream's delta-rule ledger S [..., dk, dv]: ``extend`` (or ``step``, one token) equals
    ``delta_rule_attention`` over the whole stream, with memory that does not grow (notebook 12 §2).

    When the inputs require grad so does the ledger (truncated backprop: ``detach_`` cuts it).
    """

    def __init__(self, *, method: str = "chunked", chunk_size: int | None = None):
        self.method = check_choice("method", method, METHODS)
        self.chunk_size = check_int("chunk_size", chunk_size, optional=True)
        super().__init__()

    def extend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
               log_decay: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs [..., n, dv] of n new tokens (q, k [..., n, dk], v [..., n, dv], beta and log_decay [..., n])."""
        return self._carry(*_run(q, k, v, beta, self.method, self.chunk_size, self.S, log_decay), q.shape[-2])

    def step(self, q_t: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor, beta_t: torch.Tensor,
             log_decay_t: torch.Tensor | None = None) -> torch.Tensor:
        """One token: q_t, k_t [..., dk], v_t [..., dv], beta_t and log_decay_t [...] -> o_t [..., dv]."""
        for name, x in (("q_t", q_t), ("k_t", k_t), ("v_t", v_t)):
            require_tensor(name, x, min_dims=1)
        require_tensor("beta_t", beta_t, min_dims=0)
        if log_decay_t is not None:
            require_tensor("log_decay_t", log_decay_t, min_dims=0)
            log_decay_t = log_decay_t.unsqueeze(-1)
        return self.extend(q_t.unsqueeze(-2), k_t.unsqueeze(-2), v_t.unsqueeze(-2), beta_t.unsqueeze(-1),
                           log_decay_t).squeeze(-2)


def _check_beta(beta: object, q: torch.Tensor) -> torch.Tensor:
    """beta [..., n] with q's dtype and device (its leading dims are checked with q's, k's and v's in ``_run``)."""
    require_tensor("beta", beta, min_dims=1)
    if beta.dtype != q.dtype or beta.device != q.device:
        raise ValueError(f"beta must share dtype and device with q, got {beta.dtype}/{beta.device} "
                         f"and {q.dtype}/{q.device}")
    if beta.shape[-1] != q.shape[-2]:
        raise ValueError(f"beta must be [..., n] with one value per token, n = {q.shape[-2]}, got {tuple(beta.shape)}")
    return beta


def _run(q, k, v, beta, method, chunk_size, state, log_decay=None):
    """Check, normalise, run one form, check the result with one host sync (``validation.check_result``):
    (out, S after). A NaN or ±∞ anywhere in q, k or v reaches the output (normalising ±∞ gives NaN,
    and every later output reads the ledger); β is a gate, checked for (0, 1] in the same sync."""
    inputs = check_inputs(q, k, v, causal=True, method=method, methods=METHODS, chunk_size=chunk_size)
    beta = _check_beta(beta, q)
    if state is not None and state.shape[-2:] != (q.shape[-1], v.shape[-1]):
        raise ValueError(f"q, k with dk={q.shape[-1]} and v with dv={v.shape[-1]} do not match the ledger built "
                         f"so far, [dk, dv] = {list(state.shape[-2:])}; call reset() for a new stream")
    q_n, k_n = (F.normalize(x, dim=-1) for x in (inputs.q, inputs.k))  # ‖q‖ = ‖k‖ = 1 (0 stays 0)
    gates = {} if log_decay is None else {"log_decay": check_log_decay(log_decay, q, per_channel=False)}  # [..., n, 1]
    batch = broadcast_batch(q=q, k=k, v=v, beta=beta[..., None], **gates)  # beta [..., n] read as [..., n, 1]
    q_n, k_n, v_w = (x.expand(*batch, *x.shape[-2:]) for x in (q_n, k_n, inputs.v))
    beta_w = beta.to(inputs.q.dtype).expand(*batch, beta.shape[-1])
    g_w = None if log_decay is None else gates["log_decay"].squeeze(-1).to(inputs.q.dtype).expand(*batch, q.shape[-2])
    if method == "recurrent":
        out, S = delta_rule_recurrent(q_n, k_n, v_w, beta_w, state, g_w)
    else:
        out, S = delta_rule_chunked(q_n, k_n, v_w, beta_w, state, g_w, chunk_size=inputs.chunk_size or DEFAULT_CHUNK)
    suspects = Suspects({"q": q, "k": k, "v": v}, gates={"beta": beta}, overflow="the ledger overflowed; rescale v")
    check_result(out, None, 0.0, suspects)
    return out.to(inputs.dtype), S
