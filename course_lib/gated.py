"""The gated ledger: a ledger whose forgetting is read from the input, token by token (notebook 13).

Notebook 07's decay fades every entry by one fixed γ. Mamba-2 (Dao & Gu 2024) and GLA (Yang et al.
2024) let each token choose how much of the past to keep, through a log gate g_t ≤ 0:

    S_t = diag(exp(g_t)) S_{t−1} + k_t v_tᵀ,     o_t = scale · S_tᵀ q_t         (S [..., dk, dv])

g_t is [dk] (one gate per key channel, GLA) or one number (one per head and token, Mamba-2: the
diag is then exp(g_t)·I). There is no normaliser φ(q)ᵀz: modern heads put a norm on the output.

Unrolled, key j reaches query i ≥ j through the product of the gates in between,
exp(G_i − G_j) with G the running sum of g: O = (L ∘ Q Kᵀ) V with L_ij = exp(G_i − G_j) for a scalar
gate, the "state-space duality" of Mamba-2. A chunked form must take that exponent as one difference:
splitting it as exp(G_i) · exp(−G_j), the way a fixed decay can be split (``retention``), overflows
float32 once a chunk's gates sum below −88 (a strong gate of −10 a token does it in 9 tokens).

* ``gated_recurrent``: the definition, one token at a time (the oracle).
* ``gated_chunked``: chunks of C tokens. Inside a chunk entered with S₀, with G_i = Σ_{t ≤ i} g_t
  counted from the chunk's start (so every exponent below is ≤ 0 and every factor lies in [0, 1]):

      o_i = scale · [ (q_i ∘ exp(G_i))ᵀ S₀ + Σ_{j ≤ i} (Σ_c q_ic k_jc exp(G_ic − G_jc)) v_j ]
      S_C = diag(exp(G_C)) S₀ + Σ_j (k_j ∘ exp(G_C − G_j)) v_jᵀ

  A scalar gate makes the middle term (Q Kᵀ ∘ L) V, a [C, C] mask; per-channel gates need the
  [C, C, dk] tensor of exp(G_ic − G_jc) (GLA's fast kernels avoid it with a second level of chunks).

Both are differentiable in q, k, v, the gate and the initial ledger (out-of-place torch ops; the
exponents are masked to −∞ above the diagonal *before* exp, so no inf·0 reaches the gradient).
"""

import torch
import torch.nn.functional as F

from course_lib.state import CarriedLedger
from course_lib.validation import (
    Suspects,
    broadcast_batch,
    check_choice,
    check_inputs,
    check_int,
    check_log_decay,
    check_number,
    check_result,
    require_tensor,
)

METHODS = ("chunked", "recurrent")
DEFAULT_CHUNK = 64


def gated_recurrent(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor, state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The definition token by token: (unscaled out [..., n, dv], S after [..., dk, dv]).

    q, k [..., n, dk], v [..., n, dv], log_decay [..., n, dk] or [..., n, 1] (a scalar gate), state the
    ledger before the first token [..., dk, dv].
    """
    S, outputs = state, []
    for t in range(q.shape[-2]):
        keep = log_decay[..., t, :].exp().unsqueeze(-1)  # diag(exp(g_t)) as [..., dk or 1, 1]
        S = keep * S + k[..., t, :].unsqueeze(-1) * v[..., t, :].unsqueeze(-2)  # + k_t v_tᵀ
        outputs.append((q[..., t, :].unsqueeze(-2) @ S).squeeze(-2))  # S_tᵀ q_t [..., dv]
    return torch.stack(outputs, dim=-2), S


def gated_chunked(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor, state: torch.Tensor,
    *, chunk_size: int = DEFAULT_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunked form (module docstring): same arguments and result as ``gated_recurrent``.

    A last chunk shorter than C is padded with tokens of q = k = v = 0 and g = 0, which write
    nothing and forget nothing, and are cut from the output.
    """
    n = q.shape[-2]
    C = min(chunk_size, n)
    pad = -n % C
    q, k, v, log_decay = (F.pad(x, (0, 0, 0, pad)).unflatten(-2, (-1, C)) for x in (q, k, v, log_decay))  # [..., nc, C, ·]
    G = log_decay.cumsum(-2)  # running log gate from each chunk's start [..., nc, C, dk or 1]
    G_last = G[..., -1:, :]  # the whole chunk's [..., nc, 1, dk or 1]
    future = torch.ones(C, C, dtype=torch.bool, device=q.device).triu(1)  # j > i
    exponent = (G.unsqueeze(-2) - G.unsqueeze(-3)).masked_fill(future[..., None], -torch.inf)  # G_i − G_j [.., C, C, dk or 1]
    if log_decay.shape[-1] == 1:  # a scalar gate: Q Kᵀ ∘ L
        scores = (q @ k.transpose(-1, -2)) * exponent.squeeze(-1).exp()  # [..., nc, C, C]
    else:  # one gate per channel: Σ_c q_ic k_jc exp(G_ic − G_jc)
        scores = torch.einsum("...ic,...jc,...ijc->...ij", q, k, exponent.exp())
    within = scores @ v  # [..., nc, C, dv]
    q_read = q * G.exp()  # q_i ∘ exp(G_i) [..., nc, C, dk]
    k_write = k * (G_last - G).exp()  # k_j ∘ exp(G_C − G_j) [..., nc, C, dk]
    writes = k_write.transpose(-1, -2) @ v  # what each chunk adds [..., nc, dk, dv]
    keep = G_last.transpose(-1, -2).exp()  # diag(exp(G_C)) as [..., nc, dk or 1, 1]
    S, outputs = state, []
    for c in range(q.shape[-3]):
        outputs.append(q_read[..., c, :, :] @ S + within[..., c, :, :])  # [..., C, dv]
        S = keep[..., c, :, :] * S + writes[..., c, :, :]
    return torch.cat(outputs, dim=-2)[..., :n, :], S


def gated_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor, *, scale: float | None = None,
    method: str = "chunked", chunk_size: int | None = None, initial_state: torch.Tensor | None = None,
    return_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Causal gated linear attention, no normaliser: o_t = scale · S_tᵀ q_t [..., n, dv] (notebook 13).

    q, k [..., n, dk], v [..., n, dv]. ``log_decay``: the log of each token's gate, every entry ≤ 0 and
    finite, either [..., n, dk] (as many dims as q: one gate per key channel, GLA) or [..., n] (one
    fewer: one per head and token, Mamba-2); leading dims broadcast with q's. ``scale``: default dk^−½.
    ``method``: "chunked" (C = ``chunk_size`` or 64, stable in float32 for strong gates) or
    "recurrent" (the definition); they agree to rounding. ``initial_state`` [..., dk, dv]: the ledger
    before the first token (zeros when None); ``return_state``: also return the ledger after the last,
    so calls chain: two calls passing the state on equal one call over the joined sequence.
    Differentiable in q, k, v, log_decay and initial_state. float16/bfloat16 run in float32 and come
    back in their own dtype (the state stays float32).
    """
    inputs = check_inputs(q, k, v, causal=True, method=method, methods=METHODS, chunk_size=chunk_size)
    dk, dv = q.shape[-1], v.shape[-1]
    scale = dk ** -0.5 if scale is None else check_number("scale", scale)
    gates = check_log_decay(log_decay, q)  # [..., n, dk or 1]
    batch = broadcast_batch(q=q, k=k, v=v, log_decay=gates)
    q_w, k_w, v_w = (x.expand(*batch, *x.shape[-2:]) for x in (inputs.q, inputs.k, inputs.v))
    gates = gates.to(inputs.q.dtype).expand(*batch, *gates.shape[-2:])
    state = _check_state(initial_state, batch, dk, dv, inputs.q)
    form = gated_recurrent if method == "recurrent" else gated_chunked
    extra = {} if method == "recurrent" else {"chunk_size": inputs.chunk_size or DEFAULT_CHUNK}
    out, S = form(q_w, k_w, v_w, gates, state, **extra)
    out = check_result(out * scale, None, 0.0, Suspects({"q": q, "k": k, "v": v},
                                                        overflow="the ledger overflowed; rescale v"))
    out = out.to(inputs.dtype)
    return (out, S) if return_state else out


def _check_state(state: object, batch: torch.Size, dk: int, dv: int, like: torch.Tensor) -> torch.Tensor:
    """The ledger to start from, [*batch, dk, dv] in the working dtype (zeros for None)."""
    if state is None:
        return like.new_zeros(*batch, dk, dv)
    require_tensor("initial_state", state)
    if state.device != like.device or not state.dtype.is_floating_point:
        raise ValueError(f"initial_state must be a floating tensor on {like.device}, got {state.dtype}/{state.device}")
    if state.shape[-2:] != (dk, dv):
        raise ValueError(f"initial_state must be [..., dk, dv] = [..., {dk}, {dv}], got {tuple(state.shape)}")
    try:
        return state.to(like.dtype).expand(*batch, dk, dv)
    except RuntimeError:
        raise ValueError(f"initial_state {tuple(state.shape)} must broadcast to the batch dims {tuple(batch)}") from None


class GatedLedgerState(CarriedLedger):
    """A stream's gated ledger S [..., dk, dv]: ``extend`` (or ``step``, one token) equals
    ``gated_linear_attention`` over the whole stream, in memory that does not grow (notebook 13).

    ``scale``, ``method`` and ``chunk_size`` as in ``gated_linear_attention``.
    """

    def __init__(self, *, scale: float | None = None, method: str = "chunked", chunk_size: int | None = None):
        self.options = {"scale": check_number("scale", scale, optional=True),
                        "method": check_choice("method", method, METHODS),
                        "chunk_size": check_int("chunk_size", chunk_size, optional=True)}
        super().__init__()

    def extend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor) -> torch.Tensor:
        """Outputs [..., n, dv] of n new tokens (arguments as ``gated_linear_attention``'s)."""
        if self.S is not None and self.S.shape[-2:] != (q.shape[-1], v.shape[-1]):
            raise ValueError(f"q, k with dk={q.shape[-1]} and v with dv={v.shape[-1]} do not match the ledger built "
                             f"so far, [dk, dv] = {list(self.S.shape[-2:])}; call reset() for a new stream")
        out, S = gated_linear_attention(q, k, v, log_decay, initial_state=self.S, return_state=True, **self.options)
        return self._carry(out, S, q.shape[-2])

    def step(self, q_t: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor, log_decay_t: torch.Tensor) -> torch.Tensor:
        """One token: q_t, k_t [..., dk], v_t [..., dv], log_decay_t [..., dk] or [...] -> o_t [..., dv]."""
        for name, x in (("q_t", q_t), ("k_t", k_t), ("v_t", v_t), ("log_decay_t", log_decay_t)):
            require_tensor(name, x, min_dims=0 if name == "log_decay_t" else 1)
        per_channel = log_decay_t.dim() == q_t.dim()  # [..., dk] as many dims as q_t, else [...]
        gate = log_decay_t.unsqueeze(-2) if per_channel else log_decay_t.unsqueeze(-1)
        return self.extend(q_t.unsqueeze(-2), k_t.unsqueeze(-2), v_t.unsqueeze(-2), gate).squeeze(-2)
