"""The validation contract (the interview reference's): bad input raises a ValueError that says what is wrong."""

import math
import sys

import numpy as np
import pytest
import torch

from course_lib import validation
from course_lib.attention import kernel_attention, linear_attention, softmax_attention
from course_lib.device import seeded_qkv
from course_lib.state import LinearAttentionState
from course_lib.validation import (
    ArgumentTypeError,
    all_finite,
    check_choice,
    check_flag,
    check_int,
    check_number,
)


def stream(q, k, v, **kwargs):
    return LinearAttentionState(**kwargs).extend(q, k, v)


def linear(method):
    return lambda q, k, v, **kwargs: linear_attention(q, k, v, method=method, **kwargs)


FORMS = {
    "kernel": kernel_attention,
    **{f"linear_{method}": linear(method) for method in ("auto", "parallel", "recurrent", "chunked")},
}
ALL = {**FORMS, "softmax": softmax_attention, "state": stream}


def inputs(n=6, m=None, d=4, dv=3):
    return seeded_qkv(2, n=n, m=m, d=d, dv=dv)


def with_value(x, value, index=(0, 2, 1)):
    x = x.clone()
    x[index] = value
    return x


BAD_SHAPES = {
    "empty_q": (lambda q, k, v: (q[..., :0, :], k, v), "must not be empty"),
    "empty_k": (lambda q, k, v: (q, k[..., :0, :], v[..., :0, :]), "must not be empty"),
    "kv_length": (lambda q, k, v: (q, k, v[..., :5, :]), "k and v must have the same length, got 6 and 5"),
    "zero_d": (lambda q, k, v: (q[..., :0], k[..., :0], v), "at least one feature dim, got d=0"),
    "zero_dv": (lambda q, k, v: (q, k, v[..., :0]), "v must have at least one feature dim, got dv=0"),
    "qk_dim": (lambda q, k, v: (q, k[..., :3], v), "q and k must have the same feature dim, got 4 and 3"),
    "one_dim": (lambda q, k, v: (q[0, 0], k, v), r"q must have shape \[\.\.\., n, d\]"),
    "batch": (lambda q, k, v: (q, torch.cat([k, k, k]), torch.cat([v, v, v])), "leading .* dims must broadcast"),
    "dtype": (lambda q, k, v: (q, k.float(), v), "q and k must share dtype"),
    "int_v": (lambda q, k, v: (q, k, v.long()), "v must have a floating-point dtype"),
}
NON_FINITE = {
    f"{name}_{label}": (position, value)
    for position, name in enumerate("qkv")
    for label, value in (("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf))
}


@pytest.mark.parametrize("form", ALL.values(), ids=ALL.keys())
@pytest.mark.parametrize("corrupt, message", BAD_SHAPES.values(), ids=BAD_SHAPES.keys())
def test_bad_shapes_are_refused_by_name(form, corrupt, message):
    with pytest.raises(ValueError, match=message):
        form(*corrupt(*inputs()))


@pytest.mark.parametrize("form", ALL.values(), ids=ALL.keys())
@pytest.mark.parametrize("position, value", NON_FINITE.values(), ids=NON_FINITE.keys())
def test_non_finite_inputs_are_refused(form, position, value):
    args = list(inputs())
    args[position] = with_value(args[position], value)
    with pytest.raises(ValueError, match=f"{'qkv'[position]} must hold finite values, found 1 NaN/inf"):
        form(*args)


@pytest.mark.parametrize("form", [*FORMS.values(), softmax_attention], ids=[*FORMS.keys(), "softmax"])
def test_causal_needs_equal_lengths(form):
    with pytest.raises(ValueError, match="same length, got n=6 and m=8"):
        form(*inputs(n=6, m=8), causal=True)


def test_a_stream_chunk_needs_equal_lengths():
    with pytest.raises(ValueError, match="same length, got n=6 and m=8"):
        stream(*inputs(n=6, m=8))


def test_non_tensor_is_a_type_error_naming_the_argument():
    q, k, v = inputs()
    with pytest.raises(TypeError, match="v must be a torch.Tensor, got list"):
        linear_attention(q, k, v.tolist())


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
@pytest.mark.parametrize("causal", [False, True])
def test_underflowing_features_are_a_degenerate_normaliser(form, causal):
    """elu+1 at −2000 is exp(−2000) = 0 even in float64: φ(q)ᵀΣφ(k) = 0."""
    q, k, v = inputs()
    with pytest.raises(ValueError, match="degenerate normaliser"):
        form(q - 2000.0, k - 2000.0, v, causal=causal)


def test_underflow_in_one_query_is_caught_in_the_stream():
    q, k, v = inputs()
    q = with_value(q, -2000.0, index=(0, 3))
    with pytest.raises(ValueError, match="for 1 of 12 queries"):
        stream(q, k, v)


@pytest.mark.parametrize("form", [*FORMS.values(), stream], ids=[*FORMS.keys(), "state"])
def test_eps_turns_the_degenerate_case_into_zeros(form):
    q, k, v = inputs()
    out = form(q - 2000.0, k - 2000.0, v, eps=1e-6)
    assert torch.equal(out, torch.zeros_like(out))


@pytest.mark.parametrize("form", [*FORMS.values(), stream], ids=[*FORMS.keys(), "state"])
def test_sign_indefinite_feature_map_is_caught(form):
    """φ(x) = x can make φ(q)ᵀΣφ(k) negative: refused, not divided."""
    q, k, v = inputs()
    q, k = torch.ones_like(q), -torch.ones_like(k)
    with pytest.raises(ValueError, match="feature map is not positive"):
        form(q, k, v, feature_map=lambda x: x)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "0", True])
def test_eps_must_be_a_non_negative_number(bad):
    with pytest.raises(ValueError, match="eps must be a finite number >= 0"):
        linear_attention(*inputs(), eps=bad)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_chunk_size_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        linear_attention(*inputs(), chunk_size=bad)


def test_unknown_method_lists_the_choices():
    with pytest.raises(ValueError, match=r"method must be one of \('auto', 'parallel', 'recurrent', 'chunked'\)"):
        linear_attention(*inputs(), method="fast")


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_feature_map_output_is_checked(form):
    with pytest.raises(ValueError, match="feature_map\\(q\\) returned zero features"):
        form(*inputs(), feature_map=lambda x: x[..., :0])
    with pytest.raises(ValueError, match="feature_map\\(q\\) produced non-finite features"):
        form(*(x * 1000 for x in inputs()), feature_map=torch.exp)  # exp(1000) overflows


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_all_finite_survives_a_sum_that_overflows_and_catches_every_bad_entry(dtype):
    huge = torch.full((64,), torch.finfo(dtype).max / 2, dtype=dtype)  # finite entries, overflowing sum
    assert all_finite(huge)
    for bad in (math.nan, math.inf, -math.inf):
        x = torch.ones(1000, dtype=dtype)
        x[517] = bad
        assert not all_finite(x)
    mixed = torch.tensor([math.inf, -math.inf], dtype=dtype)  # inf - inf: the sum is NaN, still caught
    assert not all_finite(mixed)


def test_require_one_query_names_the_argument_that_does_not_fit():
    from course_lib.validation import require_one_query

    query, keys, values = torch.zeros(4), torch.zeros(3, 4), torch.zeros(3, 2)
    require_one_query(query, keys, values)  # fits: nothing raised
    with pytest.raises(ValueError, match=r"query must be \[d\] and keys \[n, d\] with the same d"):
        require_one_query(torch.zeros(5), keys, values)
    with pytest.raises(ValueError, match=r"values must be \[n, dv\] with n = 3 rows, got \(2, 2\)"):
        require_one_query(query, keys, torch.zeros(2, 2))
    with pytest.raises(TypeError, match="keys must be a torch.Tensor"):
        require_one_query(query, [[0.0] * 4], values)


SCALARS = {
    "flag": (lambda: check_flag("causal", 1), ArgumentTypeError, r"causal must be True or False, got 1"),
    "int_bool": (lambda: check_int("n", True), ArgumentTypeError, r"n must be a positive int, got True"),
    "int_low": (lambda: check_int("tokens", -1, at_least=0), ValueError, r"tokens must be an int >= 0, got -1"),
    "int_optional": (lambda: check_int("chunk_size", 0, optional=True), ValueError,
                     r"chunk_size must be a positive int or None, got 0"),
    "number_nan": (lambda: check_number("eps", math.nan, at_least=0), ValueError,
                   r"eps must be a finite number >= 0, got nan"),
    "number_unit": (lambda: check_number("timeout", 0, above=0, unit="seconds"), ValueError,
                    r"timeout must be a finite number of seconds > 0, got 0"),
    "number_str": (lambda: check_number("scale", "1", above=0, meaning="the spread σ"), ArgumentTypeError,
                   r"scale must be a finite number > 0 \(the spread σ\), got '1'"),
    "choice": (lambda: check_choice("method", "fast", ("auto", "chunked")), ValueError,
               r"method must be one of \('auto', 'chunked'\), got 'fast'"),
}


@pytest.mark.parametrize("call, error, message", SCALARS.values(), ids=SCALARS.keys())
def test_scalar_options_are_refused_in_one_message_style(call, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        call()


def test_scalar_options_that_fit_come_back_as_python_numbers():
    assert check_int("n", np.int64(3)) == 3 and type(check_int("n", np.int64(3))) is int
    assert check_number("x", 2) == 2.0 and check_int("chunk_size", None, optional=True) is None


def validation_entries(call) -> int:
    """How many times ``call()`` enters ``course_lib.validation`` from outside it.

    A call counts when the function runs from validation.py and its caller does not (calls inside the
    module are one entry's work); frames of generated code (a dataclass's ``__init__``, file "<string>")
    are looked through to the caller that made them.
    """
    inside = validation.__file__
    entries = 0

    def watch(frame, event, arg):
        nonlocal entries
        if event != "call" or frame.f_code.co_filename != inside:
            return
        caller = frame.f_back
        while caller is not None and caller.f_code.co_filename.startswith("<"):
            caller = caller.f_back
        entries += caller is None or caller.f_code.co_filename != inside

    sys.setprofile(watch)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entries


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "non_causal"])
@pytest.mark.parametrize("method", ["auto", "chunked"])
def test_linear_attention_enters_validation_twice_at_most(causal, method):
    """One check of every input before the arithmetic, one of the result: not a check per layer of calls."""
    q, k, v = inputs(n=12)
    entries = validation_entries(lambda: linear_attention(q, k, v, causal=causal, method=method))
    assert entries <= 2, f"linear_attention(causal={causal}, method={method!r}) entered validation {entries} times"
