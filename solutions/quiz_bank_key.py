"""The key to the graded quiz's bank (course_tools/grading/quiz_bank.py): one formula per template.

Instructor side only: the student copy has no solutions/, so no submission can read this file.
Each formula takes the template's numbers by name and returns the answer.
"""

import math

ANSWERS = {
    "score_multiplications": lambda n, d: n * n * d,  # N² dot products of length d
    "weights_mib": lambda b, h, n: b * h * n * n * 4 / 2**20,  # b·h matrices of N² float32 numbers
    "crossover": lambda d: d + 1,  # 2N²d > 2N·d² exactly when N > d
    "ledger_numbers": lambda m, dv, h: h * (m * dv + m),  # S is m × d_v, z has m entries, per head
    "kv_cache_numbers": lambda h, d, t: 2 * h * d * t,  # one key and one value of d numbers per token and head
    "chunk_scores": lambda n, c, m: (n // c) * c * c * m,  # N/C chunks of a C×C product of length m
    "positive_mse": lambda m, s: (math.exp(s) - 1) / m,  # Lemma 2: exp(s)·SM²·(1 − exp(−s))/m over SM²
    "rope_angle": lambda d, p, r, i: (p - r) * 10000 ** (-2 * i / d),  # only the offset p − r survives
    "decay_half_life": lambda g: math.floor(math.log(0.5) / math.log(g)) + 1,  # γᵗ < 1/2 ⇔ t > ln ½ / ln γ
    "decay_memory": lambda g: 1 / (1 - g),  # a geometric series
    "delta_readback": lambda t, b: 1 - (1 - b) ** t,  # each write closes the fraction β of the gap to v
    "recall_capacity": lambda f: f,  # f independent linear constraints Sᵀk_j = v_j at most
}
