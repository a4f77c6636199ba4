"""Every linear form equals the explicit kernel oracle; softmax matches torch's SDPA."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import (
    METHODS,
    causal_mask,
    kernel_attention,
    kernel_weights,
    linear_attention,
    softmax_attention,
    softmax_weights,
)
from course_lib.device import seeded_qkv
from course_lib.measure import relative_error

# (batch dims, n, m, d, dv): self and cross attention, n=1, d=1, dv ≠ d
SHAPES = {
    "self": ((2, 3), 37, 37, 8, 8),
    "cross_n<m": ((2,), 5, 29, 4, 6),
    "cross_n>m": ((), 31, 3, 4, 2),
    "n=1": ((3,), 1, 1, 5, 5),
    "d=1": ((2,), 19, 19, 1, 3),
    "no_batch": ((), 64, 64, 16, 16),
}
CHUNKS = [1, 3, 7, 64, 1000]  # 3 and 7 do not divide the lengths above; 1000 > n
# causal attention pairs query i with key i, so it only takes the n = m shapes
CASES = [
    pytest.param(shape, causal, id=f"{name}-{'causal' if causal else 'full'}")
    for name, shape in SHAPES.items()
    for causal in (False, True)
    if not causal or shape[1] == shape[2]
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("chunk_size", CHUNKS, ids=lambda c: f"chunk{c}")
@pytest.mark.parametrize("shape, causal", CASES)
def test_linear_forms_equal_kernel_oracle(method, chunk_size, shape, causal):
    batch, n, m, d, dv = shape
    q, k, v = seeded_qkv(*batch, n=n, m=m, d=d, dv=dv)
    expected = kernel_attention(q, k, v, causal=causal)
    actual = linear_attention(q, k, v, causal=causal, method=method, chunk_size=chunk_size)
    assert actual.shape == (*batch, n, dv)
    assert (actual - expected).abs().max() < 1e-10


def test_kernel_oracle_is_the_explicit_matrix():
    q, k, v = seeded_qkv(n=6, d=3)
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    scores = (phi_q @ phi_k.T).tril()
    expected = (scores / scores.sum(-1, keepdim=True)) @ v
    assert torch.allclose(kernel_attention(q, k, v, causal=True), expected, atol=1e-14, rtol=0)


def test_kernel_weights_rows_sum_to_one_and_respect_the_mask():
    q, k, _ = seeded_qkv(2, n=9, d=4)
    weights = kernel_weights(q, k, causal=True)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 9, dtype=torch.float64), atol=1e-14)
    assert weights.masked_select(~causal_mask(9)).abs().max() == 0


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_attention_matches_sdpa(causal):
    q, k, v = seeded_qkv(2, 3, n=17, d=8, dv=5)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert (softmax_attention(q, k, v, causal=causal) - expected).abs().max() < 1e-12


def test_softmax_scale_defaults_to_inverse_sqrt_d():
    q, k, v = seeded_qkv(n=5, m=7, d=16, dv=3)
    default = softmax_attention(q, k, v)
    explicit = softmax_attention(q, k, v, scale=0.25)
    unscaled = softmax_attention(q, k, v, scale=1.0)
    assert torch.equal(default, explicit)
    assert (default - unscaled).abs().max() > 1e-3


def test_softmax_weights_first_causal_row_sees_only_itself():
    q, k, _ = seeded_qkv(n=4, d=2)
    weights = softmax_weights(q, k, causal=True)
    assert torch.equal(weights[0], torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64))


def test_leading_dims_broadcast_like_sdpa():
    q, _, _ = seeded_qkv(2, 4, n=10, d=3)
    _, k, v = seeded_qkv(2, 1, n=10, d=3, seed=1)  # one key/value head shared by four query heads
    out = linear_attention(q, k, v, causal=True)
    expected = kernel_attention(q, k.expand(2, 4, 10, 3), v.expand(2, 4, 10, 3), causal=True)
    assert out.shape == (2, 4, 10, 3)
    assert (out - expected).abs().max() < 1e-12


def test_values_may_carry_more_batch_dims_than_queries_and_keys():
    q, k, _ = seeded_qkv(1, n=8, d=3)
    _, _, v = seeded_qkv(4, n=8, d=3, dv=2, seed=1)  # four value sets read through one set of weights
    for causal in (False, True):
        out = linear_attention(q, k, v, causal=causal)
        assert out.shape == (4, 8, 2)
        assert (out - kernel_attention(q, k, v, causal=causal)).abs().max() < 1e-12


@pytest.mark.parametrize("method", ["parallel", "chunked", "recurrent"])
@pytest.mark.parametrize("causal", [False, True])
def test_float32_tolerance(method, causal):
    """float32 agrees with the float64 oracle to a relative RMS below 1e-5 at n = 256."""
    q, k, v = seeded_qkv(2, n=256, d=16)
    expected = kernel_attention(q, k, v, causal=causal)
    actual = linear_attention(q.float(), k.float(), v.float(), causal=causal, method=method)
    assert actual.dtype == torch.float32
    assert relative_error(actual, expected) < 1e-5


def test_eps_floors_the_denominator():
    q, k, v = seeded_qkv(n=8, d=4)
    eps = 0.5
    weights = kernel_weights(q, k)
    raw = (F.elu(q) + 1) @ (F.elu(k) + 1).T  # [n, m]
    expected = (raw @ v) / (raw.sum(-1, keepdim=True) + eps)
    assert torch.allclose(linear_attention(q, k, v, eps=eps), expected, atol=1e-13, rtol=0)
    assert torch.allclose(kernel_attention(q, k, v, eps=eps), expected, atol=1e-13, rtol=0)
    assert not torch.allclose(linear_attention(q, k, v, eps=eps), weights @ v)


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_matches_cpu(method, causal):
    q, k, v = seeded_qkv(2, n=100, d=8)
    expected = linear_attention(q, k, v, causal=causal, method=method)
    actual = linear_attention(q.cuda(), k.cuda(), v.cuda(), causal=causal, method=method)
    assert actual.device.type == "cuda"
    assert (actual.cpu() - expected).abs().max() < 1e-10


@pytest.mark.cuda
@cuda
def test_cuda_softmax_matches_cpu():
    q, k, v = seeded_qkv(2, n=50, d=8)
    actual = softmax_attention(q.cuda(), k.cuda(), v.cuda(), causal=True).cpu()
    assert (actual - softmax_attention(q, k, v, causal=True)).abs().max() < 1e-10
