"""TinyLM: every mixer is causal, seeded, trainable, and the budgets match; the watched feature maps of notebook 09."""

import json

import pytest
import torch

from course_lib.attention import linear_attention
from course_lib.feature_maps import identity
from course_lib.models import FEATURE_MAPS, MIXERS, Mixer, TinyLM, head_decays, state_bytes
from course_lib.recall.stability import StabilityRun, count_spikes, summarise, train_watching_normaliser


def tokens(batch: int = 3, length: int = 10, vocab: int = 20, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def assert_causal(model: TinyLM) -> None:
    """Changing tokens 6.. moves the outputs from 6 on and leaves those before 6 alone."""
    x = tokens()
    changed = x.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 20
    with torch.no_grad():
        before, after = model(x), model(changed)
    assert (before[:, :6] - after[:, :6]).abs().max() < 1e-12
    assert (before[:, 6:] - after[:, 6:]).abs().max() > 1e-6


@pytest.mark.parametrize("mixer", MIXERS)
def test_no_position_sees_the_future(mixer):
    assert_causal(TinyLM(20, d_model=16, n_heads=2, mixer=mixer, max_len=10).double())


@pytest.mark.parametrize("mixer", MIXERS)
def test_every_parameter_gets_a_gradient(mixer):
    model = TinyLM(20, d_model=16, n_heads=2, mixer=mixer, max_len=10)
    model(tokens()).logsumexp(-1).mean().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, missing


def test_the_same_seed_gives_the_same_weights_and_leaves_the_global_generator_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = (TinyLM(20, mixer="performer", seed=5) for _ in range(2))
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert torch.equal(a.blocks[0].mixer.features.omega, b.blocks[0].mixer.features.omega)
    assert not torch.equal(a.head.weight, TinyLM(20, mixer="performer", seed=6).head.weight)


def test_mixers_share_the_budget_except_their_gate_layers():
    counts = {mixer: TinyLM(64, d_model=32, n_heads=4, n_layers=2, mixer=mixer).parameter_count() for mixer in MIXERS}
    per_head = 32 * 4 + 4  # β or a per-head gate: sigmoid(W x + b), W [H, D]
    extra = {"delta": 2 * per_head, "delta_additive": 2 * per_head,
             "gated_delta": 2 * (2 * per_head + 4),  # β, the gate map W [H, D] and its A_log, dt_bias [H]
             "gla": 2 * (32 * 16 + 16 * 32 + 32 + 8),  # rank-16 gate map and the heads' RMS-norm weight [dh]
             "based": 2 * 8 * 8}  # the q and k feature maps [d', dh] with d' = 4, dh = 8
    assert len({count for mixer, count in counts.items() if mixer not in extra}) == 1
    assert {mixer: counts[mixer] - counts["softmax"] for mixer in extra} == extra
    assert max(counts.values()) <= 1.15 * counts["softmax"]  # issue 27: the same budget within 15 %


def next_token_losses(model: TinyLM, tokens: torch.Tensor, *, steps: int) -> list[float]:
    """The next-token loss of each of ``steps`` Adam steps on the same ``tokens`` [B, T]."""
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("mixer", ["gla", "gated_delta", "based"])
def test_a_training_step_lowers_the_loss_of_the_gated_mixers(mixer):
    model = TinyLM(16, d_model=32, n_heads=4, n_layers=2, mixer=mixer, max_len=32)
    tokens = torch.randint(0, 16, (8, 24), generator=torch.Generator().manual_seed(0))
    losses = next_token_losses(model, tokens, steps=5)
    assert losses[-1] < losses[0], losses


def test_retnet_decays_per_head():
    assert head_decays(3).tolist() == [1 - 2**-5, 1 - 2**-6, 1 - 2**-7]


@pytest.mark.parametrize("args, message", [
    (dict(mixer="mamba"), "mixer must be one of"),
    (dict(d_model=30, n_heads=4), "d_model must be a multiple of n_heads"),
    (dict(n_layers=0), "n_layers must be a positive int"),
    (dict(conv_size=-1), "conv_size must be an int >= 0"),
])
def test_bad_settings_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        TinyLM(20, **args)


def test_bad_tokens_are_refused():
    model = TinyLM(20, max_len=8)
    with pytest.raises(ValueError, match="tokens must be a long tensor"):
        model(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="more than max_len=8"):
        model(tokens(length=9))


# feature_map: the "linear" mixer dividing by its normaliser with no refusal (notebook 09 §4)

def test_feature_map_elu_plus_one_is_the_linear_mixer_without_its_refusal():
    x = tokens()
    plain = TinyLM(20, d_model=16, n_heads=2, mixer="linear", max_len=10).double()
    watched = TinyLM(20, d_model=16, n_heads=2, mixer="linear", max_len=10, feature_map="elu+1").double()
    with torch.no_grad():
        assert (plain(x) - watched(x)).abs().max() < 1e-12
    assert watched.smallest_normaliser() > 0


@pytest.mark.parametrize("feature_map", FEATURE_MAPS)
def test_watched_maps_stay_causal_and_record_the_smallest_normaliser(feature_map):
    eps = 1e-6 if feature_map == "relu" else 0.0  # relu: a query with no positive feature would give 0/0
    model = TinyLM(20, d_model=16, n_heads=2, mixer="linear", max_len=10, feature_map=feature_map, eps=eps).double()
    assert_causal(model)
    assert model.smallest_normaliser() >= 0  # its value: test_the_smallest_normaliser_is_...


def test_identity_runs_where_linear_attention_refuses():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 8, 4, generator=g, dtype=torch.float64) for _ in range(3))
    with pytest.raises(ValueError, match="degenerate normaliser"):
        linear_attention(q, k, v, identity, causal=True)
    mixer = Mixer(8, 2, "linear", conv_size=0, feature_map="identity").double()
    mixer(torch.randn(1, 8, 8, generator=g, dtype=torch.float64))
    assert torch.isfinite(mixer.smallest_normaliser)


def test_the_smallest_normaliser_is_the_smallest_absolute_denominator():
    g = torch.Generator().manual_seed(1)
    mixer = Mixer(8, 2, "linear", conv_size=0, feature_map="identity", eps=0.5).double()
    x = torch.randn(2, 6, 8, generator=g, dtype=torch.float64)
    with torch.no_grad():
        mixer(x)
        q, k, _ = mixer.qkv(x).view(2, 6, 3, 2, 4).permute(2, 0, 3, 1, 4)  # [B, H, T, dh] each
        denominators = torch.einsum("bhid,bhjd->bhij", q, k).tril().sum(-1) + 0.5  # [B, H, T]
    assert abs(float(mixer.smallest_normaliser) - float(denominators.abs().min())) < 1e-12


@pytest.mark.parametrize("args, message", [
    (dict(mixer="softmax", feature_map="relu"), "feature_map must be None or, with mixer 'linear'"),
    (dict(mixer="linear", feature_map="tanh"), "feature_map must be None or, with mixer 'linear'"),
])
def test_bad_feature_maps_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        TinyLM(20, **args)


def test_smallest_normaliser_needs_a_watched_forward_pass():
    with pytest.raises(ValueError, match="feature_map=... and one forward pass"):
        TinyLM(20, mixer="linear", feature_map="relu").smallest_normaliser()
    with pytest.raises(ValueError, match="feature_map=... and one forward pass"):
        TinyLM(20, mixer="linear").smallest_normaliser()


def test_spikes_count_rises_above_the_recent_lowest_loss():
    assert count_spikes([3.0, 2.0, 1.0, 1.5, 2.5, 0.9]) == 1  # 2.5 > 1.0 + 1
    assert count_spikes([3.0, 2.0, 1.0, 2.5], window=1) == 1 and count_spikes([1.0, 1.9]) == 0


def test_a_short_watched_run_reports_plain_json():
    run = StabilityRun("elu+1", steps=6, batch_size=8, test_examples=16, keep_every=4)
    result = train_watching_normaliser(run)
    json.dumps(result, allow_nan=False)
    assert result["first_nonfinite_step"] is None and result["nonfinite_in"] is None
    assert result["trace"]["step"] == [0, 4, 5] and result["smallest_normaliser"] > 0
    assert 0 <= result["accuracy"] <= 1 and result["final_loss"] > 0


def test_summarise_groups_seeds_and_skips_missing_numbers():
    def run(seed, stop, smallest, grad, accuracy):
        return {"feature_map": "relu", "eps": 0.0, "lr": 0.01, "seed": seed, "first_nonfinite_step": stop,
                "spikes": 1, "smallest_normaliser": smallest, "largest_grad_norm": grad, "accuracy": accuracy,
                "final_loss": None if stop is not None else 1.0}
    rows = summarise([run(0, 3, 0.0, None, 0.0), run(1, None, 0.5, 2.0, 0.9),
                      run(0, None, 1.0, 1.0, 0.5) | {"lr": 0.003}])
    assert [(r["lr"], r["seeds"]) for r in rows] == [(0.01, [0, 1]), (0.003, [0])]
    first = rows[0]
    assert first["nonfinite_steps"] == [3, None] and first["spikes"] == 2
    assert first["smallest_normaliser"] == 0.0 and first["largest_grad_norm"] == 2.0
    assert first["recall"] == [0.0, 0.9] and first["final_loss"] == [None, 1.0]


def test_the_window_softmax_is_causal_softmax_over_its_window():
    from course_lib.attention import softmax_attention
    from course_lib.device import seeded_qkv
    from course_lib.models import window_softmax

    q, k, v = seeded_qkv(2, n=12, d=8, dv=5)
    assert torch.allclose(window_softmax(q, k, v, 12), softmax_attention(q, k, v, causal=True), atol=1e-12)
    assert torch.allclose(window_softmax(q, k, v, 1), v, atol=1e-12)
    narrow, full = window_softmax(q, k, v, 3), softmax_attention(q[..., 6:, :], k[..., 4:7, :], v[..., 4:7, :])
    assert torch.allclose(narrow[..., 6, :], full[..., 0, :], atol=1e-12)  # query 6 sees keys 4, 5, 6


@pytest.mark.parametrize("feature_map", [None, "identity"])
def test_the_normaliser_free_linear_mixer_trains_causally_with_a_signed_map(feature_map):
    model = TinyLM(16, d_model=32, n_heads=4, mixer="linear", feature_map=feature_map, normaliser=False, max_len=32)
    tokens = torch.randint(0, 16, (4, 20), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[:, 12:] = (changed[:, 12:] + 1) % 16
    assert torch.equal(model(tokens)[:, :12], model(changed)[:, :12])  # nothing after position 11 reaches it
    losses = next_token_losses(model, tokens, steps=5)
    assert losses[-1] < losses[0], losses
    assert model.parameter_count() == TinyLM(16, d_model=32, n_heads=4, max_len=32).parameter_count() + 2 * 8


def test_only_the_linear_mixer_drops_its_normaliser():
    with pytest.raises(ValueError, match="normaliser=False .* needs mixer 'linear', got 'softmax'"):
        TinyLM(16, mixer="softmax", normaliser=False)
    with pytest.raises(TypeError, match="normaliser must be True or False"):
        TinyLM(16, mixer="linear", normaliser="no")


def test_logits_at_a_mask_are_the_full_logits_at_those_positions():
    model = TinyLM(16, d_model=16, n_heads=2, max_len=12, mixer="delta")
    tokens = torch.randint(0, 16, (3, 12), generator=torch.Generator().manual_seed(1))
    at = torch.rand(3, 12, generator=torch.Generator().manual_seed(2)) < 0.3
    torch.testing.assert_close(model(tokens, at=at), model(tokens)[at])
    with pytest.raises(ValueError, match="at must be a bool tensor shaped like tokens"):
        model(tokens, at=at.long())


def test_the_additive_write_is_delta_without_its_eraser():
    """delta_additive's ledger is Σ β_j k̂_j v_jᵀ: its output is the masked product of the normalised q and k."""
    mixer = Mixer(8, 2, "delta_additive", conv_size=0)
    x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(3))
    q, k, v = mixer.qkv(x).view(1, 6, 3, 2, 4).permute(2, 0, 3, 1, 4)
    beta = torch.sigmoid(mixer.beta(x)).transpose(1, 2)  # [1, 2, 6]
    scores = torch.nn.functional.normalize(q, dim=-1) @ torch.nn.functional.normalize(k, dim=-1).transpose(-1, -2)
    expected = (scores.tril() * beta.unsqueeze(-2)) @ v  # [1, 2, 6, 4]
    torch.testing.assert_close(mixer(x), mixer.out(expected.transpose(1, 2).reshape(1, 6, 8)))


def test_performer_features_set_favors_m_and_only_for_the_performer():
    model = TinyLM(16, d_model=16, n_heads=2, mixer="performer", performer_features=32)
    assert model.blocks[0].mixer.features.num_features == 32
    with pytest.raises(ValueError, match="performer_features sets FAVOR"):
        TinyLM(16, d_model=16, n_heads=2, mixer="linear", performer_features=32)


def test_state_bytes_grow_with_length_only_for_softmax():
    sizes = {T: {m: state_bytes(m, d_model=64, n_heads=2, seq_len=T) for m in MIXERS} for T in (64, 128)}
    assert sizes[128]["softmax"] - sizes[64]["softmax"] == 4 * 2 * 2 * 2 * 64 * 32  # bytes · layers · heads · k,v · ΔT · dh
    assert all(sizes[64][m] == sizes[128][m] for m in MIXERS if m != "softmax")
    conv = 4 * 2 * 3 * 64  # bytes · layers · taps kept · d_model
    assert sizes[64]["delta"] == conv + 4 * 2 * 2 * 32 * 32  # a dh × dh ledger per head, no normaliser
    assert sizes[64]["linear"] == sizes[64]["delta"] + 4 * 2 * 2 * 32  # plus the running sum of features
    assert state_bytes("performer", d_model=64, n_heads=2, seq_len=64, performer_features=128) == conv + 4 * 2 * 2 * (128 * 32 + 128)
    assert state_bytes("linear", d_model=64, n_heads=2, seq_len=64, normaliser=False) == sizes[64]["delta"]


def test_the_gated_delta_gate_starts_as_gated_deltanets():
    """log α = −exp(A_log)·softplus(Wx + dt_bias): at W = 0 it is −A·dt with A in (0, 16), dt in [0.001, 0.1]."""
    mixer = TinyLM(16, d_model=32, n_heads=4, mixer="gated_delta").blocks[0].mixer
    a, step = mixer.gate_log_a.exp(), torch.nn.functional.softplus(mixer.gate_dt_bias)
    assert bool(((a > 0) & (a < 16)).all()) and bool(((step >= 0.001 - 1e-7) & (step <= 0.1 + 1e-7)).all())
    assert bool((-(a * step) > -1.6).all())  # every head starts with a gate above e^-1.6 a token
