"""The contenders of the crossover suite, one registry.

Every contender takes the same q, k, v [B, H, N, d] (fp32) and computes self-attention
with dv = d; the linear ones use the library's default feature map ``elu_plus_one``
(so f = d, no feature-map MACs). ``flops`` is per (batch, head) entry, twice the MACs of
``course_lib.cost``: softmax routes (SDPA causal too: on the CPU its fused kernel still visits
every block up to the diagonal, and the dense count keeps the pairing comparable)
``macs_softmax``, non-causal and recurrent linear ``macs_linear``, chunked causal ones
``macs_causal_chunked`` with their chunk size. The ``plain_*``
contenders are ``bench.baselines``: the same algorithm in unchecked plain torch, so the
gap between ``linear`` and ``plain_linear`` is the library's bookkeeping.
"""

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from course_lib.attention import linear_attention, softmax_attention
from course_lib.cost import macs_causal_chunked, macs_linear, macs_softmax, weights_bytes
from course_lib.device import seeded_qkv
from course_lib.fast_forms import auto_chunk_size
from course_lib.feature_maps import elu_plus_one
from course_tools.bench.baselines import plain_causal_linear_attention, plain_linear_attention
from course_tools.bench.flops import FLOPS_PER_MAC

CHUNKED_CHUNK_SIZE = 64  # the "chunked" and "plain_linear_causal" contenders' fixed C; "auto" picks its own
FLA_CHUNK_SIZE = 64  # fla's naive_chunk_linear_attn hard-codes C = 64

Call = Callable[[], torch.Tensor]


@dataclass(frozen=True)
class Contender:
    """One attention implementation under test.

    ``make(q, k, v)`` returns the zero-argument call that is timed; ``flops(n, d)`` its
    executed FLOPs per head; ``dense_bytes(bh, n, itemsize)`` the n×n memory it is
    estimated to need (0 for linear routes), used to skip sizes over the budget.
    """

    name: str
    route: str  # "softmax" or "linear"
    causal: bool
    make: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Call]
    flops: Callable[[int, int], int]
    dense_bytes: Callable[[int, int, int], int] = lambda bh, n, itemsize: 0  # linear routes hold no n×n
    python_loop: bool = False  # a Python loop per token: its N is capped by the sweep


def _softmax_flops(n: int, d: int) -> int:
    return FLOPS_PER_MAC * macs_softmax(n, n, d, d)


def _linear_flops(n: int, d: int) -> int:
    return FLOPS_PER_MAC * macs_linear(n, n, d, d)


def _chunked_flops(chunk: Callable[[int, int], int]) -> Callable[[int, int], int]:
    """FLOPs of a causal chunked contender whose chunk size at (n, d) is ``chunk(n, d)``."""
    return lambda n, d: FLOPS_PER_MAC * macs_causal_chunked(n, d, d, chunk(n, d))


def suite_qkv(settings, heads: int, n: int, d: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """q, k, v [B, H, N, d] that a suite times its contenders on: ``course_lib.device.seeded_qkv`` with the
    ``settings``' batch, seed and dtype (the same numbers on every device)."""
    return seeded_qkv(settings.batch, heads, n=n, d=d, seed=settings.seed, dtype=getattr(torch, settings.dtype),
                      device=device)


def _sdpa(causal: bool) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Call]:
    return lambda q, k, v: lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _linear(causal: bool, method: str, **kwargs) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Call]:
    return lambda q, k, v: lambda: linear_attention(q, k, v, causal=causal, method=method, **kwargs)


CONTENDERS: dict[str, Contender] = {
    c.name: c
    for c in (
        # softmax_attention holds the scores and the weights, two [B, H, N, N] tensors, at once
        Contender("softmax", "softmax", False, lambda q, k, v: lambda: softmax_attention(q, k, v), _softmax_flops,
                  dense_bytes=lambda bh, n, itemsize: 2 * weights_bytes(bh, n, n, itemsize)),
        # SDPA's fused kernels (flash attention on the CPU, memory-efficient on CUDA for fp32) work in
        # blocks and never hold the N×N weights: measured peaks are O(N·d), so no size is skipped for memory
        Contender("sdpa", "softmax", False, _sdpa(False), _softmax_flops),
        Contender("sdpa_causal", "softmax", True, _sdpa(True), _softmax_flops),
        Contender("linear", "linear", False, _linear(False, "auto"), _linear_flops),
        Contender("linear_causal_auto", "linear", True, _linear(True, "auto"),
                  _chunked_flops(lambda n, d: auto_chunk_size(n, d, d))),
        Contender("linear_causal_chunked", "linear", True, _linear(True, "chunked", chunk_size=CHUNKED_CHUNK_SIZE),
                  _chunked_flops(lambda n, d: CHUNKED_CHUNK_SIZE)),
        Contender("linear_causal_recurrent", "linear", True, _linear(True, "recurrent"), _linear_flops,
                  python_loop=True),
        Contender("plain_linear", "linear", False, lambda q, k, v: lambda: plain_linear_attention(q, k, v),
                  _linear_flops),
        Contender("plain_linear_causal", "linear", True,
                  lambda q, k, v: lambda: plain_causal_linear_attention(q, k, v, CHUNKED_CHUNK_SIZE),
                  _chunked_flops(lambda n, d: CHUNKED_CHUNK_SIZE)),
    )
}

# Pairings for the crossover: (softmax route, linear route); the time ratio is softmax / linear.
PAIRINGS: tuple[tuple[str, str], ...] = (
    ("softmax", "linear"),
    ("sdpa", "linear"),
    ("sdpa_causal", "linear_causal_auto"),
    ("sdpa", "plain_linear"),
    ("sdpa_causal", "plain_linear_causal"),
)


def fla_peer() -> tuple[Contender | None, str]:
    """fla's pure-torch ``naive_chunk_linear_attn`` as a causal contender, if fla imports.

    fla (pip package ``fla-core``, the ``peers`` extra) takes [B, T, H, K]; it is given the
    same φ(q), φ(k) (elu + 1, inside the timed call), scale 1 and normalize=True, so it
    computes the same causal linear attention. Returns (contender or None, a note for the JSON).
    """
    try:
        (naive_chunk_linear_attn,) = _from_fla("linear_attn.naive.naive_chunk_linear_attn")
    except ImportError as error:
        return None, _not_imported(error)

    def make(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Call:
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # [B, N, H, d]
        return lambda: naive_chunk_linear_attn(elu_plus_one(q), elu_plus_one(k), v, scale=1.0, normalize=True)

    flops = _chunked_flops(lambda n, d: FLA_CHUNK_SIZE)
    return Contender("fla_naive_chunk", "linear", True, make, flops), "fla naive_chunk_linear_attn timed"


def fla_gated_peers() -> tuple[dict[str, Callable], str, str | None]:
    """fla's pure-torch gated references, if fla imports: ({"simple_gla": naive_chunk_simple_gla,
    "gated_delta": naive_chunk_gated_delta_rule} or {}, a note for the JSON, fla's version or None).

    Both take [B, T, H, ·] and return (out, final state); ``bench.gated`` checks them against ours first.
    fla imports triton at import time (a missing triton is the note), and runs on the CPU without a GPU.
    """
    try:
        simple, delta = _from_fla("simple_gla.naive.naive_chunk_simple_gla",
                                  "gated_delta_rule.naive.naive_chunk_gated_delta_rule")
    except ImportError as error:
        return {}, _not_imported(error), None
    note = "fla naive_chunk_simple_gla and naive_chunk_gated_delta_rule timed"
    return {"simple_gla": simple, "gated_delta": delta}, note, importlib.import_module("fla").__version__


def _from_fla(*names: str) -> list:
    """Objects of ``fla.ops`` by dotted name, imported with fla's warning on a machine without a GPU
    ("Triton is not supported on current platform, roll back to CPU") silenced; ImportError as imports raise it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [getattr(importlib.import_module(f"fla.ops.{name.rpartition('.')[0]}"), name.rpartition(".")[2])
                for name in names]


def _not_imported(error: ImportError) -> str:
    """The JSON's note for an fla that did not import: not installed, or why not."""
    missing = isinstance(error, ModuleNotFoundError) and error.name == "fla"
    return "fla not installed" if missing else f"fla not importable: {error}"


def contenders() -> tuple[list[Contender], str]:
    """The registry plus the fla peer when available, and the peer note."""
    peer, note = fla_peer()
    return list(CONTENDERS.values()) + ([peer] if peer is not None else []), note
