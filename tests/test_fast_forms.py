"""The engine (``fast_forms``): the chunk loop computes the readable forms' sums, and so do its gradients."""

import pytest
import torch

from course_lib.attention import kernel_attention, linear_attention
from course_lib.device import seeded_qkv
from course_lib.fast_forms import NO_EPS, PackedLedger, augmented_width, auto_chunk_size, causal_attention, \
    fast_noncausal, summarise_keys
from course_lib.feature_maps import elu_plus_one
from course_lib.linear_forms import chunked_form, parallel_form
from course_lib.random_features import PerformerFeatures

EXACT = {"atol": 1e-12, "rtol": 1e-12}
SHAPES = {"n37_d5_dv3": (2, 3, 37, 5, 3), "n1": (1, 1, 1, 4, 2), "n64_d8_dv8": (1, 2, 64, 8, 8), "n130": (3, 1, 130, 6, 7)}
DECAYS = {"none": None, "scalar": 0.8, "per_head": "per_head"}


def features(*batch, n, d, dv, seed=0):
    q, k, v = seeded_qkv(*batch, n=n, d=d, dv=dv, seed=seed)
    return elu_plus_one(q), elu_plus_one(k), v


def log_gamma(label, batch):
    if label == "none":
        return None
    gamma = torch.linspace(0.5, 1.0, batch[-1], dtype=torch.float64) if label == "per_head" else torch.tensor(0.8)
    return gamma.to(torch.float64).log().expand(batch)


def random_ledger(b, h, f, dv, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, f, dv, generator=g, dtype=torch.float64), torch.rand(b, h, f, generator=g, dtype=torch.float64)


def packed(ledger):
    return PackedLedger(torch.cat([ledger[0], ledger[1].unsqueeze(-1)], dim=-1))


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("chunk_size", [None, 1, 7, 64, 1000], ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("decay", DECAYS, ids=DECAYS.keys())
def test_the_chunk_loop_equals_the_chunked_form_with_and_without_a_ledger(shape, chunk_size, decay):
    b, h, n, d, dv = shape
    phi_q, phi_k, v = features(b, h, n=n, d=d, dv=dv)
    lg = log_gamma(decay, (b, h))
    for ledger in (None, random_ledger(b, h, d, dv)):
        sums = causal_attention(phi_q, phi_k, v, chunk_size=chunk_size, eps=NO_EPS, log_gamma=lg,
                                ledger=None if ledger is None else packed(ledger))  # raw: out, normaliser = num, den
        want = chunked_form(phi_q, phi_k, v, causal=True, chunk_size=5, log_gamma=lg, ledger=ledger)
        got = (sums.out, sums.normaliser, sums.ledger.S, sums.ledger.z)
        for got, expected, name in zip(got, (*want[:2], *want[2]), ("num", "den", "S", "z")):
            assert got.shape == expected.shape, name
            torch.testing.assert_close(got, expected, **EXACT, msg=name)


def test_the_loop_divides_in_place_and_features_per_chunk_equal_whole_ones():
    q, k, v = seeded_qkv(2, n=70, d=4, dv=3)
    performer = PerformerFeatures(4, 6, generator=torch.Generator().manual_seed(0))
    for feature_map in (elu_plus_one, performer):
        out, normaliser = causal_attention(q, k, v, feature_map, chunk_size=16, eps=0.5)[:2]
        phi_q, phi_k = performer.for_queries(q), performer.for_keys(k)
        if feature_map is elu_plus_one:
            phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)
        num, den, _ = parallel_form(phi_q, phi_k, v, causal=True)
        torch.testing.assert_close(normaliser, den + 0.5, **EXACT)
        torch.testing.assert_close(out, num / (den + 0.5).unsqueeze(-1), **EXACT)
        assert out.is_contiguous()


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_fast_noncausal_equals_the_parallel_form(shape):
    b, h, n, d, dv = shape
    phi_q, phi_k, v = features(b, h, n=n, d=d, dv=dv)
    for got, want in zip(fast_noncausal(phi_q, phi_k, v), parallel_form(phi_q, phi_k, v, causal=False)):
        torch.testing.assert_close(got, want, **EXACT)


@pytest.mark.parametrize("decay", DECAYS, ids=DECAYS.keys())
@pytest.mark.parametrize("raw", [False, True], ids=["divided", "raw_sums"])
def test_the_backward_loop_gives_the_readable_forms_gradients(decay, raw):
    """Gradients of q, k, v and the incoming ledger, through the Function vs autograd through chunked_form."""
    b, h, n, d, dv = 2, 3, 29, 4, 3
    q, k, v = seeded_qkv(b, h, n=n, d=d, dv=dv, seed=2)
    S0, z0 = random_ledger(b, h, d, dv)
    lg = log_gamma(decay, (b, h))
    g = torch.Generator().manual_seed(3)
    weights = [torch.randn(b, h, n, dv, generator=g, dtype=torch.float64), torch.randn(b, h, n, generator=g,
               dtype=torch.float64), torch.randn(b, h, d, dv + 1, generator=g, dtype=torch.float64)]

    def loss(fast):
        leaves = [x.clone().requires_grad_() for x in (q, k, v, S0, z0)]
        phi_q, phi_k = elu_plus_one(leaves[0]), elu_plus_one(leaves[1])
        if fast:
            sums = causal_attention(phi_q, phi_k, leaves[2], chunk_size=8, eps=NO_EPS if raw else 0.3, log_gamma=lg,
                                    ledger=packed((leaves[3], leaves[4])))
            out, second, after = sums.out, sums.normaliser, sums.ledger.packed
        else:
            num, den, (S, z) = chunked_form(phi_q, phi_k, leaves[2], causal=True, chunk_size=8, log_gamma=lg,
                                            ledger=(leaves[3], leaves[4]))
            out, second = (num, den) if raw else (num / (den + 0.3).unsqueeze(-1), den + 0.3)
            after = torch.cat([S, z.unsqueeze(-1)], dim=-1)
        total = (out * weights[0]).sum() + (after * weights[2]).sum() + ((second * weights[1]).sum() if raw else 0)
        return torch.autograd.grad(total, leaves)

    for got, want, name in zip(loss(True), loss(False), ("q", "k", "v", "S0", "z0")):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10, msg=name)


def test_training_memory_holds_no_tensor_of_size_n_f_dv():
    """What autograd saves for the fast causal path: at most ~n·max(f, dv) numbers per tensor."""
    n, d = 256, 16
    q, k, v = (x.requires_grad_() for x in seeded_qkv(1, 2, n=n, d=d, dtype=torch.float32))
    sizes = {}

    def record(method):
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
            linear_attention(q, k, v, causal=True, method=method).sum().backward()
        sizes[method] = max(saved)

    record("auto")
    record("parallel")
    per_head_inputs = 2 * n * d  # B·H·n·d numbers
    assert sizes["auto"] <= per_head_inputs * augmented_width(d) // 64 + per_head_inputs  # inputs, ledgers per chunk
    assert sizes["parallel"] >= 2 * n * d * d  # the readable causal form holds [n, f, dv]: the test can fail


def test_broadcast_and_strided_inputs_match_the_oracle():
    q, k, v = seeded_qkv(3, 2, n=50, d=6, dv=4)
    q_shared = q[:1]  # [1, 2, n, d], broadcast over the batch
    v_strided = torch.randn(3, 2, 4, 50, dtype=torch.float64).transpose(-2, -1)  # non-contiguous [3, 2, n, dv]
    for causal in (False, True):
        got = linear_attention(q_shared, k, v_strided, causal=causal)
        want = kernel_attention(q_shared.expand_as(q), k, v_strided, causal=causal)
        assert got.is_contiguous()
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def test_blocked_key_sums_stay_accurate_where_one_long_matmul_drifts():
    n = 2**20
    q, k, v = seeded_qkv(n=8, m=n, d=2, dv=2, seed=3, dtype=torch.float32)
    phi_k = elu_plus_one(k)
    v = v.abs() + 1  # all-positive sums: the worst case for a running sum
    exact = phi_k.double().T @ v.double()
    blocked = summarise_keys(phi_k, v).double()
    one_pass = (phi_k.T @ v).double()
    blocked_error = ((blocked - exact).abs() / exact).max().item()
    assert blocked_error < 1e-5
    assert blocked_error <= ((one_pass - exact).abs() / exact).max().item()


def test_fast_noncausal_float32_matches_float64_at_two_million_keys():
    q, k, v = seeded_qkv(n=16, m=2**21, d=2, dv=2, seed=4, dtype=torch.float32)
    got = linear_attention(q, k, v).double()
    want = linear_attention(q.double(), k.double(), v.double())
    assert ((got - want).abs().max() / want.abs().max()).item() < 1e-5


def test_the_packed_ledger_hands_out_S_and_z():
    S, z = torch.randn(2, 4, 3), torch.rand(2, 4)
    ledger = packed((S, z))
    assert torch.equal(ledger.S, S) and torch.equal(ledger.z, z) and ledger.nbytes == 2 * 4 * 4 * 4
    assert augmented_width(2) == 8 and augmented_width(7) == 8 and augmented_width(8) == 16


@pytest.mark.parametrize(
    "n, f, dv, expected", [(8192, 64, 64, 64), (8192, 32, 32, 64), (8192, 128, 128, 128), (8192, 128, 64, 64), (10, 64, 64, 10)]
)
def test_auto_chunk_size_rule(n, f, dv, expected):
    assert auto_chunk_size(n, f, dv) == expected
