"""The engine behind ``linear_attention(method="auto")``: the same sums as ``linear_forms``, fewer passes.

* **Causal: one loop over chunks, not tokens** (``causal_attention``; it serves
  ``linear_attention``, the positional forms and ``LinearAttentionState``). Chunk c (L ≤ C
  tokens, all batch/head entries at once) costs four small matmuls whose operands stay in
  cache, tril(Qc Kcᵀ) V̂c + Qc Ŝ and Ŝ += Kcᵀ V̂c; decay γ only rescales them (``_Decay``).
  The ledger Ŝ [B, f, w] is the only state carried, so the work is linear in n and nothing
  of size n·f·dv is ever held. Without gradients the features are computed
  a block of rows at a time, so no whole φ(Q), φ(K) copy exists, and each block is divided
  straight into the output.
* **The normaliser rides along.** Values get a column of ones, v̂ = [v | 1 | 0…] (w = dv + 1
  rounded up to a multiple of 8: a 65-wide matmul ran ~25 % slower than a 72-wide one here),
  so Σ_j φ(k_j) v̂_jᵀ = [S | z | 0…] and every matmul yields numerator and denominator together.
  This packing is private: ``PackedLedger`` hands out S and z.
* **Its own backward** (``_ChunkLoop``): a second loop over the chunks in reverse, recomputing
  each chunk's block from the saved inputs, so training memory stays O(n·(f + dv)) plus one
  ledger per chunk, never O(n·f·dv) (see ``_ChunkLoop``).
* A Python loop of n/C steps costs microseconds per step, small next to the matmuls on a CPU.
  Non-causal needs no loop: S = φ(K)ᵀV and z = Σ_j φ(k_j) once (``fast_noncausal``).
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F

from course_lib.feature_maps import bad_values_reach_the_sums, check_feature_pair, into_buffers, query_key_features
from course_lib.linear_forms import chunked_form, decay_matrix, divide

NO_EPS = None  # ``causal_attention(eps=NO_EPS)`` returns the raw numerator and denominator


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


class PackedLedger:
    """A stream's ledger (S [..., f, dv], z [..., f]) stored as one tensor [S | z] [..., f, dv + 1].

    One matmul then updates or reads both. ``S`` and ``z`` are views; ``packed`` is the
    tensor itself (it carries the gradient when the stream's inputs require grad).
    """

    def __init__(self, packed: torch.Tensor):
        self.packed = packed

    @property
    def S(self) -> torch.Tensor:
        return self.packed[..., :-1]

    @property
    def z(self) -> torch.Tensor:
        return self.packed[..., -1]

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes


class Sums(NamedTuple):
    """One pass of linear attention (``causal_attention``; ``attention.linear_sums``).

    With eps = NO_EPS, ``out`` and ``normaliser`` are the raw numerator and denominator.
    """

    out: torch.Tensor  # [..., n, dv]: numerator / normaliser
    normaliser: torch.Tensor  # [..., n]: denominator + eps
    ledger: PackedLedger | None  # the engine's ledger after the last token (None from the readable forms)
    checksum: torch.Tensor | None  # 0-dim, finite exactly when q and k are; None: the caller's Σq + Σk


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
        summary = summary + phi_k[..., whole:, :].transpose(-2, -1) @ v[..., whole:, :]
    return summary


def fast_noncausal(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(numerator [..., n, dv], denominator [..., n]) = (φ(Q)S, φ(Q)z) with S = φ(K)ᵀV, z = Σ_j φ(k_j)."""
    numerator = phi_q @ summarise_keys(phi_k, v)  # [..., n, dv]
    denominator = (phi_q @ phi_k.sum(-2).unsqueeze(-1)).squeeze(-1)  # [..., n]
    return numerator, denominator


class _Decay:
    """The factors γ^x that decay puts into a chunk of up to C tokens, for log γ [B].

    within [B, C, C] = γ^{t−s} (s ≤ t, else 0); from_ledger [B, C, 1] = γ^{t+1};
    to_end [B, C, 1] = γ^{C−1−s}. A chunk of L < C tokens uses the leading L×L block,
    the first L rows of from_ledger and the last L of to_end; across(L) = γ^L [B, 1, 1].
    ``for_block`` scales a whole block of full chunks at once (the factors repeat every C rows).
    """

    def __init__(self, log_gamma: torch.Tensor, C: int):
        t = torch.arange(C, dtype=log_gamma.dtype, device=log_gamma.device)
        self.log_gamma = log_gamma[:, None, None]  # [B, 1, 1]
        self.C = C
        self.within = decay_matrix(C, log_gamma)  # [B, C, C]
        self.from_ledger = torch.exp((t + 1)[:, None] * self.log_gamma)  # [B, C, 1]
        self.to_end = torch.exp((C - 1 - t)[:, None] * self.log_gamma)  # [B, C, 1]
        self.across_chunk = torch.exp(C * self.log_gamma)  # [B, 1, 1]: γ^C

    def mask(self, scores: torch.Tensor) -> torch.Tensor:
        L = scores.shape[-1]
        return scores.mul_(self.within[:, :L, :L])

    def reader(self, qc: torch.Tensor) -> torch.Tensor:
        return qc * self.from_ledger[:, : qc.shape[1]]

    def writer(self, kc: torch.Tensor) -> torch.Tensor:
        return kc * self.to_end[:, self.C - kc.shape[1] :]

    def across(self, L: int) -> torch.Tensor:
        return self.across_chunk if L == self.C else torch.exp(L * self.log_gamma)

    def for_block(self, q_block: torch.Tensor, k_block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(reader(q), writer(k)) of every full chunk of a block [B, R, f], in two ops, not two per chunk.

        Rows past the last full chunk are returned unscaled: a shorter last chunk scales its own.
        """
        B, R, f = q_block.shape
        full = R - R % self.C
        q_read, k_write = q_block.clone(), k_block.clone()
        chunks = (B, full // self.C, self.C, f)
        q_read[:, :full].view(chunks).mul_(self.from_ledger[:, None])
        k_write[:, :full].view(chunks).mul_(self.to_end[:, None])
        return q_read, k_write


class _NoDecay:
    """γ = 1: the causal mask is a tril and every other factor is 1 (nothing is multiplied)."""

    @staticmethod
    def mask(scores: torch.Tensor) -> torch.Tensor:
        return scores.tril_()

    @staticmethod
    def reader(qc: torch.Tensor) -> torch.Tensor:
        return qc

    writer = reader

    @staticmethod
    def across(L: int) -> None:
        return None

    @staticmethod
    def for_block(q_block: torch.Tensor, k_block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q_block, k_block


def _decay_for(log_gamma: torch.Tensor | None, C: int) -> _Decay | _NoDecay:
    return _NoDecay() if log_gamma is None else _Decay(log_gamma, C)


def _values_buffer(v: torch.Tensor, rows: int) -> torch.Tensor:
    """[B, rows, w] with the ones column and the zero padding set: [v | 1 | 0…] once v is copied into [..., :dv]."""
    dv = v.shape[-1]
    buffer = v.new_empty(v.shape[0], rows, augmented_width(dv))
    buffer[..., dv] = 1.0
    buffer[..., dv + 1 :] = 0.0
    return buffer


BLOCK_ROWS = 512  # rows whose features and [v | 1] are prepared at once: few elementwise ops, buffers of ~1 MB


def _forward_loop(features, v: torch.Tensor, ledger: torch.Tensor, decay, C: int, eps: float | None,
                  saved_ledgers: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunk loop. ``features(start, stop)`` -> (φq, φk) [B, rows, f]; v [B, n, dv]; ``ledger``
    [B, f, w] is updated in place to the ledger after the sequence.

    Features and augmented values are prepared a block of ``BLOCK_ROWS`` rows (whole chunks) at a
    time: an elementwise op on a 64-row chunk costs as much in overhead as in arithmetic.
    Returns (out [B, n, dv], normaliser [B, n]): out = numerator / (denominator + eps) and
    normaliser = denominator + eps, or the raw numerator and denominator when eps is NO_EPS.
    ``saved_ledgers`` [n/C, B, f, w], if given, receives the ledger before each chunk.
    """
    B, n, dv = v.shape
    out = v.new_empty(B, n, dv)
    normaliser = v.new_empty(B, n)
    rows = C * max(1, BLOCK_ROWS // C)
    v_hat = _values_buffer(v, min(rows, n))  # [B, rows, w]
    sums = torch.empty_like(v_hat)  # [B, rows, w]: each chunk's [num | den | 0…], divided once per block
    for block in range(0, n, rows):
        q_block, k_block = features(block, min(block + rows, n))  # [B, R, f]
        R = q_block.shape[1]
        v_block, sums_block = v_hat[:, :R], sums[:, :R]  # a last block may be shorter
        v_block[..., :dv] = v[:, block : block + R]
        q_read_block, k_write_block = decay.for_block(q_block, k_block)  # γ^{t+1} q, γ^{C−1−s} k
        for offset in range(0, R, C):
            local = slice(offset, offset + C)
            qc, kc, vc = q_block[:, local], k_block[:, local], v_block[:, local]  # [B, L, ·]
            q_read, k_write = q_read_block[:, local], k_write_block[:, local]
            if qc.shape[1] < C:  # the sequence's shorter last chunk
                q_read, k_write = decay.reader(qc), decay.writer(kc)
            if saved_ledgers is not None:
                saved_ledgers[(block + offset) // C] = ledger
            scores = decay.mask(torch.bmm(qc, kc.transpose(1, 2)))  # [B, L, L]
            sums_block[:, local] = torch.bmm(scores, vc).baddbmm_(q_read, ledger)  # [B, L, w]
            across = decay.across(qc.shape[1])
            if across is not None:
                ledger.mul_(across)
            ledger.baddbmm_(k_write.transpose(1, 2), vc)
        rows_out = slice(block, block + R)
        if eps is NO_EPS:
            out[:, rows_out], normaliser[:, rows_out] = sums_block[..., :dv], sums_block[..., dv]
        else:
            torch.add(sums_block[..., dv], eps, out=normaliser[:, rows_out])
            torch.div(sums_block[..., :dv], normaliser[:, rows_out, None], out=out[:, rows_out])
    return out, normaliser


class _ChunkLoop(torch.autograd.Function):
    """The chunk loop on features φq, φk [B, n, f] and values v [B, n, dv], differentiable.

    forward(φq, φk, v, ledger [B, f, w], log γ [B] or None, C, eps) ->
    (out [B, n, dv], normaliser [B, n] (not differentiable), ledger after [B, f, w]).
    Saved for backward: φq, φk, v, out, normaliser and the ledger before each chunk
    [n/C, B, f, w], i.e. O(n·(f + dv) + (n/C)·f·w) numbers (with C = 64, f = dv = 64 the
    ledgers are 72n numbers beside the inputs' 192n); nothing of size n·f·dv. The backward adds
    [v | 1] and dP for the whole sequence (2·n·w numbers) so that its loop only slices them.
    backward: the loop in reverse. Per chunk, with P = A V̂ + Q̃ Ŝ_b, A = (Q Kᵀ) ⊙ W, Q̃ = a ⊙ Q,
    Ŝ_a = λ Ŝ_b + (b ⊙ K)ᵀ V̂ (a = γ^{t+1}, b = γ^{L−1−s}, λ = γ^L, all 1 without decay) and
    dŜ_a flowing back from later chunks:
        dA = (dP V̂ᵀ) ⊙ W,  dQ = dA K + a ⊙ (dP Ŝ_bᵀ),  dK = dAᵀ Q + b ⊙ (V̂ dŜ_aᵀ),
        dV̂ = Aᵀ dP + (b ⊙ K) dŜ_a,  dŜ_b = λ dŜ_a + Q̃ᵀ dP.
    γ itself gets no gradient here (``causal_attention`` routes a γ that requires grad to
    the readable ``linear_forms.chunked_form``).
    """

    @staticmethod
    def forward(ctx, phi_q, phi_k, v, ledger, log_gamma, C, eps):
        ledger = ledger.clone()
        saved = ledger.new_empty(-(-v.shape[1] // C), *ledger.shape)
        decay = _decay_for(log_gamma, C)
        out, normaliser = _forward_loop(lambda a, b: (phi_q[:, a:b], phi_k[:, a:b]), v, ledger, decay, C, eps, saved)
        if eps is not NO_EPS:
            ctx.mark_non_differentiable(normaliser)
        ctx.save_for_backward(phi_q, phi_k, v, out, normaliser, saved)
        ctx.log_gamma, ctx.C, ctx.eps = log_gamma, C, eps
        return out, normaliser, ledger

    @staticmethod
    def backward(ctx, d_out, d_normaliser, d_ledger):
        phi_q, phi_k, v, out, normaliser, saved = ctx.saved_tensors
        C, dv, decay = ctx.C, v.shape[-1], _decay_for(ctx.log_gamma, ctx.C)
        d_q, d_k, d_v = torch.empty_like(phi_q), torch.empty_like(phi_k), torch.empty_like(v)
        d_S = d_ledger.clone()  # [B, f, w]; autograd passes zeros for outputs that got no gradient
        v_hat = _values_buffer(v, v.shape[1])  # [B, n, w]: [v | 1 | 0…] once, O(n·w) like the inputs
        v_hat[..., :dv] = v
        d_p = _output_grad(d_out, d_normaliser, out, normaliser, ctx.eps, v_hat.shape[-1])  # [B, n, w]
        starts = list(range(0, v.shape[1], C))
        for chunk in reversed(range(len(starts))):
            start, stop = starts[chunk], min(starts[chunk] + C, v.shape[1])
            rows = slice(start, stop)
            qc, kc, vc, dpc, S_b = phi_q[:, rows], phi_k[:, rows], v_hat[:, rows], d_p[:, rows], saved[chunk]
            scores = decay.mask(torch.bmm(qc, kc.transpose(1, 2)))  # A [B, L, L]
            d_scores = decay.mask(torch.bmm(dpc, vc.transpose(1, 2)))  # dA [B, L, L]
            d_q[:, rows] = torch.baddbmm(decay.reader(torch.bmm(dpc, S_b.transpose(1, 2))), d_scores, kc)
            d_k[:, rows] = torch.baddbmm(decay.writer(torch.bmm(vc, d_S.transpose(1, 2))), d_scores.transpose(1, 2), qc)
            d_v[:, rows] = torch.baddbmm(torch.bmm(decay.writer(kc), d_S), scores.transpose(1, 2), dpc)[..., :dv]
            across = decay.across(stop - start)
            if across is not None:
                d_S.mul_(across)
            d_S.baddbmm_(decay.reader(qc).transpose(1, 2), dpc)
        return d_q, d_k, d_v, d_S, None, None, None


def _output_grad(d_out, d_normaliser, out, normaliser, eps, width: int) -> torch.Tensor:
    """dP [B, n, w], the gradient of every chunk's [num | den | 0…]: [dO/den | −Σ(dO·o)/den | 0…] when
    the loop divided (o = num/den), or [dnum | dden | 0…] when it returned the raw sums (eps = NO_EPS)."""
    B, n, dv = out.shape
    d_p = out.new_empty(B, n, width)
    d_p[..., dv + 1 :] = 0.0
    if eps is NO_EPS:
        d_p[..., :dv], d_p[..., dv] = d_out, d_normaliser
        return d_p
    scaled = torch.div(d_out, normaliser.unsqueeze(-1), out=d_p[..., :dv])  # [B, n, dv]
    d_p[..., dv] = -(scaled * out).sum(-1)
    return d_p


def causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, feature_map=None, *, chunk_size: int | None = None,
    eps: float | None = 0.0, log_gamma: torch.Tensor | None = None, ledger: PackedLedger | None = None,
    dtype: torch.dtype | None = None,
) -> Sums:
    """Causal linear attention by the chunk loop: ``Sums`` (out [..., n, dv], normaliser [..., n], the
    ledger after, and a checksum that is finite exactly when q and k are, given a finite normaliser:
    Σq + Σk, or Σz for a map whose bad values reach the sums; None when the loop ran under autograd,
    leaving Σq + Σk to the caller, ``validation.Suspects``).

    q, k [..., n, d] and v [..., n, dv] share their leading dims. ``feature_map`` None means q
    and k are features already. out = numerator / normaliser with normaliser = denominator +
    eps, or the raw (numerator, denominator) with eps = NO_EPS. ``log_gamma`` [...] decays the
    past by γ per token; ``ledger`` is carried in from earlier tokens; ``dtype`` is the
    arithmetic's (default q's). Differentiable in q, k, v and the ledger (``_ChunkLoop``);
    a γ that requires grad goes through the readable ``linear_forms.chunked_form`` instead.
    Values are not checked here: the caller checks the result (``validation.check_result``).
    """
    batch, n, dv = q.shape[:-2], q.shape[-2], v.shape[-1]
    B, dtype = batch.numel(), q.dtype if dtype is None else dtype
    q, k, v = (x.reshape(B, n, x.shape[-1]) for x in (q, k, v))
    v = v.to(dtype)
    into, z_is_the_checksum = into_buffers(feature_map), bad_values_reach_the_sums(feature_map)

    def features(start: int, stop: int, reuse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        qc, kc = q[:, start:stop], k[:, start:stop]
        if reuse and not z_is_the_checksum:
            reused.total.add_(qc.sum(dtype=reused.total.dtype)).add_(kc.sum(dtype=reused.total.dtype))
        if reuse and into is not None:
            return reused.apply(into, "q", qc), reused.apply(into, "k", kc)
        if feature_map is not None:  # a block copied first runs the map ~1.5× faster than a strided view
            qc, kc = query_key_features(feature_map, qc.contiguous(), kc.contiguous())
        return qc.to(dtype), kc.to(dtype)

    first_q, first_k = features(0, 1)  # the map's output shape, and whether it carries a gradient
    check_feature_pair(first_q, first_k, 1, 1)
    f = first_q.shape[-1]
    if ledger is not None and ledger.packed.shape[-2] != f:
        raise ValueError(f"k's features f={f} do not match the ledger built so far, f={ledger.packed.shape[-2]}; "
                         "call reset() for a new stream")
    C = auto_chunk_size(n, f, dv) if chunk_size is None else min(chunk_size, n)
    packed = v.new_zeros(B, f, dv + 1) if ledger is None else ledger.packed.reshape(B, f, dv + 1).to(dtype)
    log_gamma = None if log_gamma is None else log_gamma.reshape(B).to(dtype)
    tracked = (v, first_q, first_k, packed) + (() if log_gamma is None else (log_gamma,))
    if torch.is_grad_enabled() and any(x.requires_grad for x in tracked):
        out, normaliser, packed = _differentiable(features(0, n), v, packed, log_gamma, C, eps)
        total = None
    else:
        reused = _ReusedBlocks(q, dtype)
        packed = _pad_ledger(packed, augmented_width(dv))
        reuse = lambda start, stop: features(start, stop, reuse=True)  # noqa: E731
        out, normaliser = _forward_loop(reuse, v, packed, _decay_for(log_gamma, C), C, eps)
        packed = packed[..., : dv + 1].contiguous()
        total = packed[..., dv].sum(dtype=reused.total.dtype) if z_is_the_checksum else reused.total
    after = PackedLedger(packed.reshape(*batch, f, dv + 1))
    return Sums(out.reshape(*batch, n, dv), normaliser.reshape(*batch, n), after, total)


class _ReusedBlocks:
    """A map's φ of blocks of rows into buffers reused from block to block (``feature_maps.into_buffers``):
    at N = 8192 fresh 1 MB blocks spent as long in page faults as in arithmetic.

    ``total`` is the caller's checksum, Σq + Σk added block by block (ReLU maps −∞ to 0, so a bad
    q or k need not reach the result), unless the map's bad values reach the sums (elu + 1,
    ``feature_maps.bad_values_reach_the_sums``): then ``causal_attention`` takes the ledger's Σz
    after the loop instead, no pass of its own, and the caller checks the normalisers anyway."""

    def __init__(self, like: torch.Tensor, dtype: torch.dtype):
        self.dtype, self.buffers = dtype, {}
        self.total = like.new_zeros((), dtype=torch.float64 if dtype == torch.float64 else torch.float32)

    def apply(self, into, role: str, x: torch.Tensor) -> torch.Tensor:
        key = (role, x.shape)  # q and k each their own; a shorter last block too
        if key not in self.buffers:
            self.buffers[key] = tuple(torch.empty_like(x) for _ in range(2))
        phi = into(x, *self.buffers[key])  # in the inputs' dtype
        return phi.to(self.dtype)  # then the ledger's


def _differentiable(phi, v, packed, log_gamma, C, eps):
    """The loop under autograd: ``_ChunkLoop``, or the readable chunked form when γ needs a gradient."""
    phi_q, phi_k = phi
    dv = v.shape[-1]
    if log_gamma is not None and log_gamma.requires_grad:
        numerator, denominator, (S, z) = chunked_form(
            phi_q, phi_k, v, causal=True, chunk_size=C, log_gamma=log_gamma, ledger=(packed[..., :dv], packed[..., dv]))
        after = torch.cat([S, z.unsqueeze(-1)], dim=-1)
        if eps is NO_EPS:
            return numerator, denominator, after
        out, normaliser = divide(numerator, denominator, eps)
        return out, normaliser.detach(), after
    out, normaliser, after = _ChunkLoop.apply(phi_q, phi_k, v, _pad_ledger(packed, augmented_width(dv)), log_gamma,
                                              C, eps)
    return out, normaliser, after[..., : dv + 1].contiguous()


def _pad_ledger(packed: torch.Tensor, width: int) -> torch.Tensor:
    """[B, f, dv + 1] -> [B, f, width], zero columns appended (a new tensor; differentiable)."""
    return F.pad(packed, (0, width - packed.shape[-1]))
