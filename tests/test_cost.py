"""Tests for course_lib.cost: every count against the matmul shapes of its algorithm, enumerated; bad input refused."""

import pytest
import torch

from course_lib.cost import (
    feature_map_macs,
    kv_cache_bytes,
    ledger_bytes,
    macs_causal_chunked,
    macs_linear,
    macs_softmax,
    weights_bytes,
)


def product_macs(shapes: list[tuple[int, int, int]]) -> int:
    """MACs of the matrix products [a, b] @ [b, c] listed as (a, b, c): a·b·c each."""
    return sum(a * b * c for a, b, c in shapes)


def softmax_products(n: int, m: int, d: int, dv: int) -> list[tuple[int, int, int]]:
    return [(n, d, m), (n, m, dv)]  # scores Q Kᵀ [n, m], then weights @ V [n, dv]


def linear_products(n: int, m: int, f: int, dv: int) -> list[tuple[int, int, int]]:
    return [(f, m, dv), (n, f, dv)]  # S = φ(K)ᵀV [f, dv], then φ(Q)S [n, dv]


def chunked_products(n: int, f: int, dv: int, chunk: int) -> list[tuple[int, int, int]]:
    """The causal chunk loop, chunk by chunk: block, masked block @ V_c, read and update the ledger."""
    shapes = []
    for start in range(0, n, chunk):
        c = min(chunk, n - start)
        shapes += [(c, f, c), (c, c, dv), (c, f, dv), (f, c, dv)]  # Q_c K_cᵀ, ·V_c, Q_c S, K_cᵀ V_c
    return shapes


SHAPES = [(1, 1, 1, 1), (3, 5, 4, 2), (64, 64, 64, 64), (100, 37, 16, 8), (7, 300, 2, 11)]


@pytest.mark.parametrize("n, m, d, dv", SHAPES, ids=str)
def test_softmax_counts_its_two_products(n, m, d, dv):
    assert macs_softmax(n, m, d, dv) == product_macs(softmax_products(n, m, d, dv))


@pytest.mark.parametrize("n, m, f, dv", SHAPES, ids=str)
def test_linear_counts_its_two_products(n, m, f, dv):
    assert macs_linear(n, m, f, dv) == product_macs(linear_products(n, m, f, dv))


@pytest.mark.parametrize("n, f, dv, chunk", [(64, 8, 8, 16), (100, 16, 8, 32), (5, 3, 2, 8), (37, 4, 6, 1),
                                             (8192, 64, 64, 64), (4096, 32, 32, 64)], ids=str)
def test_chunked_counts_the_chunk_loop(n, f, dv, chunk):
    assert macs_causal_chunked(n, f, dv, chunk) == product_macs(chunked_products(n, f, dv, chunk))


@pytest.mark.parametrize("n, f, dv, chunk", [(8192, 64, 64, 64), (1024, 64, 16, 32), (4096, 32, 32, 4096)], ids=str)
def test_chunked_is_linear_plus_n_c_f_plus_dv_when_c_divides_n(n, f, dv, chunk):
    assert macs_causal_chunked(n, f, dv, chunk) == macs_linear(n, n, f, dv) + n * chunk * (f + dv)
    assert macs_causal_chunked(n, f, dv, chunk) - macs_linear(n, n, f, dv) == macs_softmax(n, chunk, f, dv)


def test_self_attention_matches_the_article():
    n, d = 4096, 64
    assert macs_softmax(n, n, d, d) == 2 * n**2 * d and macs_linear(n, n, d, d) == 2 * n * d**2
    assert macs_softmax(n, n, d, d) / macs_linear(n, n, d, d) == n / d
    assert macs_causal_chunked(n, d, d, d) == 2 * macs_linear(n, n, d, d), "C = f = dv: twice the non-causal work"


def test_causal_softmax_counts_the_unmasked_half_and_breaks_even_with_chunks_at_2_d_plus_c():
    assert macs_softmax(8, 8, 4, 2, causal=True) == macs_softmax(8, 8, 4, 2) // 2 == 192
    for d, chunk in ((64, 64), (32, 16), (16, 8)):  # C divides N* = 2(d + C)
        n_star = 2 * (d + chunk)  # the first N where the causal chunked elu+1 form costs no more
        assert macs_causal_chunked(n_star, d, d, chunk) == macs_softmax(n_star, n_star, d, d, causal=True)
        smaller = n_star - chunk  # a multiple of C below N*: still dearer than causal softmax
        assert macs_causal_chunked(smaller, d, d, chunk) > macs_softmax(smaller, smaller, d, d, causal=True)


def test_feature_map_counts_the_projection_of_queries_and_keys():
    n, d, f = 10, 4, 6
    assert feature_map_macs(n, d, f, projection=True) == product_macs([(n, d, f), (n, d, f)])  # x ωᵀ for q, k
    assert feature_map_macs(n, d, f, projection=False) == 0


def test_bytes_equal_the_tensors_they_describe():
    heads, f, dv, tokens = 3, 5, 4, 7
    for dtype in (torch.float32, torch.float64):
        itemsize = dtype.itemsize
        s, z = torch.zeros(heads, f, dv, dtype=dtype), torch.zeros(heads, f, dtype=dtype)
        assert ledger_bytes(heads, f, dv, itemsize) == s.nbytes + z.nbytes
        keys, values = torch.zeros(heads, tokens, f, dtype=dtype), torch.zeros(heads, tokens, dv, dtype=dtype)
        assert kv_cache_bytes(heads, tokens, f, dv, itemsize) == keys.nbytes + values.nbytes
        assert weights_bytes(heads, tokens, 9, itemsize) == torch.zeros(heads, tokens, 9, dtype=dtype).nbytes
    assert kv_cache_bytes(2, 0, 4, 4, 4) == 0, "an empty cache holds nothing"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: macs_softmax(4, 0, 4, 4), "m must be a positive int, got 0"),
        (lambda: macs_softmax(4, 4, 2.5, 4), "d must be a positive int, got 2.5"),
        (lambda: macs_softmax(4, 4, 4, 4, causal=1), "causal must be True or False"),
        (lambda: macs_linear(4, 4, True, 4), "f must be a positive int, got True"),
        (lambda: macs_linear(4, 4, 4, None), "dv must be a positive int, got None"),
        (lambda: macs_causal_chunked(64, 8, 8, 0), "chunk must be a positive int, got 0"),
        (lambda: macs_causal_chunked(-1, 8, 8, 4), "n must be a positive int, got -1"),
        (lambda: feature_map_macs(4, 2, 8, projection=1), "projection must be True or False"),
        (lambda: feature_map_macs(0, 2, 8, projection=True), "n must be a positive int, got 0"),
        (lambda: ledger_bytes(8, 64, 64, 0), "itemsize must be a positive int, got 0"),
        (lambda: kv_cache_bytes(8, -1, 64, 64, 4), "tokens must be an int >= 0, got -1"),
        (lambda: kv_cache_bytes(0, 3, 64, 64, 4), "heads must be a positive int, got 0"),
        (lambda: weights_bytes(1, 16, "16", 4), "m must be a positive int, got '16'"),
    ],
    ids=["softmax-m", "softmax-d", "softmax-causal", "linear-f-bool", "linear-dv", "chunk", "chunked-n", "projection",
         "feature-n", "itemsize", "tokens", "heads", "weights-m"],
)
def test_bad_input_is_refused_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
