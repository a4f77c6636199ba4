"""How far a float32 ledger drifts from float64 over long streams, with and without the fix.

    .venv/bin/python benchmarks/ledger_drift.py > course_lib/results/ledger_drift_cpu.txt

Token by token (``step``) every token is one rounded addition to S and z; in chunks most of
the summation happens inside a matmul. ``ledger_dtype=torch.float64`` keeps the ledger wide.
Notebook 05 shows the same effect on shorter streams.
"""

import torch

from course_lib import LinearAttentionState
from course_lib.device import seeded_qkv


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b).norm() / b.norm())


def drift(tokens: int, chunk: int, ledger_dtype: torch.dtype | None, d: int = 16) -> tuple[float, float]:
    """(relative error of z, of S) after ``tokens`` float32 tokens fed ``chunk`` at a time."""
    q, k, v = seeded_qkv(n=tokens, d=d, dtype=torch.float32)  # [tokens, d] each
    v = v + 0.5  # a mean, so S grows like z
    state, reference = LinearAttentionState(ledger_dtype=ledger_dtype), LinearAttentionState()
    for start in range(0, tokens, chunk):
        piece = slice(start, start + chunk)
        state.extend(q[piece], k[piece], v[piece])
        reference.extend(q[piece].double(), k[piece].double(), v[piece].double())
    return relative(state.z, reference.z), relative(state.S, reference.S)


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, d = dv = 16, float32 inputs")
    print(f"{'tokens':>9} | {'chunk':>5} | {'ledger':>7} | rel. error z | rel. error S")
    for tokens, chunk in ((10**4, 1), (10**5, 1), (10**5, 4096), (10**6, 4096)):
        for name, dtype in (("float32", None), ("float64", torch.float64)):
            z_error, s_error = drift(tokens, chunk, dtype)
            print(f"{tokens:>9,} | {chunk:>5} | {name:>7} | {z_error:12.1e} | {s_error:12.1e}")


if __name__ == "__main__":
    main()
