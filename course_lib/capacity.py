"""What a fixed-size ledger can remember: n key→value pairs stored in one f × dv state (notebook 05).

S = Σ_j k_j v_jᵀ = KᵀV [..., f, dv] for keys K [..., n, f] and values V [..., n, dv]. Reading
with the query k_i returns k_iᵀS = Σ_j (k_iᵀk_j) v_jᵀ, so all n reads together are G V with the
Gram matrix G = K Kᵀ [..., n, n]: exact for every V iff G = I, which needs n ≤ f orthonormal keys.
Notebook 05, "What a fixed-size ledger cannot remember", derives it and measures the interference.
"""

import math

import torch

from course_lib.validation import check_ints, require_tensor


def store(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The state S = KᵀV = Σ_j k_j v_jᵀ, [..., f, dv] for keys [..., n, f], values [..., n, dv]."""
    require_tensor("keys", keys)
    require_tensor("values", values)
    if keys.shape[:-1] != values.shape[:-1]:
        got = f"{tuple(keys.shape)} and {tuple(values.shape)}"
        raise ValueError(f"keys [..., n, f] and values [..., n, dv] must share [..., n], got {got}")
    return keys.transpose(-2, -1) @ values


def recall(state: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Read the state with each query: qᵀS, [..., n_q, dv] for state [..., f, dv], queries [..., n_q, f]."""
    require_tensor("state", state)
    require_tensor("queries", queries)
    if queries.shape[-1] != state.shape[-2]:
        f, got = state.shape[-2], queries.shape[-1]
        raise ValueError(f"queries must have f = {f} features like the state, got {got}")
    return queries @ state


def recall_error(keys: torch.Tensor, values: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
    """Relative error of reading every stored pair back with its own key, [...].

    ‖scale · K (KᵀV) − V‖_F / ‖V‖_F over the n pairs: 0 for orthonormal keys; for n unit
    random keys in f dims about √((n − 1)/f) (``random_keys_error``). ``scale`` is a read-out
    gain (f/n turns a unit-norm tight frame's read-out into an orthogonal projection).
    """
    read = scale * recall(store(keys, values), keys)  # [..., n, dv]
    return (read - values).flatten(-2).norm(dim=-1) / values.flatten(-2).norm(dim=-1)


def random_unit_keys(n: int, f: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """n keys drawn uniformly on the unit sphere of R^f, [n, f] float64 on the CPU."""
    check_ints(n=n, f=f)
    keys = torch.randn(n, f, generator=generator, dtype=torch.float64)
    return keys / keys.norm(dim=-1, keepdim=True)


def orthonormal_keys(n: int, f: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """The best keys for n pairs in f dims, [n, f] float64 on the CPU (random orientation).

    n ≤ f: n orthonormal rows (K Kᵀ = I_n, every pair read back exactly). n > f: a Parseval
    frame, the first f columns of a random n × n orthogonal matrix (KᵀK = I_f, so K Kᵀ is the
    orthogonal projection onto an f-dim subspace of R^n; rows are not of unit length).
    """
    check_ints(n=n, f=f)
    basis, triangle = torch.linalg.qr(torch.randn(max(n, f), max(n, f), generator=generator, dtype=torch.float64))
    basis = basis * torch.sign(torch.diagonal(triangle)).unsqueeze(-2)
    return basis[:n, :f] if n <= f else basis[:, :f]


def random_keys_error(n: int, f: int) -> float:
    """√((n − 1)/f): expected RMS relative error of reading n pairs stored with unit random keys.

    The read-out error of pair i is Σ_{j≠i} (k_iᵀk_j) v_j; for independent uniform unit keys
    E[(k_iᵀk_j)²] = 1/f, so with values independent of the keys the squared error averages
    (n − 1)/f times the squared size of a value.
    """
    check_ints(n=n, f=f)
    return math.sqrt((n - 1) / f)


def state_error_bound(n: int, f: int) -> float:
    """√(max(n − f, 0)/n): the least relative error of any f-dim state holding n orthonormal targets.

    Any linear read-out of an f × dv state gives an n × n read-out matrix M of rank ≤ f; for the
    targets V = I_n, ‖M − I‖²_F ≥ n − f (on the ≥ n − f dimensional null space of M, M − I = −I),
    and an orthogonal projection of rank f reaches it.
    """
    check_ints(n=n, f=f)
    return math.sqrt(max(n - f, 0) / n)
