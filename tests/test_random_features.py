"""FAVOR+ random features: unbiased, orthogonal beats iid, positive beats trig where it matters, stable."""

import math

import pytest
import torch

from course_lib.attention import kernel_attention, linear_attention, softmax_attention
from course_lib.device import seeded_qkv
from course_lib.measure import relative_error
from course_lib.random_features import (
    PerformerFeatures,
    iid_gaussian,
    orthogonal_gaussian,
    positive_random_features,
    trig_random_features,
)

D = 4


def unit(*values: float) -> torch.Tensor:
    x = torch.tensor(values, dtype=torch.float64)
    return x / x.norm()


# pairs (q, k) along several directions: an estimator can be unbiased along one and biased along another
DIRECTIONS = {
    "aligned": (0.6 * unit(1, 2, 0, 1), 0.6 * unit(1, 2, 0, 1)),
    "opposed": (0.6 * unit(1, 2, 0, 1), -0.3 * unit(1, 2, 0, 1)),  # k = −q would make every draw exact
    "orthogonal": (0.7 * unit(1, 0, 0, 0), 0.7 * unit(0, 1, 0, 0)),
    "oblique": (0.5 * unit(1, -1, 2, 0), 0.8 * unit(0, 1, 1, 3)),
}


def qr_without_rescaling(m: int, d: int, *, generator: torch.Generator) -> torch.Tensor:
    """Orthogonal blocks of unit rows: the plausible shortcut that changes the kernel."""
    blocks = [torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))[0].T for _ in range(0, m, d)]
    return torch.cat(blocks)[:m]


def estimates(draw, features, q, k, *, m: int = D, draws: int = 4000, seed: int = 0) -> torch.Tensor:
    """φ(q)ᵀφ(k) for ``draws`` independent projections, [draws]."""
    g = torch.Generator().manual_seed(seed)
    omegas = torch.stack([draw(m, D, generator=g) for _ in range(draws)])  # [draws, m, d]
    phi_q = features(q.expand(draws, 1, D), omegas)  # [draws, 1, f]
    phi_k = features(k.expand(draws, 1, D), omegas)
    return (phi_q * phi_k).sum(-1).squeeze(-1)


def mse(samples: torch.Tensor, target: float) -> float:
    return float((samples - target).pow(2).mean())


@pytest.mark.parametrize("draw", [iid_gaussian, orthogonal_gaussian], ids=["iid", "orthogonal"])
@pytest.mark.parametrize("features", [positive_random_features, trig_random_features], ids=["positive", "trig"])
@pytest.mark.parametrize("q, k", DIRECTIONS.values(), ids=DIRECTIONS.keys())
def test_estimator_is_unbiased(draw, features, q, k):
    """The mean over independent draws is exp(qᵀk) within 4.5 standard errors (CLT)."""
    samples = estimates(draw, features, q, k)
    exact = math.exp(float(q @ k))
    standard_error = float(samples.std()) / math.sqrt(samples.numel())
    assert abs(float(samples.mean()) - exact) < 4.5 * standard_error
    assert standard_error < 0.05 * exact  # the check has teeth


@pytest.mark.parametrize("q, k", DIRECTIONS.values(), ids=DIRECTIONS.keys())
def test_qr_without_rescaling_is_biased(q, k):
    """Unit-length rows estimate E_{‖ω‖=1}[...] instead: off by far more than the noise."""
    samples = estimates(qr_without_rescaling, positive_random_features, q, k)
    exact = math.exp(float(q @ k))
    standard_error = float(samples.std()) / math.sqrt(samples.numel())
    assert abs(float(samples.mean()) - exact) > 8 * standard_error


# Theorem 2's gain grows with ‖q + k‖; at ‖q + k‖ = 0.3 ("opposed") it is below the noise of 4000 draws.
SPREAD_OUT = {name: pair for name, pair in DIRECTIONS.items() if float((pair[0] + pair[1]).norm()) > 0.9}


@pytest.mark.parametrize("q, k", SPREAD_OUT.values(), ids=SPREAD_OUT.keys())
def test_orthogonal_features_have_lower_mse_than_iid(q, k):
    exact = math.exp(float(q @ k))
    iid = mse(estimates(iid_gaussian, positive_random_features, q, k, seed=1), exact)
    orthogonal = mse(estimates(orthogonal_gaussian, positive_random_features, q, k, seed=1), exact)
    assert orthogonal < 0.9 * iid


def test_positive_beats_trig_where_the_kernel_value_is_small():
    """qᵀk = −1.96: exp(qᵀk) = 0.14. Positive features' MSE vanishes there, trig's does not (Lemma 2)."""
    q, k = 1.4 * unit(1, 1, 0, 0), -1.4 * unit(1, 1, 0, 0)
    exact = math.exp(float(q @ k))
    positive = mse(estimates(iid_gaussian, positive_random_features, q, k, seed=2), exact)
    trig = mse(estimates(iid_gaussian, trig_random_features, q, k, seed=2), exact)
    assert positive < trig / 10


def test_attention_error_shrinks_like_one_over_sqrt_m():
    q, k, v = seeded_qkv(n=32, d=16, seed=3)
    q, k = 0.5 * q, 0.5 * k
    expected = softmax_attention(q, k, v)
    errors = {}
    for m in (32, 512):
        runs = [
            relative_error(linear_attention(q, k, v, PerformerFeatures(16, m, generator=torch.Generator().manual_seed(s))), expected)
            for s in range(8)
        ]
        errors[m] = sum(runs) / len(runs)
    ratio = errors[32] / errors[512]  # 1/√m predicts √16 = 4
    assert 2.5 < ratio < 6.5, errors


def test_performer_features_estimate_softmax_with_the_sqrt_d_temperature():
    """φ(q)ᵀφ(k) with the default scale d^{-1/4} on each side estimates exp(qᵀk/√d), not exp(qᵀk)."""
    q, k = 1.2 * unit(1, 0, 2, 1), 1.5 * unit(0, 1, 1, 0)
    features = PerformerFeatures(D, 20000, orthogonal=False, generator=torch.Generator().manual_seed(4))
    samples = 20000 * (features(q[None]) * features(k[None])).squeeze(0)  # [m]: one unbiased sample per feature
    mean, standard_error = float(samples.mean()), float(samples.std()) / math.sqrt(samples.numel())
    assert abs(mean - math.exp(float(q @ k) / math.sqrt(D))) < 4.5 * standard_error
    assert abs(mean - math.exp(float(q @ k))) > 8 * standard_error


@pytest.mark.parametrize("kind", ["positive", "trig"])
@pytest.mark.parametrize("causal", [False, True])
def test_every_method_equals_the_kernel_oracle_with_performer_features(kind, causal):
    q, k, v = seeded_qkv(2, n=40, d=8, seed=5)
    features = PerformerFeatures(8, 32, kind=kind, generator=torch.Generator().manual_seed(5))
    if kind == "trig":  # signed features: keep the normaliser clearly positive
        q, k = 0.3 * q, 0.3 * k
    expected = kernel_attention(q, k, v, features, causal=causal)
    plain = kernel_attention(q, k, v, features.__call__, causal=causal)  # φ as written, no stabilising factors
    assert (expected - plain).abs().max() < 1e-12
    for method in ("parallel", "recurrent", "chunked"):
        out = linear_attention(q, k, v, features, causal=causal, method=method, chunk_size=7)
        assert (out - expected).abs().max() < 1e-12


def test_a_future_key_never_changes_a_past_output():
    """No max over key positions: even a huge key at t + 1 leaves outputs 0..t unchanged."""
    q, k, v = seeded_qkv(n=24, d=8, seed=6)
    features = PerformerFeatures(8, 64, generator=torch.Generator().manual_seed(6))
    t = 11
    k_future = k.clone()
    k_future[t + 1 :] *= 4.0
    k_future[t + 1] = 30 * k[t + 1] / k[t + 1].norm()
    for method in ("parallel", "recurrent", "chunked"):
        before = linear_attention(q, k, v, features, causal=True, method=method)
        after = linear_attention(q, k_future, v, features, causal=True, method=method)
        assert (before[: t + 1] - after[: t + 1]).abs().max() < 1e-12
        assert (before[t + 1 :] - after[t + 1 :]).abs().max() > 1e-3


@pytest.mark.parametrize("d", [8, 16, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_outputs_stay_finite_for_norms_up_to_30(d, causal):
    q, k, v = seeded_qkv(2, n=48, d=d, seed=7)
    norms = torch.linspace(0.1, 30, 48, dtype=torch.float64).unsqueeze(-1)
    q, k = norms * q / q.norm(dim=-1, keepdim=True), norms.flip(0) * k / k.norm(dim=-1, keepdim=True)
    features = PerformerFeatures(d, 128, generator=torch.Generator().manual_seed(7))
    assert torch.isfinite(linear_attention(q, k, v, features, causal=causal)).all()


def test_one_exponent_never_overflows_where_two_exponentials_do():
    """exp(ωᵀx) · exp(−‖x‖²/2) is inf · 0 = NaN at ‖x‖ = 30 in float32; one exp of the sum is finite."""
    x = 30 * unit(1, 1, 1, 1).float().expand(1, D)  # [1, d]
    omega = iid_gaussian(4096, D, generator=torch.Generator().manual_seed(14)).float()  # [m, d]
    two_exponentials = torch.exp(x @ omega.T) * torch.exp(-x.pow(2).sum(-1, keepdim=True) / 2) / 64
    assert torch.isnan(two_exponentials).any()
    assert torch.isfinite(positive_random_features(x, omega)).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_stabilised_features_are_bounded(dtype):
    """Queries ≤ 1 (largest exactly 1); keys ≤ finfo.max^0.45 however large the input."""
    x = (40 * torch.randn(100, 16, generator=torch.Generator().manual_seed(8))).to(dtype)
    features = PerformerFeatures(16, 64, generator=torch.Generator().manual_seed(8))
    assert features.for_queries(x).max() <= 1.0
    assert torch.allclose(features.for_queries(x).amax(-1), torch.ones(100, dtype=dtype))
    keys = features.for_keys(features.omega.to(dtype) / features.scale)  # k = ω: the ceiling of every feature
    assert torch.isfinite(keys).all() and keys.max() <= torch.finfo(dtype).max ** 0.45


@pytest.mark.parametrize("d", [64, 192])
def test_large_heads_do_not_underflow_in_float32(d):
    """Without the headroom, typical key features sit near e^{−d/2}: 57 % are 0 in float32 at d = 192.

    Known limit: from d ≈ 224 (unit-variance inputs, float32) they underflow even with it, and
    the normaliser check raises; float64, or rescaling the ledger by a running max, avoids that.
    """
    q, k, v = seeded_qkv(n=128, d=d, seed=15, dtype=torch.float32)
    features = PerformerFeatures(d, 256, generator=torch.Generator().manual_seed(15))
    out = linear_attention(q, k, v, features, causal=True)
    expected = kernel_attention(q.double(), k.double(), v.double(), features, causal=True)
    assert relative_error(out, expected) < 1e-4


def test_same_generator_seed_same_features_and_redraw_changes_them():
    first = PerformerFeatures(8, 24, generator=torch.Generator().manual_seed(9))
    second = PerformerFeatures(8, 24, generator=torch.Generator().manual_seed(9))
    assert torch.equal(first.omega, second.omega)
    old = first.omega.clone()
    first.redraw(torch.Generator().manual_seed(10))
    assert not torch.equal(first.omega, old)
    first.redraw(torch.Generator().manual_seed(9))
    assert torch.equal(first.omega, old)


def test_orthogonal_blocks_are_orthogonal_with_chi_lengths():
    omega = orthogonal_gaussian(10, 4, generator=torch.Generator().manual_seed(11))  # blocks of 4, 4, 2 rows
    assert omega.shape == (10, 4) and omega.dtype == torch.float64
    for block in (omega[:4], omega[4:8], omega[8:]):
        gram = block @ block.T
        assert (gram - torch.diag(torch.diagonal(gram))).abs().max() < 1e-12
    lengths = torch.cat([orthogonal_gaussian(64, 4, generator=torch.Generator().manual_seed(s)) for s in range(50)])
    squared = lengths.pow(2).sum(-1)  # chi-square with d = 4 degrees of freedom: mean 4, variance 8
    assert abs(float(squared.mean()) - 4) < 4.5 * math.sqrt(8 / squared.numel())


def test_feature_counts_and_dtype_follow_the_kind_and_the_input():
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(12))
    positive = PerformerFeatures(8, 16, generator=torch.Generator().manual_seed(12))
    trig = PerformerFeatures(8, 16, kind="trig", generator=torch.Generator().manual_seed(12))
    assert positive(x).shape == (3, 5, 16) and positive(x).dtype == torch.float32
    assert trig(x).shape == (3, 5, 32)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dim": 0, "num_features": 4}, "dim must be a positive int, got 0"),
        ({"dim": 4, "num_features": 2.5}, "num_features must be a positive int, got 2.5"),
        ({"dim": 4, "num_features": 4, "kind": "cosine"}, "kind must be one of \\('positive', 'trig'\\)"),
        ({"dim": 4, "num_features": 4, "scale": -1.0}, "scale must be a finite number > 0 or None"),
    ],
)
def test_bad_construction_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PerformerFeatures(**kwargs)


def test_wrong_input_width_is_refused():
    features = PerformerFeatures(8, 16)
    with pytest.raises(ValueError, match="built for dim=8, got inputs with 6 features"):
        linear_attention(*seeded_qkv(n=5, d=6), features)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_features_follow_the_input_to_cuda():
    q, k, v = seeded_qkv(n=30, d=8)
    features = PerformerFeatures(8, 32, generator=torch.Generator().manual_seed(13))
    expected = linear_attention(q, k, v, features, causal=True)
    out = linear_attention(q.cuda(), k.cuda(), v.cuda(), features, causal=True)
    assert out.device.type == "cuda" and (out.cpu() - expected).abs().max() < 1e-10


def test_taster_verdicts_average_to_the_feature_dot_product():
    from course_lib.random_features import taster_verdicts

    g = torch.Generator().manual_seed(3)
    q, k = 0.5 * torch.randn(D, generator=g, dtype=torch.float64), 0.5 * torch.randn(D, generator=g, dtype=torch.float64)
    omega = iid_gaussian(50, D, generator=g)
    for features, count in ((positive_random_features, 50), (trig_random_features, 50)):
        phi_q, phi_k = features(q, omega), features(k, omega)
        verdicts = taster_verdicts(phi_q, phi_k, count)
        assert verdicts.shape == (50,)
        assert torch.allclose(verdicts.mean(), phi_q @ phi_k, rtol=1e-12, atol=0)
    positive = taster_verdicts(positive_random_features(q, omega), positive_random_features(k, omega), 50)
    expected = torch.exp(omega @ (q + k) - (q.pow(2).sum() + k.pow(2).sum()) / 2)
    assert torch.allclose(positive, expected, rtol=1e-12, atol=0)


def test_taster_verdicts_refuse_mismatched_feature_counts():
    from course_lib.random_features import taster_verdicts

    phi = torch.ones(6, dtype=torch.float64)
    with pytest.raises(ValueError, match="num_tasters=4"):
        taster_verdicts(phi, phi, 4)
    with pytest.raises(ValueError, match="num_tasters"):
        taster_verdicts(phi, phi, 0)
    with pytest.raises(ValueError, match="got 6 and 3"):
        taster_verdicts(phi, torch.ones(3, dtype=torch.float64), 3)
