"""ex00_running_mean: the mean of v over positions 0..i, for every i (the practice exercise)."""

import torch

from .common import make_mutants, trivial_answers


def positions(v, start=1):
    """[n, 1]: start, start + 1, ... in v's dtype, the counts a running sum is divided by."""
    return torch.arange(start, start + v.shape[-2], dtype=v.dtype).unsqueeze(-1)


def ex00_whole_mean(v):
    return v.mean(dim=-2, keepdim=True).expand_as(v)


def ex00_divides_by_index(v):
    return v.cumsum(dim=-2) / positions(v, start=0)


def ex00_no_division(v):
    return v.cumsum(dim=-2)


def ex00_excludes_self(v):
    earlier = v.cumsum(dim=-2) - v  # v_0 + … + v_{i−1}
    return earlier / positions(v, start=0).clamp(min=1)  # i earlier tokens (position 0: none, divided by 1)


def ex00_first_axis(v):
    return v.cumsum(dim=0) / torch.arange(1, v.shape[0] + 1, dtype=v.dtype).view(-1, *[1] * (v.dim() - 1))


MUTANTS = make_mutants(
    (ex00_whole_mean, "values no_future_leakage batch_dims",
     "takes the mean over the whole sequence, so every position reads the future"),
    (ex00_divides_by_index, "values batch_dims", "divides by the 0-based position i (inf at position 0) instead of i + 1"),
    (ex00_no_division, "values batch_dims", "returns the running sum, not the mean"),
    (ex00_excludes_self, "values batch_dims", "leaves position i out of its own mean"),
    (ex00_first_axis, "batch_dims", "runs the sum over the first axis, which is the positions only without batch dims"),
)


def trivial(kind):
    """v -> zeros, a copy of v, or random numbers of v's shape."""

    def answer(v):
        if kind == "zeros":
            return torch.zeros_like(v)
        return v.clone() if kind == "copy" else torch.randn(v.shape, dtype=v.dtype)

    return answer


TRIVIAL = trivial_answers("ex00", trivial)


def ex00_loop(v):
    """Token by token, a ledger of one running sum and a count: the recurrent form."""
    total, outputs = torch.zeros_like(v[..., 0, :]), []
    for i in range(v.shape[-2]):
        total = total + v[..., i, :]
        outputs.append(total / (i + 1))
    return torch.stack(outputs, dim=-2)


ALTERNATIVES = [ex00_loop]
