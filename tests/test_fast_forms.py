"""The fast paths compute the same sums as the readable forms, for every shape the API accepts."""

import pytest
import torch
from helpers import make_qkv

from course_lib.attention import kernel_attention, linear_attention
from course_lib.fast_forms import (
    augment_values,
    augmented_width,
    auto_chunk_size,
    fast_causal,
    fast_noncausal,
    join_ledger,
    split_ledger,
    summarise_keys,
)
from course_lib.feature_maps import elu_plus_one
from course_lib.linear_forms import causal_form, chunked_form, parallel_form

EXACT = {"atol": 1e-12, "rtol": 1e-12}
SHAPES = {"n37_d5_dv3": (2, 3, 37, 5, 3), "n1": (1, 1, 1, 4, 2), "n64_d8_dv8": (1, 2, 64, 8, 8), "n130": (3, 1, 130, 6, 7)}


def features(*batch, n, d, dv, seed=0):
    q, k, v = make_qkv(*batch, n=n, d=d, dv=dv, seed=seed)
    return elu_plus_one(q), elu_plus_one(k), v


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("chunk_size", [None, 1, 7, 64, 1000], ids=lambda c: f"chunk{c}")
def test_fast_causal_equals_the_chunked_form_with_and_without_a_ledger(shape, chunk_size):
    b, h, n, d, dv = shape
    phi_q, phi_k, v = features(b, h, n=n, d=d, dv=dv)
    g = torch.Generator().manual_seed(1)
    ledger_in = (torch.randn(b, h, d, dv, generator=g, dtype=torch.float64), torch.rand(b, h, d, generator=g, dtype=torch.float64))
    for ledger in (None, ledger_in):
        fast = fast_causal(phi_q, phi_k, v, chunk_size=chunk_size, ledger=ledger)
        readable = chunked_form(phi_q, phi_k, v, causal=True, chunk_size=5, ledger=ledger)
        for got, want, name in zip((*fast[:2], *fast[2]), (*readable[:2], *readable[2]), ("num", "den", "S", "z")):
            assert got.shape == want.shape, name
            torch.testing.assert_close(got, want, **EXACT, msg=name)


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_fast_noncausal_equals_the_parallel_form(shape):
    b, h, n, d, dv = shape
    phi_q, phi_k, v = features(b, h, n=n, d=d, dv=dv)
    for got, want in zip(fast_noncausal(phi_q, phi_k, v), parallel_form(phi_q, phi_k, v, causal=False)):
        torch.testing.assert_close(got, want, **EXACT)


def test_fast_causal_returns_a_contiguous_numerator_it_does_not_share():
    phi_q, phi_k, v = features(2, n=64, d=4, dv=3)
    numerator, denominator, _ = fast_causal(phi_q, phi_k, v, chunk_size=16)
    assert numerator.is_contiguous() and numerator.shape == (2, 64, 3) and denominator.shape == (2, 64)
    before = v.clone()
    numerator.mul_(0)  # in-place division by the caller must not touch the inputs
    assert torch.equal(v, before)


def test_causal_form_runs_the_chunk_loop_on_the_cpu():
    phi_q, phi_k, v = features(n=20, d=3, dv=2)
    got = causal_form(phi_q, phi_k, v, chunk_size=6)
    want = fast_causal(phi_q, phi_k, v, chunk_size=6)
    assert all(torch.equal(a, b) for a, b in zip((*got[:2], *got[2]), (*want[:2], *want[2])))


@pytest.mark.parametrize("causal", [False, True])
def test_auto_matches_the_oracle_with_broadcast_and_strided_inputs(causal):
    q, k, v = make_qkv(3, 2, n=50, d=6, dv=4)
    q_shared = q[:1]  # [1, 2, n, d], broadcast over the batch
    v_strided = torch.randn(3, 2, 4, 50, dtype=torch.float64).transpose(-2, -1)  # non-contiguous [3, 2, n, dv]
    got = linear_attention(q_shared, k, v_strided, causal=causal)
    want = kernel_attention(q_shared.expand_as(q), k, v_strided, causal=causal)
    assert got.is_contiguous()
    torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def test_blocked_key_sums_stay_accurate_where_one_long_matmul_drifts():
    n = 2**20
    q, k, v = make_qkv(n=8, m=n, d=2, dv=2, seed=3, dtype=torch.float32)
    phi_k = elu_plus_one(k)
    v = v.abs() + 1  # all-positive sums: the worst case for a running sum
    exact = phi_k.double().T @ v.double()
    blocked = summarise_keys(phi_k, v).double()
    one_pass = (phi_k.T @ v).double()
    blocked_error = ((blocked - exact).abs() / exact).max().item()
    assert blocked_error < 1e-5
    assert blocked_error <= ((one_pass - exact).abs() / exact).max().item()


def test_fast_noncausal_float32_matches_float64_at_two_million_keys():
    q, k, v = make_qkv(n=16, m=2**21, d=2, dv=2, seed=4, dtype=torch.float32)
    got = linear_attention(q, k, v).double()
    want = linear_attention(q.double(), k.double(), v.double())
    assert ((got - want).abs().max() / want.abs().max()).item() < 1e-5


def test_augmented_values_carry_ones_and_pad_to_eight_columns():
    v = torch.arange(6.0).reshape(3, 2)
    v_hat = augment_values(v, 5)
    assert augmented_width(2) == 8 and augmented_width(7) == 8 and augmented_width(8) == 16
    assert v_hat.shape == (5, 8)
    assert torch.equal(v_hat[:3, :2], v) and torch.equal(v_hat[:3, 2], torch.ones(3))
    assert v_hat[:3, 3:].abs().sum() == 0 and v_hat[3:].abs().sum() == 0  # padding rows and columns are zero


def test_ledger_join_and_split_round_trip():
    S, z = torch.randn(2, 4, 3), torch.rand(2, 4)
    joined = join_ledger((S, z), 8)
    assert joined.shape == (2, 4, 8) and joined[..., 4:].abs().sum() == 0
    S2, z2 = split_ledger(joined, 3)
    assert torch.equal(S2, S) and torch.equal(z2, z)
    assert join_ledger((S, z)).shape == (2, 4, 4)


@pytest.mark.parametrize(
    "n, f, dv, expected", [(8192, 64, 64, 64), (8192, 32, 32, 64), (8192, 128, 128, 128), (8192, 128, 64, 64), (10, 64, 64, 10)]
)
def test_auto_chunk_size_rule(n, f, dv, expected):
    assert auto_chunk_size(n, f, dv) == expected
