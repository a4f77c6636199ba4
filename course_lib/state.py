"""The ledger carried along a stream: constant-size state (S, z) for causal linear attention."""

import torch

from course_lib import fast_forms
from course_lib.fast_step import TokenStep
from course_lib.feature_maps import FeatureMap, elu_plus_one, feature_pair
from course_lib.validation import check_decay, check_eps, check_inputs, check_int


class CarriedLedger:
    """What the streams of the delta rule and the gated ledger share: one ledger S [..., dk, dv] carried
    from call to call (``reset``, ``detach_``, ``nbytes``, ``tokens_seen``). When the inputs require
    grad so does the ledger (truncated backprop: ``detach_`` cuts it)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """Forget the stream."""
        self.S: torch.Tensor | None = None  # [..., dk, dv] in the arithmetic's dtype
        self.tokens_seen = 0

    def detach_(self) -> None:
        """Keep the ledger's values, drop its gradient history."""
        if self.S is not None:
            self.S = self.S.detach()

    @property
    def nbytes(self) -> int:
        """Bytes held: dk·dv numbers per batch/head entry, however long the stream."""
        return 0 if self.S is None else self.S.nbytes

    def _carry(self, out: torch.Tensor, S: torch.Tensor, tokens: int) -> torch.Tensor:
        """Keep the ledger after ``tokens`` more tokens; return their outputs."""
        self.S, self.tokens_seen = S, self.tokens_seen + tokens
        return out


class LinearAttentionState:
    """Streaming causal linear attention (notebook 05, "the ledger").

    Holds S = Σ φ(k_j)v_jᵀ [..., f, dv] and z = Σ φ(k_j) [..., f] over every token
    seen so far (faded by γ per token with ``decay``). ``step`` takes one token, ``extend``
    a chunk; either way the output equals ``linear_attention(..., causal=True)`` on the
    whole stream, and the memory held (``nbytes``) does not grow with the stream.
    When the inputs require grad, so does the ledger: backpropagating through several
    ``extend`` calls trains through the stream (truncated backprop: ``detach_`` cuts it).

    ``ledger_dtype`` (e.g. ``torch.float64``) keeps S and z, and the arithmetic of each
    chunk, in a wider dtype than the inputs; outputs come back in the inputs' dtype.
    Over a long float32 stream fed token by token the ledger otherwise drifts: each
    addition rounds to the ledger's precision (notebook 05 measures it). float16/bfloat16
    inputs get a float32 ledger unless ``ledger_dtype`` says otherwise.
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
        self.eps = check_eps(eps, ledger_dtype)
        self.chunk_size = check_int("chunk_size", chunk_size, optional=True)
        self.reset()

    @property
    def S(self) -> torch.Tensor | None:
        """Σ_j φ(k_j) v_jᵀ over the tokens seen, [..., f, dv]."""
        return None if self.ledger is None else self.ledger.S

    @property
    def z(self) -> torch.Tensor | None:
        """Σ_j φ(k_j) over the tokens seen, [..., f]."""
        return None if self.ledger is None else self.ledger.z

    @property
    def nbytes(self) -> int:
        """Bytes held by the ledger: (f·dv + f) numbers per batch/head entry."""
        return 0 if self.ledger is None else self.ledger.nbytes

    def reset(self) -> None:
        """Forget the stream."""
        self.ledger: fast_forms.PackedLedger | None = None
        self.tokens_seen = 0
        self._token_shapes = None  # (q_t, k_t, v_t shapes, dtype, device) that ``step`` has already checked
        self._token_step = None  # the fast step for tokens of those shapes (``fast_step.TokenStep``)

    def detach_(self) -> None:
        """Keep the ledger's values but cut the gradient history (truncated backprop through the stream)."""
        if self.ledger is not None:
            self.ledger = fast_forms.PackedLedger(self.ledger.packed.detach())

    def extend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Feed a chunk q, k [..., c, d], v [..., c, dv]; return its outputs [..., c, dv].

        Causal inside the chunk and after everything seen before. On error the ledger
        is left as it was.
        """
        inputs = check_inputs(q, k, v, causal=True, eps=self.eps, chunk_size=self.chunk_size, decay=self.decay,
                              ledger_dtype=self.ledger_dtype)  # eps=1e300 fits a float64 ledger, not a float32 one
        q, k, v = inputs.q, inputs.k, inputs.v  # half inputs: float32
        work = self.ledger_dtype or q.dtype
        self._check_matches(q.shape[:-2], v.shape[-1], work, q.device)
        sums = fast_forms.causal_attention(q, k, v, self.feature_map, chunk_size=inputs.chunk_size, eps=inputs.eps,
                                           log_gamma=inputs.log_gamma, ledger=self.ledger, dtype=work)
        features = lambda: feature_pair(self.feature_map, q, k)  # noqa: E731 - recomputed on failure only
        out = inputs.finish(sums.out, sums.normaliser, features=features, checksum=sums.checksum)
        self.ledger, self.tokens_seen = sums.ledger, self.tokens_seen + q.shape[-2]
        return out

    def step(self, q_t: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor) -> torch.Tensor:
        """Feed one token q_t, k_t [..., d], v_t [..., dv]; return o_t [..., dv] (after the first token a
        view of a fresh [..., dv + 1] row, so not contiguous: ``.contiguous()`` if a caller needs it).

        The recurrence itself, whatever the stream's length: Ŝ ← γŜ + φ(k_t)[v_t | 1]ᵀ, then
        [o_t·den | den] = φ(q_t)ᵀŜ. The first token goes through ``extend`` (every check); later
        tokens of the same shapes take ``fast_step.TokenStep`` (about ten ops, one host sync),
        unless a gradient is needed, which ``extend`` provides.
        """
        signature = _signature(q_t, k_t, v_t)
        if signature == self._token_shapes and not self._needs_grad(q_t, k_t, v_t):
            out, after = self._token_step(q_t, k_t, v_t, self.ledger.packed)
            self.ledger, self.tokens_seen = fast_forms.PackedLedger(after), self.tokens_seen + 1
            return out
        for name, x in (("q_t", q_t), ("k_t", k_t), ("v_t", v_t)):
            if not isinstance(x, torch.Tensor) or x.dim() < 1:
                raise ValueError(f"{name} must be a tensor of shape [..., d] (one token), got {x!r:.60}")
        out = self.extend(q_t.unsqueeze(-2), k_t.unsqueeze(-2), v_t.unsqueeze(-2)).squeeze(-2)
        if q_t.shape == k_t.shape and q_t.shape[:-1] == v_t.shape[:-1] == self.ledger.packed.shape[:-2]:
            log_gamma = None if self.decay is None else check_decay(
                self.decay, q_t.shape[:-1], self.ledger.packed)[0]  # its values were checked by extend
            self._token_step = TokenStep(q_t, v_t, self.ledger.packed, self.feature_map, self.eps, log_gamma)
            self._token_shapes = signature  # later tokens like this one take the fast path
        return out

    def _needs_grad(self, *tokens: torch.Tensor) -> bool:
        if not torch.is_grad_enabled():
            return False
        tracked = (*tokens, self.ledger.packed) + ((self.decay,) if isinstance(self.decay, torch.Tensor) else ())
        return any(x.requires_grad for x in tracked)

    def _check_matches(self, batch: torch.Size, dv: int, dtype: torch.dtype, device: torch.device) -> None:
        if self.ledger is None:
            return
        packed = self.ledger.packed  # [..., f, dv + 1]
        if batch != packed.shape[:-2]:
            raise ValueError(
                f"k's batch dims {tuple(batch)} do not match the ledger built so far {tuple(packed.shape[:-2])}; "
                "call reset() for a new stream"
            )
        if dv != packed.shape[-1] - 1:
            raise ValueError(f"v has dv={dv} but the ledger was built with dv={packed.shape[-1] - 1}")
        if dtype != packed.dtype or device != packed.device:
            raise ValueError(f"inputs are {dtype} on {device} but the ledger is {packed.dtype} on {packed.device}")


def _signature(*tokens: object) -> tuple:
    """What ``step`` compares with the first token's: shapes, dtypes, devices (None for a non-tensor)."""
    return tuple((x.shape, x.dtype, x.device) if isinstance(x, torch.Tensor) else None for x in tokens)
