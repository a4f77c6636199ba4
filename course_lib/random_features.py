"""Random features for the softmax kernel: FAVOR+ (Choromanski et al. 2021), notebooks 03, 04 and 06.

exp(qᵀk) = E_ω[φ(q)ᵀφ(k)] with ω ~ N(0, I_d) and either

    positive: φ(x) = exp(ωᵀx − ‖x‖²/2) / √m                       (m features, all > 0)
    trig:     φ(x) = exp(‖x‖²/2) [sin(ωᵀx), cos(ωᵀx)] / √m        (2m features, signed)

so ``linear_attention(q, k, v, PerformerFeatures(d, m))`` estimates ``softmax_attention(q, k, v)``.
"""

import math

import torch

from course_lib.validation import check_choice, check_int, check_ints, check_number, require_tensor

KINDS = ("positive", "trig")


def iid_gaussian(m: int, d: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """ω_1..ω_m ~ N(0, I_d) independently, [m, d] float64 on the CPU."""
    return torch.randn(m, d, generator=generator, dtype=torch.float64)


def orthogonal_gaussian(m: int, d: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """[m, d] projections, orthogonal within each block of d rows, each row with a chi(d) length.

    Every row is still marginally N(0, I_d) (a uniform direction times a chi(d)
    length), so the estimator stays unbiased, while rows of one block cannot
    duplicate each other (Performer, Theorem 2). Plain QR rows all have length 1:
    that changes the kernel being estimated (biased, notebook 06).
    """
    blocks = -(-m // d)
    gaussian = torch.randn(blocks, d, d, generator=generator, dtype=torch.float64)
    basis, triangle = torch.linalg.qr(gaussian)  # one batched QR: [blocks, d, d]
    basis = basis * torch.sign(torch.diagonal(triangle, dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar: fix column signs
    rows = basis.transpose(-2, -1).reshape(blocks * d, d)[:m]  # [m, d], orthonormal within each block
    lengths = torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=-1)  # [m], chi(d)
    return rows * lengths.unsqueeze(-1)


def positive_log_features(x: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """log φ(x) = ωᵀx − ‖x‖²/2 − ½ log m, [..., n, m] for x [..., n, d], omega [..., m, d]."""
    return x @ omega.transpose(-2, -1) - x.pow(2).sum(-1, keepdim=True) / 2 - math.log(omega.shape[-2]) / 2


def positive_random_features(x: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """φ(x) = exp(ωᵀx − ‖x‖²/2)/√m, [..., n, m] for omega [..., m, d]: one exp of the whole exponent.

    Never exp(ωᵀx) · exp(−‖x‖²/2): the first factor overflows (ωᵀx > 88 in float32)
    and inf · 0 is NaN. The exponent itself is at most ‖ω‖²/2, whatever x is.
    """
    return torch.exp(positive_log_features(x, omega))


def trig_random_features(x: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """φ(x) = exp(‖x‖²/2) [sin(ωᵀx), cos(ωᵀx)] / √m, [..., n, 2m] (Rahimi–Recht, signed)."""
    projection = x @ omega.transpose(-2, -1)  # [..., n, m]
    envelope = torch.exp(x.pow(2).sum(-1, keepdim=True) / 2) / math.sqrt(omega.shape[-2])
    return envelope * torch.cat([projection.sin(), projection.cos()], dim=-1)


def taster_verdicts(phi_q: torch.Tensor, phi_k: torch.Tensor, num_tasters: int) -> torch.Tensor:
    """The m single-taster estimates Y_r whose mean is φ(q)ᵀφ(k), [..., m].

    ``phi_q``, ``phi_k`` [..., f] (broadcastable) with f = m (positive features) or
    f = 2m (trig: a sin block, then a cos block): Y_r = m Σ_{blocks} φ_r(q) φ_r(k),
    the √m normalisation undone, so mean_r Y_r = φ(q)ᵀφ(k). Used for the Monte Carlo
    error bars of notebook 03, section 3. Differentiable.
    """
    require_tensor("phi_q", phi_q, min_dims=1)
    require_tensor("phi_k", phi_k, min_dims=1)
    check_int("num_tasters", num_tasters)
    f = phi_q.shape[-1]
    if phi_k.shape[-1] != f or f not in (num_tasters, 2 * num_tasters):
        raise ValueError(
            f"phi_q and phi_k must both have num_tasters={num_tasters} or {2 * num_tasters} features, "
            f"got {f} and {phi_k.shape[-1]}"
        )
    return num_tasters * (phi_q * phi_k).unflatten(-1, (-1, num_tasters)).sum(-2)


class PerformerFeatures:
    """FAVOR+ feature map for ``linear_attention`` and ``kernel_attention``.

    ``PerformerFeatures(d, m)(x)`` is φ(s·x) with s = ``scale`` (default d^{-1/4}, so
    φ(q)ᵀφ(k) estimates exp(qᵀk/√d), softmax attention's kernel). ``orthogonal``
    draws ω in orthogonal blocks with chi(d) lengths. Deterministic given a CPU
    ``generator``; ``redraw`` resamples. The attention functions call
    ``for_queries`` / ``for_keys``, which differ from φ only by a factor per query
    (it cancels in the normaliser) and never overflow; see ``for_keys``.
    """

    def __init__(
        self,
        dim: int,
        num_features: int,
        *,
        kind: str = "positive",
        orthogonal: bool = True,
        scale: float | None = None,
        generator: torch.Generator | None = None,
    ):
        check_ints(dim=dim, num_features=num_features)
        check_choice("kind", kind, KINDS)
        scale = check_number("scale", scale, above=0, optional=True)
        self.dim, self.num_features, self.kind, self.orthogonal = dim, num_features, kind, orthogonal
        self.scale = dim**-0.25 if scale is None else float(scale)
        self.redraw(generator)

    def redraw(self, generator: torch.Generator | None = None) -> "PerformerFeatures":
        """Draw new projections ω [m, d] (float64, CPU master copy)."""
        draw = orthogonal_gaussian if self.orthogonal else iid_gaussian
        self.omega = draw(self.num_features, self.dim, generator=generator)
        return self

    def __repr__(self) -> str:
        return (
            f"PerformerFeatures(dim={self.dim}, num_features={self.num_features}, kind={self.kind!r}, "
            f"orthogonal={self.orthogonal}, scale={self.scale:.4g})"
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """φ(s·x), [..., n, m] (positive) or [..., n, 2m] (trig): the estimator as written."""
        x, omega = self._prepare(x)
        return positive_random_features(x, omega) if self.kind == "positive" else trig_random_features(x, omega)

    def for_keys(self, x: torch.Tensor) -> torch.Tensor:
        """φ(s·k) times a constant per feature that depends on ω and the dtype only, never on the data.

        positive: exp(ℓ_r(k) − c_r) with c_r = ``key_shift`` = ‖ω_r‖²/2 − h. Since ωᵀk − ‖k‖²/2 ≤ ‖ω‖²/2
        for every k, each key feature is at most e^h = finfo.max^0.45, leaving the rest
        of the range for the sums over keys. Without the headroom h typical keys sit
        near e^{−d/2} and underflow in float32 from d ≈ 190; with it, from d ≈ 224
        (unit-variance inputs), where the normaliser check raises. A data-independent shift
        cannot leak a future key into a past output (the bug of subtracting a max
        over all key positions).
        """
        x, omega = self._prepare(x)
        if self.kind == "trig":
            return trig_random_features(x, omega)
        return torch.exp(positive_log_features(x, omega) - self.key_shift(x.dtype).to(x.device, x.dtype))

    def for_queries(self, x: torch.Tensor) -> torch.Tensor:
        """φ(s·q) times a positive factor per query, which cancels between numerator and denominator.

        positive: the per-feature constant of ``for_keys`` is added back here, then each
        query's largest log-feature is subtracted, so every feature is ≤ 1 and the
        largest is exactly 1. trig: the envelope exp(‖q‖²/2) is dropped.
        """
        x, omega = self._prepare(x)
        if self.kind == "trig":
            projection = x @ omega.transpose(-2, -1)  # [..., n, m]
            return torch.cat([projection.sin(), projection.cos()], dim=-1)
        log_features = positive_log_features(x, omega) + self.key_shift(x.dtype).to(x.device, x.dtype)  # [..., n, m]
        return torch.exp(log_features - log_features.amax(dim=-1, keepdim=True))

    def key_shift(self, dtype: torch.dtype) -> torch.Tensor:
        """c_r = ‖ω_r‖²/2 − h, [m] float64: the ceiling of ωᵀx − ‖x‖²/2 less a headroom h = 0.45·log(finfo.max).

        h ≈ 40 for float32 and ≈ 319 for float64; ``for_keys`` divides φ_r by e^{c_r}.
        """
        return self.omega.pow(2).sum(-1) / 2 - 0.45 * math.log(torch.finfo(dtype).max)

    def _prepare(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        require_tensor("x", x, min_dims=1)
        if x.shape[-1] != self.dim:
            raise ValueError(f"PerformerFeatures was built for dim={self.dim}, got inputs with {x.shape[-1]} features")
        return x * self.scale, self.omega.to(device=x.device, dtype=x.dtype)
