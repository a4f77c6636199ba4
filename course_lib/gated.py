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

      o_i = scale · [ (q_i ∘ exp(G_i))ᵀ S₀ + Σ_{j ≤ i} (Σ_d q_id k_jd exp(G_id − G_jd)) v_j ]
      S_C = diag(exp(G_C)) S₀ + Σ_j (k_j ∘ exp(G_C − G_j)) v_jᵀ

  A scalar gate makes the middle term (Q Kᵀ ∘ L) V, a [C, C] mask. Per-channel gates need the
  [C, C, dk] tensor of exp(G_id − G_jd) — 0.5 GB at C = 64, dk = 64, n = 4096 and 8 heads, and an exp
  per entry. Two ways out, and ``gated_chunked`` takes both:

  - **A bounded split.** Splitting at the chunk's midpoint M = G_C / 2,
    exp(G_i − G_j) = exp(G_i − M) · exp(M − G_j), folds the gates into the queries and the keys and
    leaves two plain matmuls for either gate shape, 2·dk exps a token. Each factor lies within
    exp(±G_C / 2), so the split is safe exactly while the chunk's gates sum above −``SPLIT_LIMIT``
    (60: factors within exp(±30), float32 reaches 3.4e38 = exp(88.7)). Mild gates, the usual case
    (GLA's logsigmoid(x)/16 sums to about −3 over 64 tokens), take it; the form checks the sums of each
    pass of ``CHUNKS_PER_PASS`` chunks (one number read back per pass) and sends a pass over the limit to
    the safe forms below. Above the diagonal a product may be large or inf; ``tril`` drops it, and its
    gradient is zero there, so nothing non-finite reaches the backward pass.
  - **The safe forms**, finite in float32 for any gate ≤ 0: the masked [C, C] form for a scalar gate;
    for per-channel gates a second split of each chunk, as GLA does (the "secondary chunking"):
    sub-chunks of c tokens, with B_a the running G just before sub-chunk a and E_s at its last token.
    A pair in the same sub-chunk keeps the small [c, c, dk] tensor; a key in an earlier sub-chunk s < a
    splits the exponent at the boundaries between them, into three factors each ≤ 1:

      exp(G_i − G_j) = exp(G_i − B_a) · exp(B_a − E_s) · exp(E_s − G_j)       (G_i ≤ B_a ≤ E_s ≤ G_j)

    so those pairs are matmuls of q_i ∘ exp(G_i − B_a) with k_j ∘ exp(B_a − G_j) (the last two factors
    folded into the keys, per query sub-chunk). Never an exp(−G). With c ≥ C it is the one-level form,
    the [C, C, dk] tensor whole (the readable one, kept as ``gated_chunked(..., sub_chunk_size=C)``).
    It costs c·dk exps a token inside the sub-chunks: on a CPU about three times the split.

Both are differentiable in q, k, v, the gate and the initial ledger (out-of-place torch ops; an
exponent that may be positive, above the diagonal or between a sub-chunk and a later one, is clamped
at 0 *before* exp and its result cut by a mask, so no inf·0 reaches the gradient). The chunks of a
pass form their pairs in one batched pass (fewer, larger tensor operations) and loop only for the ledger;
the passes are taken with ``split``: a slice's backward would write a zero tensor of the whole input per piece.
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
CHUNKS_PER_PASS = 8  # chunks whose pairs are formed in one batched pass (fastest of 1–64 at C = 64, d = 64)
SPLIT_LIMIT = 60.0  # a split factor stays within exp(±30): finite, with room for |q||k|, in float32
DEFAULT_CHUNK = 64
DEFAULT_SUB_CHUNK = 8  # with C = 64 the fastest on a 2-core CPU of C 16–128 × c 4–16 (docs/measurements.md)


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
    *, chunk_size: int = DEFAULT_CHUNK, sub_chunk_size: int = DEFAULT_SUB_CHUNK, scale: float = 1.0,
    split_limit: float = SPLIT_LIMIT,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunked form (module docstring): arguments and result as ``gated_recurrent``'s, the output
    times ``scale`` (each pass's q is scaled, a pass over data already in cache).

    Chunks of C = ``chunk_size`` tokens (the last one padded), CHUNKS_PER_PASS of them at a time: their
    pairs in one batched pass, then a loop over them for the ledger alone. A pass whose chunks' gates all
    sum above −``split_limit`` splits the exponent at each chunk's midpoint (0 never splits); otherwise
    a scalar gate takes the masked [C, C] form and per-channel gates sub-chunks of c = ``sub_chunk_size``
    tokens (c ≥ C: the one-level form, the chunk's [C, C, dk] tensor of exp(G_i − G_j) whole).
    """
    S, outputs = state, []
    pass_size = chunk_size * CHUNKS_PER_PASS
    # split, not slices: a slice's backward writes a zero tensor of the whole input, once per piece
    for q_p, k_p, v_p, g_p in zip(*(x.split(pass_size, dim=-2) for x in (q, k, v, log_decay))):
        L = q_p.shape[-2]
        chunks = (in_chunks(x, min(chunk_size, L)) for x in (q_p * scale, k_p, v_p, g_p))  # [..., nc, C, ·]
        out, S = _pass(*chunks, S, sub_chunk_size, split_limit)
        outputs.append(out.flatten(-3, -2)[..., :L, :])
    return torch.cat(outputs, dim=-2), S


def in_chunks(x: torch.Tensor, C: int) -> torch.Tensor:
    """[..., n, ·] -> [..., nc, C, ·], the last chunk padded with zero tokens (no copy when C divides n)."""
    pad = -x.shape[-2] % C
    return (F.pad(x, (0, 0, 0, pad)) if pad else x).unflatten(-2, (-1, C))


def _pass(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, S: torch.Tensor, c: int,
          split_limit: float) -> tuple[torch.Tensor, torch.Tensor]:
    """nc whole chunks entered with the ledger S₀ (module docstring): (out [..., nc, C, dv], S after them).

    q, k [..., nc, C, dk], v [..., nc, C, dv], g [..., nc, C, dk or 1], S [..., dk, dv]; padding tokens
    have q = k = v = 0 and g = 0, so they write and forget nothing.
    """
    G = g.cumsum(-2)  # running log gate from each chunk's start [..., nc, C, dk or 1]
    G_last = G[..., -1:, :]  # each whole chunk's [..., nc, 1, dk or 1]
    if -G_last.min().item() < split_limit:  # exp(G_i − G_j) = exp(G_i − M) · exp(M − G_j), M = G_C / 2
        middle = G_last / 2
        q_in, k_out = q * (G - middle).exp(), k * (middle - G).exp()  # factors within exp(±limit / 2)
        within = (q_in @ k_out.transpose(-1, -2)).tril() @ v  # [..., nc, C, dv]
        q_in, k_out = q_in * middle.exp(), k_out * middle.exp()  # q ∘ exp(G), k ∘ exp(G_C − G)
    else:
        if g.shape[-1] == 1:  # a scalar gate: (Q Kᵀ ∘ L) V, L_ij = exp(G_i − G_j) for j ≤ i
            within = (q @ k.transpose(-1, -2) * exp_below_diagonal(G - G.transpose(-1, -2))) @ v
        else:  # per-channel gates: each chunk padded to whole sub-chunks, the padding cut after
            c = min(c, q.shape[-2])
            padded = [in_chunks(x, c).flatten(-3, -2) for x in (q, k, v, g)]  # [..., nc, ns·c ≥ C, ·]
            within = _within_per_channel(*padded[:3], padded[3].cumsum(-2), c)[..., :q.shape[-2], :]
        q_in, k_out = q * G.exp(), k * (G_last - G).exp()
    keep = G_last.transpose(-1, -2).exp()  # diag(exp(G_C)) as [..., nc, dk or 1, 1]
    writes = k_out.transpose(-1, -2) @ v  # Σ_j (k_j ∘ exp(G_C − G_j)) v_jᵀ, every chunk's [..., nc, dk, dv]
    entered = []  # the ledger each chunk starts from
    for keep_c, write_c in zip(keep.unbind(-3), writes.unbind(-3)):
        entered.append(S)
        S = keep_c * S + write_c
    return q_in @ torch.stack(entered, dim=-3) + within, S  # (q_i ∘ exp(G_i))ᵀ S₀ + the chunk's own pairs


def exp_below_diagonal(exponent: torch.Tensor) -> torch.Tensor:
    """exp(exponent) on and below the diagonal of its last two dims [..., L, L], 0 above it. The exponent is
    clamped at 0 first: above the diagonal G_i − G_j may be positive, and an exp that overflows there would
    put inf · 0 = NaN in the gradient (masking to −∞ before exp works too, but is slower on the CPU)."""
    return exponent.clamp(max=0).exp().tril()


def _within_per_channel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, G: torch.Tensor, c: int) -> torch.Tensor:
    """Σ_{j ≤ i} (Σ_d q_id k_jd exp(G_id − G_jd)) v_j inside a chunk of whole sub-chunks of c tokens (module
    docstring): q, k, G [..., ns·c, dk], v [..., ns·c, dv] -> [..., ns·c, dv]."""
    qs, ks, vs, Gs = (x.unflatten(-2, (-1, c)) for x in (q, k, v, G))  # [..., ns, c, ·]
    inside = (Gs.unsqueeze(-2) - Gs.unsqueeze(-3)).clamp(max=0).exp()  # exp(G_i − G_j) [..., ns, c, c, dk]
    out = torch.einsum("...id,...jd,...ijd->...ij", qs, ks, inside).tril() @ vs  # pairs inside a sub-chunk
    ns = qs.shape[-3]
    if ns > 1:  # keys of sub-chunk s, queries of a later one a: the three factors of the module docstring
        E = Gs[..., -1, :]  # G at each sub-chunk's last token [..., ns, dk]
        B = F.pad(E[..., :-1, :], (0, 0, 1, 0))  # G before each sub-chunk's first token [..., ns, dk]
        q_in = qs * (Gs - B.unsqueeze(-2)).exp()  # q_i ∘ exp(G_i − B_a) [..., ns, c, dk]
        k_out = ks * (E.unsqueeze(-2) - Gs).exp()  # k_j ∘ exp(E_s − G_j) [..., ns, c, dk]
        earlier = torch.ones(ns, ns, dtype=G.dtype, device=G.device).tril(-1).unsqueeze(-1)  # s < a [ns, ns, 1]
        between = (B.unsqueeze(-2) - E.unsqueeze(-3)).clamp(max=0).exp() * earlier  # exp(B_a − E_s) [.., a, s, dk]
        keys = (k_out.unsqueeze(-4) * between.unsqueeze(-2)).flatten(-3, -2)  # k_j exp(B_a − G_j) [.., a, ns·c, dk]
        out = out + (q_in @ keys.transpose(-1, -2)) @ vs.flatten(-3, -2).unsqueeze(-3)  # [..., ns, c, dv]
    return out.flatten(-3, -2)


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
    if method == "recurrent":
        out, S = gated_recurrent(q_w, k_w, v_w, gates, state)
        out = out * scale
    else:
        out, S = gated_chunked(q_w, k_w, v_w, gates, state, chunk_size=inputs.chunk_size or DEFAULT_CHUNK, scale=scale)
    out = check_result(out, None, 0.0, Suspects({"q": q, "k": k, "v": v}, overflow="the ledger overflowed; rescale v"))
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
