"""MQAR: the layout the docstring promises, determinism, refusals; recall_accuracy; one training run learns."""

import pytest
import torch

from course_lib.device import one_thread
from course_lib.recall import IGNORE, mqar, recall_accuracy
from course_lib.recall.stability import StabilityRun, train_watching_normaliser
from course_lib.recall.train import RecallRun, train_recall


def draw(seed: int = 0, **task):
    task = {"num_pairs": 5, "seq_len": 20, "vocab_size": 32} | task
    return mqar(64, generator=torch.Generator().manual_seed(seed), **task)


def test_each_query_asks_for_a_context_key_and_its_target_is_that_keys_value():
    tokens, targets = draw()
    P, V = 5, 32
    for row, target_row in zip(tokens, targets):
        keys, values = row[0 : 2 * P : 2], row[1 : 2 * P : 2]
        assert len(set(keys.tolist())) == P and bool(((keys >= 1) & (keys < V // 2)).all())
        assert bool(((values >= V // 2) & (values < V)).all())
        pairs = dict(zip(keys.tolist(), values.tolist()))
        scored = (target_row != IGNORE).nonzero().flatten()
        assert len(scored) == P and bool((scored >= 2 * P).all())  # every key asked once, after the context
        assert sorted(row[scored].tolist()) == sorted(keys.tolist())
        assert [pairs[key] for key in row[scored].tolist()] == target_row[scored].tolist()
        filler = torch.ones_like(row, dtype=torch.bool)
        filler[: 2 * P], filler[scored] = False, False
        assert bool((row[filler] == 0).all())


def test_examples_differ_and_a_seed_repeats_them():
    tokens, targets = draw(seed=3)
    again, again_targets = draw(seed=3)
    assert torch.equal(tokens, again) and torch.equal(targets, again_targets)
    assert not torch.equal(tokens, draw(seed=4)[0])
    assert len({tuple(row.tolist()) for row in tokens}) == len(tokens)


@pytest.mark.parametrize("task, message", [
    ({"num_pairs": 7, "seq_len": 20}, "needs seq_len >= 3 \\* num_pairs = 21"),
    ({"num_pairs": 5, "vocab_size": 10}, "distinct keys need vocab_size >= 12"),
    ({"num_pairs": 0}, "num_pairs must be a positive int"),
    ({"seq_len": 2.5}, "seq_len must be a positive int"),
])
def test_impossible_tasks_are_refused_by_name(task, message):
    with pytest.raises(ValueError, match=message):
        draw(**task)


def test_recall_accuracy_counts_only_scored_positions():
    targets = torch.tensor([[IGNORE, 3, IGNORE, 1]])
    logits = torch.zeros(1, 4, 5)
    logits[0, 1, 3] = logits[0, 3, 2] = 1.0  # right at position 1, wrong at 3; unscored positions say anything
    assert recall_accuracy(logits, targets) == 0.5
    with pytest.raises(ValueError, match="score no position"):
        recall_accuracy(logits, torch.full((1, 4), IGNORE))
    with pytest.raises(ValueError, match="must agree"):
        recall_accuracy(logits, targets[:, :3])


def test_a_short_softmax_run_learns_recall_far_above_chance():
    run = RecallRun("softmax", num_pairs=2, seq_len=8, vocab_size=16, head_dim=16, steps=300, batch_size=32, lr=1e-2,
                    test_examples=256)
    with one_thread():  # a tiny model's many small ops: one thread, no barrier stalls beside other tests
        result = train_recall(run)
    chance = 1 / 8  # 8 possible values; this run reached 0.61 on the 2-core CPU
    assert result["accuracy"] > 4 * chance, result
    assert result["parameters"] > 0 and result["mixer"] == "softmax" and result["steps"] == 300


def test_a_run_builds_the_model_it_names_with_or_without_the_normaliser():
    tiny = dict(num_pairs=2, seq_len=8, vocab_size=16, head_dim=8, steps=2, batch_size=4, test_examples=8)
    divided = train_recall(RecallRun("linear", feature_map="identity", **tiny))
    free = train_recall(RecallRun("linear", feature_map="identity", normaliser=False, **tiny))
    assert (divided["normaliser"], free["normaliser"], free["feature_map"]) == (True, False, "identity")
    assert divided["final_loss"] != free["final_loss"]  # a different model, not the option dropped on the way
    with pytest.raises(ValueError, match="normaliser=False drops"):
        train_recall(RecallRun("softmax", normaliser=False, **tiny))


def test_a_stability_run_without_the_normaliser_reports_none_for_it():
    run = StabilityRun("identity", normaliser=False, steps=3, batch_size=4, test_examples=8)
    result = train_watching_normaliser(run)
    assert result["smallest_normaliser"] is None and result["first_nonfinite_step"] is None
    assert result["normaliser"] is False and all(x is None for x in result["trace"]["smallest_normaliser"])
