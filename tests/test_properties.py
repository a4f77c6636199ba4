"""Hypothesis property tests: invariants every linear form must keep, whatever the shapes."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.attention import METHODS, kernel_attention, linear_attention, softmax_attention
from course_lib.device import seeded_qkv

methods = st.sampled_from(METHODS)
dims = st.integers(1, 6)
seeds = st.integers(0, 2**31 - 1)
chunks = st.integers(1, 9)
FAST = settings(max_examples=40, deadline=None)


@FAST
@given(n=st.integers(2, 24), d=dims, dv=dims, seed=seeds, method=methods, chunk_size=chunks, data=st.data())
def test_no_future_leakage(n, d, dv, seed, method, chunk_size, data):
    """Changing tokens after position t leaves causal outputs at positions ≤ t unchanged."""
    t = data.draw(st.integers(0, n - 2), label="t")
    q, k, v = seeded_qkv(n=n, d=d, dv=dv, seed=seed)
    q2, k2, v2 = (x.clone() for x in (q, k, v))
    future = slice(t + 1, None)
    for x in (q2, k2, v2):
        x[future] = torch.randn(x[future].shape, generator=torch.Generator().manual_seed(seed + 1), dtype=x.dtype)
    before = linear_attention(q, k, v, causal=True, method=method, chunk_size=chunk_size)
    after = linear_attention(q2, k2, v2, causal=True, method=method, chunk_size=chunk_size)
    assert torch.equal(before[: t + 1], after[: t + 1]) or (before[: t + 1] - after[: t + 1]).abs().max() < 1e-12
    assert (before[t + 1 :] - after[t + 1 :]).abs().max() > 0  # the future did change something


@FAST
@given(n=st.integers(1, 20), m=st.integers(1, 20), d=dims, seed=seeds, method=methods, causal=st.booleans())
def test_constant_values_give_constant_output(n, m, d, seed, method, causal):
    """Weights sum to one, so v_j = c for every j gives o_i = c: the normaliser at work."""
    m = n if causal else m
    q, k, _ = seeded_qkv(n=n, m=m, d=d, seed=seed)
    c = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64)
    out = linear_attention(q, k, c.expand(m, 3), causal=causal, method=method)
    assert (out - c).abs().max() < 1e-12


@FAST
@given(n=st.integers(1, 12), m=st.integers(1, 20), d=dims, dv=dims, seed=seeds, method=methods)
def test_permuting_keys_with_values_leaves_full_attention_unchanged(n, m, d, dv, seed, method):
    """Non-causal attention is a sum over keys: order does not matter (notebook 07 adds order back)."""
    q, k, v = seeded_qkv(n=n, m=m, d=d, dv=dv, seed=seed)
    perm = torch.randperm(m, generator=torch.Generator().manual_seed(seed))
    out = linear_attention(q, k, v, method=method)
    assert (out - linear_attention(q, k[perm], v[perm], method=method)).abs().max() < 1e-12
    assert (out - kernel_attention(q, k, v)).abs().max() < 1e-12


@FAST
@given(n=st.integers(1, 12), d=dims, seed=seeds, causal=st.booleans())
def test_softmax_rows_are_convex_combinations(n, d, seed, causal):
    """Each softmax output lies inside the per-dimension range of the values it may see."""
    q, k, v = seeded_qkv(n=n, d=d, seed=seed)
    out = softmax_attention(q, k, v, causal=causal)
    visible = torch.ones(n, n, dtype=torch.bool).tril() if causal else torch.ones(n, n, dtype=torch.bool)
    for i in range(n):
        seen = v[visible[i]]
        assert (out[i] >= seen.min(0).values - 1e-12).all() and (out[i] <= seen.max(0).values + 1e-12).all()
