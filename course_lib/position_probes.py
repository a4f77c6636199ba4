"""Probes for order and relative position: does a scheme see the order, and only through j − i?

Notebook 07 (every remedy's verdict) and notebook 09 §3 (misconception 3) ask the same two
questions of every positional scheme, with the same two measurements:

- ``shuffle_change``: shuffle the windows (keys and values together) and measure how much the
  outputs that see every key move. 0 (to rounding) means the scheme is blind to order.
- ``diagonal_spread``: put one query vector at every position and one key vector at every
  position; a score that depends on j − i alone is then constant along each diagonal, so the
  largest max − min along a diagonal is 0. A spread > 0 means absolute positions leak in.

Both return Python floats: they are measurements for a printed verdict, not differentiable.
"""

from collections.abc import Callable

import torch


def max_abs_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b| over all entries, as a float: the number every exactness check prints."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise ValueError(f"a and b must be tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.shape != b.shape:
        shapes = f"{tuple(a.shape)} and {tuple(b.shape)}"
        raise ValueError(f"a and b must have the same shape, got {shapes}")
    return (a - b).abs().max().item() if a.numel() else 0.0


def shuffle_change(
    attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, perm: torch.Tensor, *, causal: bool = False,
) -> float:
    """max |attend(q, k, v) − attend(q, k[perm], v[perm])| over the rows that see every key.

    q [..., n, d], k [..., m, d], v [..., m, dv]; ``perm`` a permutation of 0..m−1 applied to
    keys and values together (each window keeps its own dish). Non-causal: every row is
    compared. Causal: only the last row, the one query that sees all keys (earlier rows see
    different keys after a shuffle for a trivial reason). 0 means blind to order.
    """
    m = k.shape[-2]
    if not isinstance(perm, torch.Tensor) or perm.shape != (m,) or not torch.equal(
        perm.sort().values.cpu(), torch.arange(m)
    ):
        shape = tuple(perm.shape) if isinstance(perm, torch.Tensor) else type(perm).__name__
        raise ValueError(f"perm must be a permutation of 0..{m - 1} (shape [{m}]), got {shape}")
    out = attend(q, k, v)  # [..., n, dv]
    shuffled = attend(q, k[..., perm, :], v[..., perm, :])  # [..., n, dv]
    rows = slice(-1, None) if causal else slice(None)
    return max_abs_difference(out[..., rows, :], shuffled[..., rows, :])


def diagonal_spread(scores: torch.Tensor) -> float:
    """Largest (max − min) of ``scores`` [n, m] along any diagonal j − i = const.

    0 when the score depends on the offset j − i alone (a relative position scheme fed the
    same query and key vector at every position); > 0 when absolute positions leak in.
    Diagonals of length 1 have spread 0. Notebook 07 §2 and §3, notebook 09 §3.
    """
    if not isinstance(scores, torch.Tensor) or scores.dim() != 2 or scores.numel() == 0:
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"scores must be a non-empty [n, m] tensor, got {shape}")
    n, m = scores.shape
    spreads = [scores.diagonal(o) for o in range(-n + 1, m)]  # offset o = j − i
    return max((s.max() - s.min()).item() for s in spreads)
