"""The readable forms (``linear_forms``): each one equals the explicit weighted kernel matrix.

Mirrors the module: ``decay_matrix``, then ``parallel_form``, ``recurrent_form`` and
``chunked_form``, each causal and not, with and without decay and an incoming ledger.
"""

import pytest
import torch

from course_lib.device import seeded_qkv
from course_lib.feature_maps import elu_plus_one
from course_lib.linear_forms import FORMS, causal_mask, chunked_form, decay_matrix

EXACT = {"atol": 1e-12, "rtol": 1e-12}
LOG_GAMMAS = {"no_decay": None, "scalar": 0.8, "per_head": (0.5, 0.9, 1.0)}


def features(*batch, n, d=4, dv=3, seed=0):
    q, k, v = seeded_qkv(*batch, n=n, d=d, dv=dv, seed=seed)
    return elu_plus_one(q), elu_plus_one(k), v


def log_gamma_for(label, batch):
    value = LOG_GAMMAS[label]
    return None if value is None else torch.tensor(value, dtype=torch.float64).log().expand(batch)


def explicit(phi_q, phi_k, v, *, causal, log_gamma=None, ledger=None):
    """Σ_j w_ij φ(q_i)ᵀφ(k_j) [v_j | 1] from the n×m matrix, plus γ^{i+1} φ(q_i)ᵀ(S0, z0)."""
    scores = phi_q @ phi_k.transpose(-2, -1)  # [..., n, m]
    n = phi_q.shape[-2]
    if causal:
        gamma = torch.zeros(phi_q.shape[:-2], dtype=phi_q.dtype) if log_gamma is None else log_gamma
        scores = scores * decay_matrix(n, gamma)
    numerator, denominator = scores @ v, scores.sum(-1)
    if ledger is not None:
        i = torch.arange(1, n + 1, dtype=phi_q.dtype)
        since = 1.0 if log_gamma is None or not causal else torch.exp(i * log_gamma[..., None])  # [..., n]
        since = torch.as_tensor(since, dtype=phi_q.dtype)
        numerator = numerator + (phi_q @ ledger[0]) * since[..., None]
        denominator = denominator + (phi_q @ ledger[1].unsqueeze(-1)).squeeze(-1) * since
    return numerator, denominator


def test_decay_matrix_is_gamma_to_the_distance_below_the_diagonal():
    W = decay_matrix(5, torch.tensor(0.5).log())
    i = torch.arange(5)
    expected = torch.where(causal_mask(5), 0.5 ** (i[:, None] - i[None, :]).float(), 0.0)
    assert torch.allclose(W, expected, atol=1e-7, rtol=0)
    tiny = decay_matrix(300, torch.tensor(1e-30, dtype=torch.float64).log())  # γ^{-j} would overflow
    assert torch.isfinite(tiny).all() and tiny[299, 0] == 0 and tiny[7, 7] == 1


CASES = [(causal, decay) for causal in (False, True) for decay in LOG_GAMMAS if causal or decay == "no_decay"]


@pytest.mark.parametrize("name", FORMS)
@pytest.mark.parametrize("causal, decay", CASES)  # decay is causal only (the dispatcher refuses it otherwise)
@pytest.mark.parametrize("with_ledger", [False, True], ids=["fresh", "ledger_in"])
def test_each_form_equals_the_explicit_matrix(name, causal, decay, with_ledger):
    phi_q, phi_k, v = features(2, 3, n=13)
    log_gamma = log_gamma_for(decay, (2, 3))
    g = torch.Generator().manual_seed(5)
    ledger = (torch.rand(2, 3, 4, 3, generator=g, dtype=torch.float64),
              torch.rand(2, 3, 4, generator=g, dtype=torch.float64)) if with_ledger else None
    options = {"chunk_size": 5} if name == "chunked" else {}
    numerator, denominator, _ = FORMS[name](phi_q, phi_k, v, causal=causal, log_gamma=log_gamma, ledger=ledger,
                                           **options)
    want_numerator, want_denominator = explicit(phi_q, phi_k, v, causal=causal, log_gamma=log_gamma, ledger=ledger)
    torch.testing.assert_close(numerator, want_numerator, **EXACT)
    torch.testing.assert_close(denominator, want_denominator, **EXACT)


@pytest.mark.parametrize("decay", LOG_GAMMAS, ids=LOG_GAMMAS.keys())
def test_the_ledger_after_is_the_weighted_sum_at_the_last_token(decay):
    phi_q, phi_k, v = features(3, n=11)
    log_gamma = log_gamma_for(decay, (3,))
    gamma = torch.ones(3, dtype=torch.float64) if log_gamma is None else log_gamma.exp()
    age = torch.arange(10, -1, -1, dtype=torch.float64)  # 10 − j: how long ago token j was
    weight = gamma[:, None] ** age  # [3, n]
    want_S = (phi_k * weight[..., None]).transpose(-2, -1) @ v
    want_z = (phi_k * weight[..., None]).sum(-2)
    for name in FORMS:
        options = {"chunk_size": 4} if name == "chunked" else {}
        _, _, (S, z) = FORMS[name](phi_q, phi_k, v, causal=True, log_gamma=log_gamma, **options)
        torch.testing.assert_close(S, want_S, **EXACT, msg=name)
        torch.testing.assert_close(z, want_z, **EXACT, msg=name)


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 11, 50])
def test_chunking_never_changes_the_sums_and_a_split_stream_continues_exactly(chunk_size):
    phi_q, phi_k, v = features(2, n=11)
    log_gamma = log_gamma_for("scalar", (2,))
    whole = chunked_form(phi_q, phi_k, v, causal=True, chunk_size=chunk_size, log_gamma=log_gamma)
    first = chunked_form(phi_q[:, :6], phi_k[:, :6], v[:, :6], causal=True, chunk_size=chunk_size, log_gamma=log_gamma)
    rest = chunked_form(phi_q[:, 6:], phi_k[:, 6:], v[:, 6:], causal=True, chunk_size=chunk_size,
                        log_gamma=log_gamma, ledger=first[2])
    torch.testing.assert_close(torch.cat([first[0], rest[0]], dim=-2), whole[0], **EXACT)
    torch.testing.assert_close(torch.cat([first[1], rest[1]], dim=-1), whole[1], **EXACT)
    torch.testing.assert_close(rest[2][0], whole[2][0], **EXACT)
