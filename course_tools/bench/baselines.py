"""Plain-torch linear attention: the algorithm alone, without the library's bookkeeping.

The benchmark times these next to ``course_lib`` so a reader can tell what the algorithm
costs from what the library's checks, dispatch and copies cost (notebook 08, §2–§6).
They use elu + 1 (f = d), ``torch`` ops only, and **no input checks by design**: a bad
shape fails inside torch, a zero normaliser gives inf/NaN. Use ``course_lib.attention``
for anything but timing.

* ``plain_linear_attention``: φ(Q)(φ(K)ᵀV) / (φ(Q)Σ_j φ(k_j)), non-causal.
* ``plain_causal_linear_attention``: the chunked causal form, one Python loop over chunks
  of C tokens: inside a chunk tril(Q_c K_cᵀ) V_c, between chunks the running S and z.
* ``PlainLedger``: one decoding step S += φ(k)vᵀ, z += φ(k), o = φ(q)ᵀS / φ(q)ᵀz on
  preallocated S [..., f, dv] and z [..., f].
"""

import torch
import torch.nn.functional as F


def _elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = F.elu(x) + 1, the literal form (cheaper than ``feature_maps.elu_plus_one``'s branch-by-branch
    form, which stays positive further into the negative range; for timing the difference is immaterial)."""
    return F.elu(x) + 1


def plain_linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Non-causal linear attention, q [..., N, d], k [..., M, d], v [..., M, dv] -> [..., N, dv].

    out = φ(Q) S / (φ(Q) z) with S = φ(K)ᵀV [..., d, dv] and z = Σ_j φ(k_j) [..., d].
    Differentiable; no checks (module docstring).
    """
    phi_q, phi_k = _elu_plus_one(q), _elu_plus_one(k)
    s = phi_k.transpose(-2, -1) @ v  # [..., d, dv]
    z = phi_k.sum(dim=-2, keepdim=True).transpose(-2, -1)  # [..., d, 1]
    return (phi_q @ s) / (phi_q @ z)


def plain_causal_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk_size: int = 64
) -> torch.Tensor:
    """Causal linear attention by chunks, q, k [..., N, d], v [..., N, dv] -> [..., N, dv].

    For the chunk c of rows [a, b): numerator φ(Q_c)S + tril(φ(Q_c)φ(K_c)ᵀ)V_c, denominator
    φ(Q_c)z + rowsum(tril(φ(Q_c)φ(K_c)ᵀ)); then S += φ(K_c)ᵀV_c, z += Σ φ(K_c). Differentiable
    (no in-place updates); no checks (module docstring).
    """
    phi_q, phi_k = _elu_plus_one(q), _elu_plus_one(k)
    *batch, n, f = phi_q.shape
    s = phi_q.new_zeros(*batch, f, v.shape[-1])  # [..., f, dv]
    z = phi_q.new_zeros(*batch, f, 1)  # [..., f, 1]
    outputs = []
    for start in range(0, n, chunk_size):
        qc, kc, vc = (x[..., start : start + chunk_size, :] for x in (phi_q, phi_k, v))
        block = torch.tril(qc @ kc.transpose(-2, -1))  # [..., C, C]
        numerator = qc @ s + block @ vc  # [..., C, dv]
        denominator = qc @ z + block.sum(dim=-1, keepdim=True)  # [..., C, 1]
        outputs.append(numerator / denominator)
        s = s + kc.transpose(-2, -1) @ vc
        z = z + kc.sum(dim=-2, keepdim=True).transpose(-2, -1)
    return torch.cat(outputs, dim=-2)


class PlainLedger:
    """The decoding ledger in plain torch: preallocated S [*batch, f, dv] and z [*batch, f].

    ``step(q_t, k_t, v_t)`` with q_t, k_t [*batch, d], v_t [*batch, dv] returns
    o_t = φ(q_t)ᵀS / φ(q_t)ᵀz [*batch, dv] after S += φ(k_t)v_tᵀ, z += φ(k_t).
    Not differentiable: it updates S and z in place, as an inference loop does (the
    benchmark's decode suite); no checks (module docstring).
    """

    def __init__(self, batch: tuple[int, ...], f: int, dv: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu"):
        self.s = torch.zeros(*batch, f, dv, dtype=dtype, device=device)
        self.z = torch.zeros(*batch, f, dtype=dtype, device=device)

    @property
    def nbytes(self) -> int:
        """Bytes of S and z."""
        return self.s.nbytes + self.z.nbytes

    def step(self, q_t: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor) -> torch.Tensor:
        phi_q, phi_k = _elu_plus_one(q_t), _elu_plus_one(k_t)  # [*batch, f]
        self.s.add_(phi_k.unsqueeze(-1) * v_t.unsqueeze(-2))  # S += φ(k) vᵀ
        self.z.add_(phi_k)
        numerator = (phi_q.unsqueeze(-2) @ self.s).squeeze(-2)  # [*batch, dv]
        return numerator / (phi_q * self.z).sum(dim=-1, keepdim=True)
