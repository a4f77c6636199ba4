"""Feature maps φ that turn a similarity into a dot product: K(q, k) = φ(q)ᵀφ(k).

Derived in notebook 02 (the blackboard) and, for random features, notebook 03.
"""

import torch


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1, elementwise: x + 1 for x > 0, exp(x) for x ≤ 0.

    The Linear Transformer's map (Katharopoulos et al. 2020). It defines its own
    kernel; it does not approximate exp(qᵀk). Computed branch by branch: the literal
    ``F.elu(x) + 1`` forms exp(x) − 1 + 1 and cancels to exactly 0 already at
    x ≈ −17 (float32) or −37 (float64); this form stays positive until exp(x)
    itself underflows (≈ −104 in float32, ≈ −745 in float64).
    Shapes: [..., d] -> [..., d].
    """
    return torch.where(x > 0, x + 1.0, torch.exp(x.clamp(max=0.0)))
