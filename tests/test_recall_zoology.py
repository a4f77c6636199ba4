"""Zoology's MQAR generator: distinct keys and values, unscored random filler, the gap law, T independent of P."""

import pytest
import torch

from course_lib.recall import IGNORE, gap_law, recall_by_distance, zoology_mqar


def draw(batch=256, **task):
    task = {"num_pairs": 8, "seq_len": 64, "vocab_size": 128} | task
    return zoology_mqar(batch, generator=torch.Generator().manual_seed(0), **task), task


def test_keys_and_values_are_distinct_and_come_from_their_halves_of_the_vocabulary():
    (tokens, _, _), task = draw()
    P, V = task["num_pairs"], task["vocab_size"]
    keys, values = tokens[:, 0 : 2 * P : 2], tokens[:, 1 : 2 * P : 2]  # [B, P]
    assert all(len(set(row.tolist())) == P for row in keys) and all(len(set(row.tolist())) == P for row in values)
    assert int(keys.min()) >= 1 and int(keys.max()) < V // 2 and int(values.min()) >= V // 2 and int(values.max()) < V


def test_every_key_is_asked_once_after_the_context_and_its_target_is_its_own_value():
    (tokens, targets, distances), task = draw()
    P = task["num_pairs"]
    scored = targets != IGNORE
    assert bool((scored.sum(-1) == P).all()) and not bool(scored[:, : 2 * P].any())
    for row in range(tokens.shape[0]):
        pairs = dict(zip(tokens[row, 0 : 2 * P : 2].tolist(), tokens[row, 1 : 2 * P : 2].tolist()))
        positions = scored[row].nonzero().flatten()
        assert sorted(tokens[row, positions].tolist()) == sorted(pairs)  # each key asked once
        for position in positions.tolist():
            key = int(tokens[row, position])
            assert int(targets[row, position]) == pairs[key]
            assert int(distances[row, position]) == position - 2 * list(pairs).index(key)  # back to its key
        assert all((position - 2 * P) % 2 == 0 for position in positions.tolist())  # queries sit at even offsets
    assert bool((distances[~scored] == 0).all())


def test_the_filler_is_random_and_never_scored():
    (tokens, targets, _), task = draw()
    P = task["num_pairs"]
    filler = tokens[:, 2 * P :][targets[:, 2 * P :] == IGNORE]
    assert filler.unique().numel() > 0.9 * task["vocab_size"]  # drawn from the whole vocabulary, not one token
    counts = torch.bincount(filler, minlength=task["vocab_size"]).double()
    assert float(counts.std() / counts.mean()) < 0.2  # uniform


def test_query_gaps_follow_the_power_law():
    (_, targets, _), task = draw(batch=20_000, num_pairs=1, seq_len=64)
    gaps = ((targets != IGNORE).nonzero()[:, 1] - 2) // 2  # the one query per example
    law = gap_law((task["seq_len"] - 2) // 2)
    seen = torch.bincount(gaps, minlength=law.numel()).double() / gaps.numel()
    assert float((seen - law).abs().sum()) / 2 < 0.02  # total variation distance
    assert law[0] > 10 * law[-1]  # a = 0.01: mostly soon after the context, a long tail
    uniform = gap_law(10, power_a=1.0)
    torch.testing.assert_close(uniform, torch.full((10,), 0.1, dtype=torch.float64))


def test_the_length_is_set_independently_of_the_number_of_pairs():
    for pairs, length in [(2, 64), (8, 64), (16, 64), (8, 128), (8, 32)]:
        (tokens, targets, _), _ = draw(batch=4, num_pairs=pairs, seq_len=length)
        assert tokens.shape == targets.shape == (4, length) and int((targets != IGNORE).sum()) == 4 * pairs


def test_the_draw_is_fixed_by_the_generator():
    first, _ = draw(batch=8)
    second, _ = draw(batch=8)
    assert all(torch.equal(a, b) for a, b in zip(first, second))


@pytest.mark.parametrize("task, message", [
    ({"seq_len": 63}, "seq_len must be even and >= 4 \\* num_pairs = 32"),
    ({"seq_len": 30}, "seq_len must be even and >= 4 \\* num_pairs = 32"),
    ({"vocab_size": 16}, "num_pairs=8 distinct keys need vocab_size >= 18"),
    ({"num_pairs": 0}, "num_pairs"),
])
def test_bad_settings_are_refused_by_name(task, message):
    with pytest.raises(ValueError, match=message):
        draw(batch=2, **task)


def test_recall_by_distance_buckets_the_answers():
    hits = torch.tensor([True, False, True, True])
    distances = torch.tensor([2, 3, 9, 40])
    assert recall_by_distance(hits, distances, (2, 4, 8, 16)) == [
        {"from": 2, "to": 4, "recall": 0.5, "count": 2}, {"from": 8, "to": 16, "recall": 1.0, "count": 1}]
    with pytest.raises(ValueError, match="hits and distances must be"):
        recall_by_distance(hits, distances[:3], (2, 4))
