"""The course's one cost model: multiply-adds (MACs) and bytes, per formula, from the shapes alone.

Counted, for attention over n queries and m keys (d-dim queries and keys, f features, dv-dim
values), in MACs of the matrix products (a FLOP count is twice a MAC count):

* ``macs_softmax``: q kᵀ and weights @ v, n·m·(d + dv), the masked half of a causal softmax
  included (a dense product computes it anyway); ``causal=True`` counts only the unmasked half,
  n·m·(d + dv)/2, the count a causal comparison uses: against it the causal chunked form with
  f = dv = d breaks even at N* = 2(d + C), not d + C;
* ``macs_linear``: S = φ(K)ᵀV and φ(Q)S, (n + m)·f·dv;
* ``macs_causal_chunked``: the causal chunked form, ``macs_linear`` plus the C×C block of every
  chunk, tril(Q_c K_cᵀ) and its product with V_c (masked half included), N·C·(f + dv) when C
  divides N (a shorter last chunk of r rows costs r·r·(f + dv); padding is not counted);
* ``feature_map_macs``: the feature map's own cost, 2·n·f·d for a projection x ωᵀ (FAVOR+) of the
  queries and the keys, 0 for an elementwise map (elu+1).

Not counted: elementwise work (the scaling, exp, the feature maps' nonlinearities, the division)
and the normaliser z = Σφ(k) with its reads φ(q)ᵀz, all lower order ((n + m)·f or n·m).

Bytes, of tensors a route holds (``itemsize``: 4 for float32, 8 for float64):

* ``ledger_bytes``: the state (S [f, dv], z [f]) of ``heads`` ledgers, heads·(f·dv + f)·itemsize,
  whatever the number of tokens read (``LinearAttentionState.nbytes``);
* ``kv_cache_bytes``: a KV cache of ``tokens`` keys [d] and values [dv], heads·tokens·(d + dv)·itemsize;
* ``weights_bytes``: one n×m score or weight matrix per head, heads·n·m·itemsize.

Used by the benchmark (``bench.kernels``, ``bench.decode``), the explorer (``viz.panels``) and
notebooks 01, 02, 04, 05, 05b, 08, 09 and 11.
"""

from course_lib.validation import check_flag, check_ints


def macs_softmax(n: int, m: int, d: int, dv: int, *, causal: bool = False) -> int:
    """n·m·(d + dv) MACs of softmax(q kᵀ/√d) v: scores q kᵀ (n·m·d), then weights @ v (n·m·dv).

    Self-attention (n = m = N, dv = d): the article's 2N²d "multiplications" (notebook 01).
    ``causal=True``: half of it, ⌊n·m·(d + dv)/2⌋, the pairs a causal kernel need not compute
    (the diagonal's n·(d + dv) is lower order, not counted); compare causal forms with this.
    """
    check_ints(n=n, m=m, d=d, dv=dv)
    check_flag("causal", causal, meaning="count only the unmasked half?")
    full = n * m * d + n * m * dv
    return full // 2 if causal else full


def macs_linear(n: int, m: int, f: int, dv: int) -> int:
    """(n + m)·f·dv MACs of φ(Q)(φ(K)ᵀV): S = φ(K)ᵀV (m·f·dv), then every query reads it (n·f·dv).

    Self-attention with f = dv = d: the article's 2Nd² (notebook 02). Causal or not, the
    recurrent ledger does the same: one rank-1 update and one read per token.
    """
    check_ints(n=n, m=m, f=f, dv=dv)
    return (n + m) * f * dv


def macs_causal_chunked(n: int, f: int, dv: int, chunk: int) -> int:
    """``macs_linear(n, n, f, dv)`` + Σ over chunks of c·c·(f + dv) MACs: causal self-attention by chunks of C.

    Each chunk of c rows (c = C, the last one N mod C when C does not divide N) costs
    Q_c K_cᵀ (c·c·f) and its masked product with V_c (c·c·dv), and c·f·dv each to read and to
    update the ledger; with C dividing N that is 2N·f·dv + N·C·(f + dv) (notebooks 05 and 08).
    """
    check_ints(n=n, f=f, dv=dv, chunk=chunk)
    full, rest = divmod(n, chunk)
    block_rows_squared = full * chunk * chunk + rest * rest
    return macs_linear(n, n, f, dv) + block_rows_squared * (f + dv)


def feature_map_macs(n: int, d: int, f: int, *, projection: bool) -> int:
    """MACs of computing φ for n queries and n keys of width d into f features (notebooks 04, 09, 11).

    projection=True (Performer / FAVOR+): x ωᵀ with ω [f×d], n·f·d MACs for the queries and as many
    for the keys, 2·n·f·d; the exp and the norm factor are elementwise (not counted).
    projection=False (elu+1): elementwise, 0 MACs.
    """
    check_flag("projection", projection, meaning="does φ multiply by ω?")
    check_ints(n=n, d=d, f=f)
    return 2 * n * f * d if projection else 0


def ledger_bytes(heads: int, f: int, dv: int, itemsize: int) -> int:
    """heads·(f·dv + f)·itemsize: S [f, dv] and z [f] of ``heads`` ledgers (batch × heads), any stream length."""
    check_ints(heads=heads, f=f, dv=dv, itemsize=itemsize)
    return heads * (f * dv + f) * itemsize


def kv_cache_bytes(heads: int, tokens: int, d: int, dv: int, itemsize: int) -> int:
    """heads·tokens·(d + dv)·itemsize: one key row [d] and one value row [dv] per cached token and head."""
    check_ints(tokens=tokens, at_least=0)
    check_ints(heads=heads, d=d, dv=dv, itemsize=itemsize)
    return heads * tokens * (d + dv) * itemsize


def weights_bytes(heads: int, n: int, m: int, itemsize: int) -> int:
    """heads·n·m·itemsize: one n×m score (or weight) matrix per head, what softmax attention holds."""
    check_ints(heads=heads, n=n, m=m, itemsize=itemsize)
    return heads * n * m * itemsize
