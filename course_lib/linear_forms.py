"""Three readable ways to evaluate linear attention, each returning (numerator, denominator, ledger).

For features φq [..., n, f], φk [..., m, f] and values v [..., m, dv] (leading dims
already equal) each form computes

    numerator_i   = Σ_j w_ij φ(q_i)ᵀφ(k_j) v_j        [..., n, dv]
    denominator_i = Σ_j w_ij φ(q_i)ᵀφ(k_j)            [..., n]

with w_ij = 1 (non-causal), or w_ij = γ^{i−j} for j ≤ i and 0 otherwise (causal; γ = 1
unless a decay is given as ``log_gamma`` = log γ [...], one per batch/head entry). The ledger
is (S, z) = (Σ_j w φ(k_j)v_jᵀ, Σ_j w φ(k_j)) as seen after the last token, [..., f, dv] and
[..., f]; a ``ledger`` passed in stands for the tokens before the sequence (position −1).
``divide`` turns them into the output numerator / (denominator + eps). Derivations: notebook
02 (parallel), 05 (recurrent, chunked), 07 (decay). These are the definitions the fast path
(``fast_forms``) is tested against; this module imports nothing from it.
"""

import torch

Ledger = tuple[torch.Tensor, torch.Tensor]  # (S [..., f, dv], z [..., f])


def causal_mask(n: int, device: torch.device | None = None) -> torch.Tensor:
    """[n, n] bool, True where key j may be seen by query i (j ≤ i)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def decay_matrix(n: int, log_gamma: torch.Tensor) -> torch.Tensor:
    """W_ij = γ^{i−j} for j ≤ i, else 0: [..., n, n] for log_gamma [...].

    exp((i−j)·log γ) with the exponent zeroed above the diagonal before exp, so no
    γ^{negative} is ever formed (it overflows for small γ) and the gradient stays finite.
    """
    i = torch.arange(n, device=log_gamma.device, dtype=log_gamma.dtype)
    keep = causal_mask(n, log_gamma.device)
    exponents = torch.where(keep, i[:, None] - i[None, :], 0)  # [n, n]
    return torch.where(keep, torch.exp(exponents * log_gamma[..., None, None]), 0)


def _no_decay(phi_k: torch.Tensor) -> torch.Tensor:
    """log γ = 0 (γ = 1) for every batch entry: the undecayed forms are the decayed ones at γ = 1."""
    return phi_k.new_zeros(phi_k.shape[:-2])


def _start(phi_k: torch.Tensor, v: torch.Tensor, ledger: Ledger | None) -> Ledger:
    """The ledger before the first token: ``ledger`` or zeros, (S [..., f, dv], z [..., f])."""
    if ledger is not None:
        return ledger
    batch, f = phi_k.shape[:-2], phi_k.shape[-1]
    return phi_k.new_zeros(*batch, f, v.shape[-1]), phi_k.new_zeros(*batch, f)


def _read(phi_q: torch.Tensor, S: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries read a summary: φ(q)ᵀS [..., n, dv] and φ(q)ᵀz [..., n]."""
    return phi_q @ S, (phi_q @ z.unsqueeze(-1)).squeeze(-1)


def _powers(log_gamma: torch.Tensor, exponents: torch.Tensor) -> torch.Tensor:
    """γ^exponents, [..., len(exponents)] for log_gamma [...] (exponents ≥ 0)."""
    return torch.exp(exponents * log_gamma[..., None])


def parallel_form(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *, causal: bool,
    log_gamma: torch.Tensor | None = None, ledger: Ledger | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Ledger]:
    """Associativity: φ(Q)(φ(K)ᵀV) instead of (φ(Q)φ(K)ᵀ)V.

    Non-causal: S = φ(K)ᵀV [f, dv] and z = Σ_j φ(k_j) [f] once, then every query reads them.
    Causal: every prefix ledger S_i = Σ_{j≤i} w_ij φ(k_j)v_jᵀ at once: a cumsum of the
    per-token outer products, or with decay the weight matrix W [n, n] times them (a cumsum
    would need γ^{−j}, which overflows). This holds an [n, f, dv] tensor, so it is the
    readable form, not the fast one.
    """
    S0, z0 = _start(phi_k, v, ledger)
    if not causal:
        S, z = S0 + phi_k.transpose(-2, -1) @ v, z0 + phi_k.sum(-2)
        return *_read(phi_q, S, z), (S, z)
    n = phi_k.shape[-2]
    outer = phi_k.unsqueeze(-1) * v.unsqueeze(-2)  # [..., n, f, dv]: φ(k_j) v_jᵀ
    if log_gamma is None:
        S_prefix, z_prefix = S0.unsqueeze(-3) + outer.cumsum(-3), z0.unsqueeze(-2) + phi_k.cumsum(-2)
    else:
        weights = decay_matrix(n, log_gamma)  # [..., n, n]
        since_start = _powers(log_gamma, torch.arange(1, n + 1, dtype=phi_k.dtype, device=phi_k.device))  # γ^{i+1}
        S_prefix = torch.einsum("...ij,...jfv->...ifv", weights, outer) + since_start[..., None, None] * S0.unsqueeze(-3)
        z_prefix = weights @ phi_k + since_start[..., None] * z0.unsqueeze(-2)  # [..., n, f]
    numerator = torch.einsum("...nf,...nfv->...nv", phi_q, S_prefix)
    return numerator, (phi_q * z_prefix).sum(-1), (S_prefix[..., -1, :, :], z_prefix[..., -1, :])


def recurrent_form(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *, causal: bool,
    log_gamma: torch.Tensor | None = None, ledger: Ledger | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Ledger]:
    """The ledger, one token at a time: S_i = γ S_{i−1} + φ(k_i)v_iᵀ, z_i = γ z_{i−1} + φ(k_i).

    Causal: query i reads (S_i, z_i). Non-causal: the loop runs over all keys first,
    then every query reads the final (S, z). A Python loop: the definition, not a fast path.
    """
    S, z = _start(phi_k, v, ledger)
    gamma = (_no_decay(phi_k) if log_gamma is None else log_gamma).exp()  # [...]
    numerators, denominators = [], []
    for i in range(phi_k.shape[-2]):
        S = gamma[..., None, None] * S + phi_k[..., i, :, None] * v[..., i, None, :]
        z = gamma[..., None] * z + phi_k[..., i, :]
        if causal:
            numerator, denominator = _read(phi_q[..., i : i + 1, :], S, z)
            numerators.append(numerator)
            denominators.append(denominator)
    if not causal:
        return *_read(phi_q, S, z), (S, z)
    return torch.cat(numerators, dim=-2), torch.cat(denominators, dim=-1), (S, z)


def chunked_form(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *, causal: bool, chunk_size: int,
    log_gamma: torch.Tensor | None = None, ledger: Ledger | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Ledger]:
    """Chunkwise parallel: a masked quadratic block inside each chunk, the ledger between chunks.

    The sequence is cut into chunks of C = chunk_size tokens from the start (the last one
    may be shorter; nothing is padded). For a chunk of L tokens with features Qc, Kc [L, f],
    local positions t, s and (S, z) the ledger just before it:

        numerator_t   = Σ_{s≤t} γ^{t−s} (q_t·k_s) v_s + γ^{t+1} q_tᵀS
        denominator_t = Σ_{s≤t} γ^{t−s} (q_t·k_s)     + γ^{t+1} q_tᵀz
        S ← γ^L S + Σ_s γ^{L−1−s} k_s v_sᵀ,   z ← γ^L z + Σ_s γ^{L−1−s} k_s

    Every exponent is ≥ 0, so every factor is ≤ 1: nothing overflows. Only the [f, dv]
    ledger crosses chunks, so the work is linear in n. Non-causal: keys are summarised
    chunk by chunk and every query reads the total.
    """
    S, z = _start(phi_k, v, ledger)
    m, C = phi_k.shape[-2], chunk_size
    if not causal:
        for start in range(0, m, C):
            Kc, Vc = phi_k[..., start : start + C, :], v[..., start : start + C, :]
            S, z = S + Kc.transpose(-2, -1) @ Vc, z + Kc.sum(-2)
        return *_read(phi_q, S, z), (S, z)
    log_gamma = _no_decay(phi_k) if log_gamma is None else log_gamma
    numerators, denominators = [], []
    for start in range(0, m, C):
        Qc, Kc, Vc = (x[..., start : start + C, :] for x in (phi_q, phi_k, v))  # [..., L, ·]
        L = Kc.shape[-2]
        t = torch.arange(L, dtype=phi_k.dtype, device=phi_k.device)
        scores = (Qc @ Kc.transpose(-2, -1)) * decay_matrix(L, log_gamma)  # [..., L, L]
        from_ledger = _powers(log_gamma, t + 1)  # [..., L]: γ^{t+1}
        numerator, denominator = _read(Qc, S, z)
        numerators.append(scores @ Vc + from_ledger[..., None] * numerator)
        denominators.append(scores.sum(-1) + from_ledger * denominator)
        to_end = _powers(log_gamma, L - 1 - t)[..., None]  # [..., L, 1]: γ^{L−1−s}
        across = _powers(log_gamma, t.new_tensor([L]))  # [..., 1]: γ^L
        S = across[..., None] * S + (to_end * Kc).transpose(-2, -1) @ Vc
        z = across * z + (to_end * Kc).sum(-2)
    return torch.cat(numerators, dim=-2), torch.cat(denominators, dim=-1), (S, z)


FORMS = {"parallel": parallel_form, "recurrent": recurrent_form, "chunked": chunked_form}


def divide(numerator: torch.Tensor, denominator: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(out = numerator / (denominator + eps) [..., n, dv], the normaliser denominator + eps [..., n])."""
    normaliser = denominator + eps  # [..., n]
    return numerator / normaliser.unsqueeze(-1), normaliser
