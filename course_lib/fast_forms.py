"""The fast paths behind ``linear_attention(method="auto")``: same sums as ``linear_forms``, fewer passes.

Two layout choices make them fast (notebook 08 measures them):

* **Causal: a loop over chunks, not tokens.** Chunk c (C tokens, all heads at once) costs four
  small matmuls, tril(Qc Kcᵀ) V̂c + Qc Ŝ and Ŝ += Kcᵀ V̂c, whose operands stay in cache; the
  ledger Ŝ [B, f, w] is the only state carried, so nothing of size n·f·dv is ever held.
* **The normaliser rides along (causal).** Values get a column of ones, v̂ = [v | 1 | 0…]
  [..., m, w] (w = dv + 1 rounded up to a multiple of 8: a 65-wide matmul ran ~25 % slower than
  a 72-wide one here), so Σ_j φ(k_j) v̂_jᵀ = [S | z | 0…] and every matmul of the loop yields
  numerator and denominator together. Non-causal needs no such trick: z = Σ_j φ(k_j) and
  φ(q)ᵀz are two cheap reductions, cheaper than copying v.
* **Few large temporaries.** A fresh tensor of tens of MB costs page faults on first touch
  (at N = 8192, d = 128 an elementwise op into new memory took ~3× as long as in place), so the
  outputs are written into buffers and divided in place.
  A Python loop of n/C steps costs microseconds per step, a rounding error next to the matmuls
  on a CPU. On an accelerator, where every small kernel launch costs as much as the math, the
  vectorised ``linear_forms.chunked_form`` (all chunks at once) is used instead.
"""

import torch
import torch.nn.functional as F

Ledger = tuple[torch.Tensor, torch.Tensor]  # (S [..., f, dv], z [..., f])


def auto_chunk_size(n: int, f: int, dv: int) -> int:
    """The chunk length C that ``method="auto"`` uses for n tokens, f features and dv values.

    Per token, the masked block inside a chunk costs 2C(f + dv) FLOPs and the ledger's read and
    write 4·f·dv, so small C means fewer FLOPs; but a C×C matmul below 64 runs far below the
    machine's matmul speed. C = 64 balances the two for f, dv ≤ 64 (notebook 08 sweeps C);
    wider heads amortise a larger block. Never longer than the sequence.
    """
    preferred = 128 if min(f, dv) >= 128 else 64
    return max(1, min(preferred, n))


def augmented_width(dv: int) -> int:
    """w = dv + 1 (the ones column) rounded up to a multiple of 8."""
    return -(-(dv + 1) // 8) * 8


def augment_values(v: torch.Tensor, rows: int, width: int | None = None) -> torch.Tensor:
    """v̂ = [v | 1 | 0…]: [..., m, dv] -> [..., rows, width], rows ≥ m (rows past m are zero: padding);
    width defaults to ``augmented_width(dv)``."""
    m, dv = v.shape[-2:]
    v_hat = v.new_zeros(*v.shape[:-2], rows, augmented_width(dv) if width is None else width)
    v_hat[..., :m, :dv] = v
    v_hat[..., :m, dv] = 1.0
    return v_hat


def pad_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """[..., m, f] -> [..., rows, f] with zero rows appended; ``x`` itself when rows = m."""
    return x if rows == x.shape[-2] else F.pad(x, (0, 0, 0, rows - x.shape[-2]))


def split_ledger(ledger_hat: torch.Tensor, dv: int) -> Ledger:
    """[S | z | 0…] [..., f, w] -> (S [..., f, dv], z [..., f]), as views."""
    return ledger_hat[..., :dv], ledger_hat[..., dv]


def join_ledger(ledger: Ledger, width: int | None = None) -> torch.Tensor:
    """(S [..., f, dv], z [..., f]) -> [S | z | 0…] [..., f, width], a new tensor (width ≥ dv + 1)."""
    S, z = ledger
    dv = S.shape[-1]
    ledger_hat = S.new_zeros(*S.shape[:-1], dv + 1 if width is None else width)
    ledger_hat[..., :dv] = S
    ledger_hat[..., dv] = z
    return ledger_hat


def summarise_keys(phi_k: torch.Tensor, v: torch.Tensor, *, block: int = 1024) -> torch.Tensor:
    """S = φ(K)ᵀV [..., f, dv], summed in two levels: matmuls over blocks of ``block`` keys,
    then a sum of the block results.

    One matmul over m keys accumulates m float32 terms in a row: at m = 2²³ (d = 2) a
    normaliser built that way was off by ~0.3 %. Blocks keep each running sum short
    (error ~ (block + m/block)·ε instead of m·ε).
    """
    m = phi_k.shape[-2]
    whole = m - m % block
    if whole == 0:
        return phi_k.transpose(-2, -1) @ v
    blocks_k = phi_k[..., :whole, :].unflatten(-2, (-1, block))  # [..., m/block, block, f]
    blocks_v = v[..., :whole, :].unflatten(-2, (-1, block))  # [..., m/block, block, dv]
    summary = (blocks_k.transpose(-2, -1) @ blocks_v).sum(-3)  # [..., f, dv]
    if whole < m:
        summary += phi_k[..., whole:, :].transpose(-2, -1) @ v[..., whole:, :]
    return summary


def fast_noncausal(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(numerator [..., n, dv], denominator [..., n]) = (φ(Q)S, φ(Q)z) with S = φ(K)ᵀV, z = Σ_j φ(k_j)."""
    numerator = phi_q @ summarise_keys(phi_k, v)  # [..., n, dv]
    denominator = (phi_q @ phi_k.sum(-2).unsqueeze(-1)).squeeze(-1)  # [..., n]
    return numerator, denominator


def fast_causal(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    *,
    chunk_size: int | None = None,
    ledger: Ledger | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Ledger]:
    """Causal (numerator, denominator, ledger after) by a loop over chunks; the same sums as
    ``linear_forms.chunked_form`` (which it is tested against).

    φq, φk [..., n, f], v [..., n, dv] with equal leading dims; ``ledger`` = (S, z) carried in
    from earlier tokens. Per chunk c of C tokens, with Ŝ = [S | z | 0…] summing everything before it:
        out_c = tril(Qc Kcᵀ) V̂c + Qc Ŝ     [B, C, w]
        Ŝ    += Kcᵀ V̂c                      [B, f, w]
    Returns a contiguous numerator [..., n, dv] (a fresh buffer: callers may divide it in place).
    """
    batch, (n, f), dv = phi_q.shape[:-2], phi_q.shape[-2:], v.shape[-1]
    C = auto_chunk_size(n, f, dv) if chunk_size is None else min(chunk_size, n)
    padded = -(-n // C) * C
    q = pad_rows(phi_q, padded).reshape(-1, padded, f)  # [B, n', f]; zero rows add nothing
    k = pad_rows(phi_k, padded).reshape(-1, padded, f)  # [B, n', f]
    v_hat = augment_values(v, padded).reshape(-1, padded, augmented_width(dv))  # [B, n', w]
    width = v_hat.shape[-1]
    ledger_hat = (
        q.new_zeros(q.shape[0], f, width) if ledger is None else join_ledger(ledger, width).reshape(-1, f, width)
    )
    numerator = q.new_empty(q.shape[0], padded, dv)  # [B, n', dv]
    denominator = q.new_empty(q.shape[0], padded)  # [B, n']
    for start in range(0, padded, C):
        rows = slice(start, start + C)
        qc, kc, vc = q[:, rows], k[:, rows], v_hat[:, rows]  # [B, C, ·]
        out_c = torch.bmm(torch.bmm(qc, kc.transpose(1, 2)).tril_(), vc).baddbmm_(qc, ledger_hat)  # [B, C, w]
        numerator[:, rows], denominator[:, rows] = out_c[..., :dv], out_c[..., dv]
        ledger_hat.baddbmm_(kc.transpose(1, 2), vc)
    numerator = numerator.reshape(*batch, padded, dv)[..., :n, :]
    denominator = denominator.reshape(*batch, padded)[..., :n]
    return numerator, denominator, split_ledger(ledger_hat.reshape(*batch, f, width), dv)
