"""One token of a stream, lean: the ledger recurrence behind ``LinearAttentionState.step``.

Ŝ ← γŜ + φ(k_t)[v_t | 1]ᵀ, then [o_t·den | den] = φ(q_t)ᵀŜ, on the packed ledger Ŝ = [S | z]
[B, f, dv + 1]. At B·H = 8, d = 64 that is ~70k multiply-adds, microseconds of arithmetic, so a
step's time is the dispatch of its torch ops (1–4 µs each on a 2-core CPU, notebook 08). A
``TokenStep`` therefore does the fewest ops it can, about ten, into buffers allocated once per
stream, with one host sync:

* q_t and k_t are stacked into one buffer, so the feature map runs once for both;
* [v_t | 1] is a buffer whose ones column is written once;
* the update is one ``addcmul`` (an outer product added to the old ledger, out of place: the
  ledger is replaced only once the token is accepted) and the read one ``bmm``;
* the check divides the whole read row by its normaliser, [o_t | den/(den + eps)], and sums it.
  With elu + 1 (``feature_maps.bad_values_reach_the_sums``) every NaN or ∞ in q, k or v and
  every normaliser of 0 turns that sum non-finite, so a finite sum accepts the token. Anything
  else goes through the shared ``validation.check_result`` with the sum of q_t, k_t as
  checksum (ReLU maps −∞ to 0), which names the culprit (``validation.Suspects``).

Not differentiable (it writes into buffers): ``LinearAttentionState.step`` sends a token whose
inputs or ledger need a gradient through ``extend``, which is.
"""

import math

import torch

from course_lib.feature_maps import bad_values_reach_the_sums, into_buffers, query_key_features
from course_lib.validation import Suspects, check_result, working_dtype


class TokenStep:
    """The step for one stream's shapes: tokens q_t, k_t [*batch, d], v_t [*batch, dv], ledger
    [*batch, f, dv + 1] in its own dtype; ``log_gamma`` [*batch] or None (no decay).

    Every buffer and every view of one is made here, once: a view costs a dispatch too."""

    def __init__(self, q_t: torch.Tensor, v_t: torch.Tensor, ledger: torch.Tensor, feature_map, eps: float,
                 log_gamma: torch.Tensor | None):
        *batch, f, width = ledger.shape
        B, d = ledger[..., 0, 0].numel(), q_t.shape[-1]
        self.feature_map, self.eps, self.shape = feature_map, eps, (B, f, width)
        self.tokens = q_t.new_empty(2, *batch, d, dtype=working_dtype(q_t.dtype))  # [q_t; k_t]
        self.into = into_buffers(feature_map)  # writes φ into the two buffers (elu + 1), or None
        self.scratch = (torch.empty_like(self.tokens), torch.empty_like(self.tokens))  # φ and its scratch
        v_hat = ledger.new_ones(*batch, 1, width)  # [v_t | 1]: the ones column written once
        self.v_hat, self.v_slot = v_hat, v_hat[..., 0, :-1]  # v_t is copied into v_slot [*batch, dv]
        self.read = ledger.new_empty(B, 1, width)  # [φ(q)ᵀS | φ(q)ᵀz]
        self.read_rows, self.den = self.read.view(*batch, width), self.read.view(*batch, width)[..., -1:]
        self.gamma = None if log_gamma is None else log_gamma.exp().to(ledger.dtype)[..., None, None]
        self.one_sum_decides = bad_values_reach_the_sums(feature_map)  # see the module docstring
        self.same_dtype = self.tokens.dtype == ledger.dtype
        phi = self.scratch[0]  # where ``into`` writes φ: views of it serve every token
        self.phi_views = (phi[0].view(B, 1, d), phi[1].unsqueeze(-1))

    def __call__(self, q_t: torch.Tensor, k_t: torch.Tensor, v_t: torch.Tensor, ledger: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """(o_t [*batch, dv] in v_t's dtype, the ledger after [*batch, f, dv + 1]); raises on bad values."""
        if v_t.dtype != self.tokens.dtype:  # half inputs are computed in float32 (as ``extend`` does)
            q_t, k_t = q_t.to(self.tokens.dtype), k_t.to(self.tokens.dtype)
        torch.stack((q_t, k_t), out=self.tokens)
        phi_q, phi_k = self._features()  # [B, 1, f], [*batch, f, 1]
        self.v_slot.copy_(v_t)
        decayed = ledger if self.gamma is None else ledger * self.gamma
        after = torch.addcmul(decayed, phi_k, self.v_hat)  # Ŝ after the token [*batch, f, dv + 1]
        torch.bmm(phi_q, after.view(self.shape), out=self.read)  # [B, 1, dv + 1]: [φ(q)ᵀS | φ(q)ᵀz]
        normaliser = self.den if self.eps == 0 else self.den + self.eps  # [*batch, 1]
        scaled = self.read_rows / normaliser  # [*batch, dv + 1]: [o_t | den / (den + eps)]
        out = scaled[..., :-1]
        if not (self.one_sum_decides and math.isfinite(scaled.sum().item())):  # the shared check, or its verdict
            features = lambda: query_key_features(self.feature_map, q_t, k_t)  # noqa: E731 - on failure only
            suspects = Suspects({"q": q_t, "k": k_t, "v": v_t}, features, checksum=self.tokens.sum())
            check_result(out, normaliser, self.eps, suspects)
        return (out if out.dtype == v_t.dtype else out.to(v_t.dtype)), after

    def _features(self) -> tuple[torch.Tensor, torch.Tensor]:
        """φ(q_t) [B, 1, f] and φ(k_t) [*batch, f, 1] in the ledger's dtype; into the buffers where the map can."""
        if self.into is not None:
            phi = self.into(self.tokens, *self.scratch)
            if self.same_dtype:
                return self.phi_views
        elif hasattr(self.feature_map, "for_queries"):  # its own query and key maps (``query_key_features``)
            phi = torch.stack(query_key_features(self.feature_map, self.tokens[0], self.tokens[1]))
        else:
            phi = self.feature_map(self.tokens)  # [2, *batch, f]: one call for both
        if not self.same_dtype:
            phi = phi.to(self.read.dtype)
        return phi[0].reshape(self.shape[0], 1, -1), phi[1].unsqueeze(-1)
