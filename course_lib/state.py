"""The ledger carried along a stream: constant-size state (S, z) for causal linear attention."""

import torch

from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair
from course_lib.linear_forms import chunked_form
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
        chunk_size: int = 64,
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
        self.S: torch.Tensor | None = None  # [..., f, dv]
        self.z: torch.Tensor | None = None  # [..., f]
        self.tokens_seen = 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the ledger: (f·dv + f) numbers per batch/head entry."""
        if self.S is None:
            return 0
        return self.S.nbytes + self.z.nbytes

    def reset(self) -> None:
        """Forget the stream."""
        self.S, self.z, self.tokens_seen = None, None, 0

    def extend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Feed a chunk q, k [..., c, d], v [..., c, dv]; return its outputs [..., c, dv].

        Causal inside the chunk and after everything seen before. On error the ledger
        is left as it was.
        """
        check_qkv(q, k, v, causal=True)
        q, k, v = broadcast_qkv(q, k, v)
        phi_q, phi_k = feature_pair(self.feature_map, q, k)  # [..., c, f] each
        out_dtype = v.dtype
        if self.ledger_dtype is not None:
            phi_q, phi_k, v = (x.to(self.ledger_dtype) for x in (phi_q, phi_k, v))
        ledger = None if self.S is None else self._check_matches(phi_k, v)
        if self.decay is None:
            numerator, denominator, (S, z) = chunked_form(
                phi_q, phi_k, v, causal=True, chunk_size=self.chunk_size, ledger=ledger
            )
        else:
            log_gamma = log_decay(self.decay, q.shape[:-2], phi_q)
            numerator, denominator, (S, z) = decayed_chunked_form(
                phi_q, phi_k, v, log_gamma, chunk_size=self.chunk_size, ledger=ledger
            )
        out = normalise(numerator, denominator, self.eps).to(out_dtype)
        self.S, self.z = S, z
        self.tokens_seen += q.shape[-2]
        return out

    def step(self, q_t: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor) -> torch.Tensor:
        """Feed one token q_t, k_t [..., d], v_t [..., dv]; return o_t [..., dv]."""
        for name, x in (("q_t", q_t), ("k_t", k_t), ("v_t", v_t)):
            if not isinstance(x, torch.Tensor) or x.dim() < 1:
                raise ValueError(f"{name} must be a tensor of shape [..., d] (one token), got {x!r:.60}")
        return self.extend(q_t.unsqueeze(-2), k_t.unsqueeze(-2), v_t.unsqueeze(-2)).squeeze(-2)

    def _check_matches(self, phi_k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if phi_k.shape[:-2] != self.S.shape[:-2] or phi_k.shape[-1] != self.S.shape[-2]:
            raise ValueError(
                f"k's batch dims and features {tuple(phi_k.shape[:-2])}, f={phi_k.shape[-1]} do not match the "
                f"ledger built so far {tuple(self.S.shape[:-2])}, f={self.S.shape[-2]}; call reset() for a new stream"
            )
        if v.shape[-1] != self.S.shape[-1]:
            raise ValueError(f"v has dv={v.shape[-1]} but the ledger was built with dv={self.S.shape[-1]}")
        if phi_k.dtype != self.S.dtype or phi_k.device != self.S.device:
            raise ValueError(
                f"inputs are {phi_k.dtype} on {phi_k.device} but the ledger is {self.S.dtype} on {self.S.device}"
            )
        return self.S, self.z
