"""The ledger carried along a stream: constant-size state (S, z) for causal linear attention."""

import torch

from course_lib.fast_forms import augment_values, auto_chunk_size, join_ledger, split_ledger
from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair
from course_lib.linear_forms import causal_form
from course_lib.retention import decayed_chunked_form, log_decay
from course_lib.validation import broadcast_qkv, check_chunk_size, check_eps, check_qkv, normalise


class LinearAttentionState:
    """Streaming causal linear attention (notebook 05, "the ledger").

    Holds S = Σ φ(k_j)v_jᵀ [..., f, dv] and z = Σ φ(k_j) [..., f] over every token
    seen so far. ``step`` takes one token, ``extend`` a chunk; either way the output
    equals ``linear_attention(..., causal=True)`` on the whole stream, and the memory
    held (``nbytes``) does not grow with the stream.

    ``ledger_dtype`` (e.g. ``torch.float64``) keeps S and z, and the arithmetic of each
    chunk, in a wider dtype than the inputs; outputs come back in the inputs' dtype.
    Over a long float32 stream fed token by token the ledger otherwise drifts: each
    addition rounds to the ledger's precision (notebook 05 measures it).
    """

    def __init__(
        self,
        feature_map: FeatureMap = elu_plus_one,
        *,
        eps: float = 0.0,
        chunk_size: int | None = None,
        decay: float | torch.Tensor | None = None,
        ledger_dtype: torch.dtype | None = None,
    ):
        if ledger_dtype is not None and not (isinstance(ledger_dtype, torch.dtype) and ledger_dtype.is_floating_point):
            raise ValueError(f"ledger_dtype must be a floating-point torch.dtype or None, got {ledger_dtype!r}")
        self.ledger_dtype = ledger_dtype
        self.feature_map = feature_map
        self.decay = decay  # γ: the ledger fades by γ per token (retention); None keeps everything
        self.eps = check_eps(eps)
        self.chunk_size = check_chunk_size(chunk_size)
        self.ledger_hat: torch.Tensor | None = None  # [S | z]: [..., f, dv+1]
        self.tokens_seen = 0

    @property
    def S(self) -> torch.Tensor | None:
        """Σ_j φ(k_j) v_jᵀ over the tokens seen, [..., f, dv] (a view of ``ledger_hat``)."""
        return None if self.ledger_hat is None else split_ledger(self.ledger_hat, self.ledger_hat.shape[-1] - 1)[0]

    @property
    def z(self) -> torch.Tensor | None:
        """Σ_j φ(k_j) over the tokens seen, [..., f] (a view of ``ledger_hat``)."""
        return None if self.ledger_hat is None else split_ledger(self.ledger_hat, self.ledger_hat.shape[-1] - 1)[1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the ledger: (f·dv + f) numbers per batch/head entry."""
        return 0 if self.ledger_hat is None else self.ledger_hat.nbytes

    def reset(self) -> None:
        """Forget the stream."""
        self.ledger_hat, self.tokens_seen = None, 0

    def extend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Feed a chunk q, k [..., c, d], v [..., c, dv]; return its outputs [..., c, dv].

        Causal inside the chunk and after everything seen before. On error the ledger
        is left as it was.
        """
        phi_q, phi_k, v_in = self._features(q, k, v)  # [..., c, f], [..., c, f], [..., c, dv]
        ledger = None if self.ledger_hat is None else (self.S, self.z)
        chunk_size = self.chunk_size or auto_chunk_size(q.shape[-2], phi_q.shape[-1], v.shape[-1])
        if self.decay is None:
            numerator, denominator, ledger = causal_form(phi_q, phi_k, v_in, chunk_size=chunk_size, ledger=ledger)
        else:
            log_gamma = log_decay(self.decay, phi_q.shape[:-2], phi_q)
            numerator, denominator, ledger = decayed_chunked_form(
                phi_q, phi_k, v_in, log_gamma, chunk_size=chunk_size, ledger=ledger
            )
        return self._commit(join_ledger(ledger), numerator, denominator, v.dtype)

    def step(self, q_t: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor) -> torch.Tensor:
        """Feed one token q_t, k_t [..., d], v_t [..., dv]; return o_t [..., dv].

        Without decay this is the recurrence itself, a handful of small ops whatever the
        stream's length: Ŝ ← Ŝ + φ(k_t)[v_t | 1]ᵀ, then [o_t·den | den] = φ(q_t)ᵀŜ.
        """
        for name, x in (("q_t", q_t), ("k_t", k_t), ("v_t", v_t)):
            if not isinstance(x, torch.Tensor) or x.dim() < 1:
                raise ValueError(f"{name} must be a tensor of shape [..., d] (one token), got {x!r:.60}")
        q, k, v = (x.unsqueeze(-2) for x in (q_t, k_t, v_t))  # [..., 1, ·]
        if self.decay is not None or self.ledger_hat is None:
            return self.extend(q, k, v).squeeze(-2)
        phi_q, phi_k, v_in = self._features(q, k, v)  # [..., 1, f], [..., 1, f], [..., 1, dv]
        v_hat = augment_values(v_in, 1, v_in.shape[-1] + 1)  # [..., 1, dv+1]: [v_t | 1]
        ledger_hat = self.ledger_hat + phi_k.transpose(-2, -1) @ v_hat  # [..., f, dv+1]
        out_hat = phi_q @ ledger_hat  # [..., 1, dv+1]
        return self._commit(ledger_hat, out_hat[..., :-1], out_hat[..., -1], v.dtype).squeeze(-2)

    def _features(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Checked (φ(q), φ(k), v) in the ledger's dtype, matching the ledger built so far."""
        check_qkv(q, k, v, causal=True)
        q, k, v = broadcast_qkv(q, k, v)
        phi_q, phi_k = feature_pair(self.feature_map, q, k)  # [..., c, f] each
        if self.ledger_dtype is not None:
            phi_q, phi_k, v = (x.to(self.ledger_dtype) for x in (phi_q, phi_k, v))
        if self.ledger_hat is not None:
            self._check_matches(phi_k, v)
        return phi_q, phi_k, v

    def _commit(
        self, ledger_hat: torch.Tensor, numerator: torch.Tensor, denominator: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        """Normalise (which may refuse the chunk), then keep the new ledger."""
        out = normalise(numerator, denominator, self.eps, in_place=True).to(out_dtype)
        self.ledger_hat = ledger_hat
        self.tokens_seen += numerator.shape[-2]
        return out

    def _check_matches(self, phi_k: torch.Tensor, v: torch.Tensor) -> None:
        *batch, f, dv_hat = self.ledger_hat.shape  # [..., f, dv+1]
        if phi_k.shape[:-2] != tuple(batch) or phi_k.shape[-1] != f:
            raise ValueError(
                f"k's batch dims and features {tuple(phi_k.shape[:-2])}, f={phi_k.shape[-1]} do not match the "
                f"ledger built so far {tuple(batch)}, f={f}; call reset() for a new stream"
            )
        if v.shape[-1] != dv_hat - 1:
            raise ValueError(f"v has dv={v.shape[-1]} but the ledger was built with dv={dv_hat - 1}")
        if phi_k.dtype != self.ledger_hat.dtype or phi_k.device != self.ledger_hat.device:
            raise ValueError(
                f"inputs are {phi_k.dtype} on {phi_k.device} but the ledger is "
                f"{self.ledger_hat.dtype} on {self.ledger_hat.device}"
            )
