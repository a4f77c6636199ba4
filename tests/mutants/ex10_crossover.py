"""ex10_crossover: cost_model() -> the multiply-add counts of softmax and linear attention and their crossover N*."""

import math
import random

from .common import make_mutants, trivial_answers


def _cost_model(
    *, flops=1, softmax="both", products=2, projections=2, chunks="all", rounding="ceil", normaliser=False,
    causal_half=True,
):
    """A configurable ex10 cost model (cost_model() -> dict of the three functions); defaults are right.

    ``flops=2`` counts FLOPs; ``softmax``: "both" (N²(d + dv)), "scores" (N²d), "2d" (2N²d whatever dv);
    ``products``: 2 or 1 product of linear attention counted; ``projections``: how many of
    FAVOR+'s x ωᵀ are counted (0 ignores the feature map); ``chunks``: "all" (N·C·(f + dv)),
    "one" (a single C×C block) or "none"; ``rounding``: "ceil", "floor", "round" or "float";
    ``normaliser=True`` counts the normaliser's 2·N·f too (a convention the grader accepts);
    ``causal_half=False`` compares the causal chunked form with the full softmax count.
    """

    def macs_softmax(n, d, dv):
        per_pair = {"both": d + dv, "scores": d, "2d": 2 * d}[softmax]
        return flops * n * n * per_pair

    def macs_linear(n, d, dv, f, *, projections=False, chunk=None):
        total = products * n * f * dv + (projections_counted * n * d * f if projections else 0)
        total += 2 * n * f if normaliser else 0
        if chunk is not None and chunks != "none":
            total += (n * chunk if chunks == "all" else chunk * chunk) * (f + dv)
        return flops * total

    def predicted_crossover(d, dv, f, *, projections=False, chunk=None):
        per_token = macs_linear(1, d, dv, f, projections=projections, chunk=chunk)
        per_pair = macs_softmax(1, d, dv) / (2 if chunk is not None and causal_half else 1)  # causal: unmasked half
        if chunk is not None and chunks == "one":
            per_token = macs_linear(1, d, dv, f, projections=projections)  # its constant block ignored
        quotient = per_token / per_pair
        return {"ceil": math.ceil, "floor": math.floor, "round": round, "float": float}[rounding](quotient)

    projections_counted = projections

    def cost_model():
        return {"macs_softmax": macs_softmax, "macs_linear": macs_linear, "predicted_crossover": predicted_crossover}

    return cost_model


def _ex10(name, **settings):
    cost_model = _cost_model(**settings)
    cost_model.__name__ = name
    return cost_model


ex10_counts_flops = _ex10("ex10_counts_flops", flops=2)  # every count doubled; N* unchanged
ex10_softmax_scores_only = _ex10("ex10_softmax_scores_only", softmax="scores")
ex10_softmax_2n2d = _ex10("ex10_softmax_2n2d", softmax="2d")  # the article's 2N²d, wrong once dv != d
ex10_linear_one_product = _ex10("ex10_linear_one_product", products=1)
ex10_causal_vs_full_softmax = _ex10("ex10_causal_vs_full_softmax", causal_half=False)  # N* = d + C, not 2(d + C)
ex10_counts_normaliser = _ex10("ex10_counts_normaliser", normaliser=True)  # a convention: full marks
ex10_no_feature_cost = _ex10("ex10_no_feature_cost", projections=0)  # the explorer's old N = m
ex10_one_projection = _ex10("ex10_one_projection", projections=1)
ex10_one_chunk_block = _ex10("ex10_one_chunk_block", chunks="one")
ex10_no_chunk_blocks = _ex10("ex10_no_chunk_blocks", chunks="none")
ex10_crossover_floor = _ex10("ex10_crossover_floor", rounding="floor")
ex10_crossover_round = _ex10("ex10_crossover_round", rounding="round")
ex10_crossover_float = _ex10("ex10_crossover_float", rounding="float")

MUTANTS = make_mutants(
    (ex10_counts_flops, "softmax_count linear_count favor_projections causal_chunks",
     "counts FLOPs instead of multiply-adds, doubling every count"),
    (ex10_softmax_scores_only, "softmax_count",  # its crossover agrees with its own counts: graded once
     "counts only softmax's N²d scores, leaving out weights @ V (N²dv)"),
    (ex10_softmax_2n2d, "softmax_count", "counts softmax as 2N²d, which is right only when dv = d"),
    (ex10_linear_one_product, "linear_count favor_projections causal_chunks",
     "counts one product of linear attention (N·f·dv) instead of two"),
    (ex10_no_feature_cost, "favor_projections", "leaves FAVOR+'s projections x ωᵀ out of the linear cost"),
    (ex10_one_projection, "favor_projections",
     "counts FAVOR+'s projections once (N·d·f), not for both queries and keys"),
    (ex10_one_chunk_block, "causal_chunks crossover_general",
     "counts a single C×C block for the causal chunks instead of one per chunk"),
    (ex10_no_chunk_blocks, "causal_chunks", "leaves the causal chunks' C×C blocks out of the linear cost"),
    (ex10_causal_vs_full_softmax, "crossover_general crossover_rounds_up",
     "compares the causal chunked form with full softmax, not its unmasked half (N* = d + C)"),
    (ex10_crossover_floor, "crossover_general crossover_rounds_up",
     "rounds the crossover N* down with floor instead of up"),
    (ex10_crossover_round, "crossover_general crossover_rounds_up",
     "rounds the crossover N* to the nearest whole number instead of up"),
    (ex10_crossover_float, "elu_crossover_is_d favor_crossover_is_2m crossover_general crossover_rounds_up",
     "returns the crossover N* as an unrounded float"),
)
MISTAKE_FEEDBACK = [
    ("ex10_counts_flops", "softmax_count", "FLOPs (2 per multiply-add); the course counts multiply-adds"),
    ("ex10_softmax_scores_only", "softmax_count", "the weighted sum of the values adds N·N·dv"),
    ("ex10_softmax_2n2d", "softmax_count", "2N²d holds only when dv = d"),
    ("ex10_linear_one_product", "linear_count", "one product is missing"),
    ("ex10_no_feature_cost", "favor_projections", "the feature map is free here"),
    ("ex10_one_projection", "favor_projections", "only one projection counted"),
    ("ex10_one_chunk_block", "causal_chunks", "one C×C block counted"),
    ("ex10_no_chunk_blocks", "causal_chunks", "the C×C blocks inside the chunks are missing"),
    ("ex10_crossover_floor", "crossover_rounds_up", "round the quotient UP (math.ceil)"),
    ("ex10_crossover_round", "crossover_general", "returned 51, but at N = 51 your counts give linear 417,792 > softmax"),
    ("ex10_causal_vs_full_softmax", "crossover_general", "causal softmax, which computes only the unmasked half"),
    ("ex10_crossover_float", "elu_crossover_is_d", "returned 16.0 (float); return an int"),
]


def ex10_closed_forms():
    """N* written out case by case with math.ceil instead of from the per-token count."""

    def predicted_crossover(d, dv, f, *, projections=False, chunk=None):
        top = 2 * f * dv + (2 * d * f if projections else 0) + (chunk * (f + dv) if chunk else 0)
        return math.ceil(top / (d + dv)) if not chunk else math.ceil(2 * top / (d + dv))

    return {**_cost_model()(), "predicted_crossover": predicted_crossover}


ALTERNATIVES = [ex10_closed_forms, ex10_counts_normaliser]


def _cost_trivial(kind):
    def count(*args, **options):
        return {"zeros": 0, "copy": args[0], "random": random.randrange(1, 10**9)}[kind]

    def cost_model():
        return {"macs_softmax": count, "macs_linear": count, "predicted_crossover": count}

    return cost_model


TRIVIAL = trivial_answers("ex10", _cost_trivial)
TRIVIAL_FEEDBACK = [
    ("ex10_trivial_random", "elu_crossover_is_d", "the crossover is graded against your own counts"),
]
