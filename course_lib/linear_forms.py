"""Three ways to evaluate linear attention, all returning (numerator, denominator).

For features φq [..., n, f], φk [..., m, f] and values v [..., m, dv] (leading dims
already equal) each form computes

    numerator_i   = Σ_j w_ij φ(q_i)ᵀφ(k_j) v_j        [..., n, dv]
    denominator_i = Σ_j w_ij φ(q_i)ᵀφ(k_j)            [..., n]

with w_ij = 1, or w_ij = [j ≤ i] when causal. ``attention.linear_attention``
divides the two (one place for the normaliser checks). Derivations: notebook 02
(parallel), notebook 05 (recurrent and chunked).
"""

import torch
import torch.nn.functional as F

from course_lib.fast_forms import auto_chunk_size, fast_causal, fast_noncausal
from course_lib.validation import check_chunk_size

Ledger = tuple[torch.Tensor, torch.Tensor]  # (S [..., f, dv], z [..., f])
METHODS = ("auto", "parallel", "recurrent", "chunked")


def causal_mask(n: int, device: torch.device | None = None) -> torch.Tensor:
    """[n, n] bool, True where key j may be seen by query i (j ≤ i)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def _read(phi_q: torch.Tensor, S: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries read a summary: φ(q)ᵀS [..., n, dv] and φ(q)ᵀz [..., n]."""
    return phi_q @ S, (phi_q @ z.unsqueeze(-1)).squeeze(-1)


def parallel_form(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> Ledger:
    """Associativity: φ(Q)(φ(K)ᵀV) instead of (φ(Q)φ(K)ᵀ)V.

    Non-causal: S = φ(K)ᵀV [f, dv] and z = Σ_j φ(k_j) [f] once, then every query reads them.
    Causal: the prefix sums S_i = Σ_{j≤i} φ(k_j)v_jᵀ as one cumsum; this holds an
    [n, f, dv] tensor, so it is the readable form, not the fast one.
    """
    if not causal:
        return _read(phi_q, phi_k.transpose(-2, -1) @ v, phi_k.sum(-2))
    S_prefix = torch.einsum("...nf,...nv->...nfv", phi_k, v).cumsum(-3)  # [..., n, f, dv]
    z_prefix = phi_k.cumsum(-2)  # [..., n, f]
    numerator = torch.einsum("...nf,...nfv->...nv", phi_q, S_prefix)
    return numerator, (phi_q * z_prefix).sum(-1)


def recurrent_form(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> Ledger:
    """The ledger, one token at a time: S_i = S_{i-1} + φ(k_i)v_iᵀ, z_i = z_{i-1} + φ(k_i).

    Causal: query i reads (S_i, z_i). Non-causal: the loop runs over all keys first,
    then every query reads the final (S, z). A Python loop: the definition, not a fast path.
    """
    S = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1], v.shape[-1])  # [..., f, dv]
    z = phi_k.new_zeros(*phi_k.shape[:-2], phi_k.shape[-1])  # [..., f]
    numerators, denominators = [], []
    for i in range(phi_k.shape[-2]):
        S = S + phi_k[..., i, :, None] * v[..., i, None, :]
        z = z + phi_k[..., i, :]
        if causal:
            numerator, denominator = _read(phi_q[..., i : i + 1, :], S, z)
            numerators.append(numerator)
            denominators.append(denominator)
    if not causal:
        return _read(phi_q, S, z)
    return torch.cat(numerators, dim=-2), torch.cat(denominators, dim=-1)


def chunked_form(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool,
    chunk_size: int,
    ledger: Ledger | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Ledger]:
    """Chunkwise parallel: a masked quadratic block inside each chunk, the ledger between chunks.

    The sequence is cut into chunks of C = chunk_size tokens (the last one zero-padded;
    a zero feature row adds nothing to any sum). For chunk c with features Qc, Kc [C, f]:

        numerator_c   = tril(Qc Kcᵀ) Vc + Qc S_{<c}
        denominator_c = tril(Qc Kcᵀ) 1  + Qc z_{<c}

    where S_{<c}, z_{<c} sum the earlier chunks (plus ``ledger``, a state carried in
    from before the sequence). All chunks are computed at once; only [n/C, f, dv]
    chunk summaries are held. Returns (numerator, denominator, ledger after the sequence).
    Non-causal: keys are summarised chunk by chunk and every query reads the total.
    """
    n, m, f, dv = phi_q.shape[-2], phi_k.shape[-2], phi_k.shape[-1], v.shape[-1]
    batch = phi_k.shape[:-2]
    S0 = phi_k.new_zeros(*batch, f, dv) if ledger is None else ledger[0]
    z0 = phi_k.new_zeros(*batch, f) if ledger is None else ledger[1]

    C = min(chunk_size, m)
    pad = -m % C
    Kc = F.pad(phi_k, (0, 0, 0, pad)).unflatten(-2, (-1, C))  # [..., nc, C, f]
    Vc = F.pad(v, (0, 0, 0, pad)).unflatten(-2, (-1, C))  # [..., nc, C, dv]
    chunk_S = Kc.transpose(-2, -1) @ Vc  # [..., nc, f, dv]
    chunk_z = Kc.sum(-2)  # [..., nc, f]
    S_total = S0 + chunk_S.sum(-3)
    z_total = z0 + chunk_z.sum(-2)
    if not causal:
        numerator, denominator = _read(phi_q, S_total, z_total)
        return numerator, denominator, (S_total, z_total)

    Qc = F.pad(phi_q, (0, 0, 0, pad)).unflatten(-2, (-1, C))  # [..., nc, C, f]
    S_before = torch.cat([S0.unsqueeze(-3), chunk_S[..., :-1, :, :]], dim=-3).cumsum(-3)  # [..., nc, f, dv]
    z_before = torch.cat([z0.unsqueeze(-2), chunk_z[..., :-1, :]], dim=-2).cumsum(-2)  # [..., nc, f]
    scores = (Qc @ Kc.transpose(-2, -1)).tril()  # [..., nc, C, C]
    numerator = scores @ Vc + Qc @ S_before
    denominator = scores.sum(-1) + (Qc @ z_before.unsqueeze(-1)).squeeze(-1)
    numerator = numerator.flatten(-3, -2)[..., :n, :]
    denominator = denominator.flatten(-2, -1)[..., :n]
    return numerator, denominator, (S_total, z_total)


def causal_form(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *, chunk_size: int, ledger: Ledger | None = None
) -> tuple[torch.Tensor, torch.Tensor, Ledger]:
    """The fastest causal form for the device: (numerator, denominator, ledger after).

    CPU: ``fast_forms.fast_causal``, a loop over chunks whose operands stay in cache.
    Accelerators: ``chunked_form``, all chunks in a few large launches.
    """
    if phi_q.device.type == "cpu":
        return fast_causal(phi_q, phi_k, v, chunk_size=chunk_size, ledger=ledger)
    return chunked_form(phi_q, phi_k, v, causal=True, chunk_size=chunk_size, ledger=ledger)


def check_method(method: str, chunk_size: int | None) -> int | None:
    """``method`` is one of ``METHODS`` and ``chunk_size`` a positive int or None; returns chunk_size."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return check_chunk_size(chunk_size)


def evaluate_form(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool,
    method: str,
    chunk_size: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(numerator, denominator) by ``method``; chunk_size None is chosen by ``auto_chunk_size``.

    "auto" is the fast path: ``fast_forms.fast_noncausal`` when non-causal; when causal,
    ``fast_forms.fast_causal`` (a loop over chunks) on a CPU and the vectorised
    ``chunked_form`` (one launch per step, not per chunk) on an accelerator.
    """
    if chunk_size is None:
        chunk_size = auto_chunk_size(phi_k.shape[-2], phi_k.shape[-1], v.shape[-1])
    if method == "auto" and not causal:
        return fast_noncausal(phi_q, phi_k, v)
    if method == "auto":
        return causal_form(phi_q, phi_k, v, chunk_size=chunk_size)[:2]
    if method == "chunked":
        return chunked_form(phi_q, phi_k, v, causal=causal, chunk_size=chunk_size)[:2]
    form = parallel_form if method == "parallel" else recurrent_form
    return form(phi_q, phi_k, v, causal=causal)
