"""TinyLM: every mixer is causal, seeded, trainable, and the budgets match."""

import pytest
import torch

from course_lib.models import MIXERS, TinyLM, head_decays


def tokens(batch: int = 3, length: int = 10, vocab: int = 20, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("mixer", MIXERS)
def test_no_position_sees_the_future(mixer):
    model = TinyLM(20, d_model=16, n_heads=2, mixer=mixer, max_len=10).double()
    x = tokens()
    changed = x.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 20
    with torch.no_grad():
        before, after = model(x), model(changed)
    assert (before[:, :6] - after[:, :6]).abs().max() < 1e-12
    assert (before[:, 6:] - after[:, 6:]).abs().max() > 1e-6


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


def test_mixers_share_the_budget_except_the_delta_rules_beta_layer():
    counts = {mixer: TinyLM(64, d_model=32, n_heads=4, n_layers=2, mixer=mixer).parameter_count() for mixer in MIXERS}
    delta_extra = 2 * (32 * 4 + 4)  # per layer: β = sigmoid(W x + b), W [H, D]
    assert len({count for mixer, count in counts.items() if mixer != "delta"}) == 1
    assert counts["delta"] - counts["softmax"] == delta_extra


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
