"""The holes fuzzing found in the validation contract, each closed, and the old refusals kept.

Values are checked from the result (``validation.check_result``), not by scanning the inputs
up front; hypothesis puts each bad value at a random place and checks that the refusal,
and its message, are those of the contract.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.attention import kernel_attention, linear_attention, softmax_attention
from course_lib.device import seeded_qkv
from course_lib.positional import cosformer_attention, rope, rope_linear_attention
from course_lib.state import LinearAttentionState
from course_lib.validation import ArgumentTypeError


def stream(q, k, v, **options):
    return LinearAttentionState(**options).extend(q, k, v)


FORMS = {
    "softmax": softmax_attention,
    "kernel": kernel_attention,
    **{f"linear_{m}": (lambda m: lambda q, k, v, **o: linear_attention(q, k, v, method=m, **o))(m)
       for m in ("auto", "parallel", "recurrent", "chunked")},
    "state": stream,
    "rope_linear": rope_linear_attention,
    "cosformer": cosformer_attention,
}
LINEAR = {name: form for name, form in FORMS.items() if name != "softmax"}
FUZZ = settings(max_examples=60, deadline=None)


@FUZZ
@given(form=st.sampled_from(sorted(FORMS)), which=st.sampled_from("qkv"), bad=st.sampled_from([math.nan, math.inf,
       -math.inf]), causal=st.booleans(), n=st.integers(1, 12), d=st.sampled_from([2, 4]), data=st.data())
def test_a_non_finite_input_anywhere_is_named(form, which, bad, causal, n, d, data):
    causal = causal or form == "state"
    args = dict(zip("qkv", seeded_qkv(2, n=n, d=d, dv=3)))
    x = args[which]
    index = tuple(data.draw(st.integers(0, size - 1)) for size in x.shape)
    x[index] = bad
    with pytest.raises(ValueError, match=f"^{which} must hold finite values, found 1 NaN/inf entries$"):
        FORMS[form](*args.values(), **({} if form == "state" else {"causal": causal}))


@FUZZ
@given(form=st.sampled_from(sorted(LINEAR)), causal=st.booleans(), n=st.integers(1, 10), row=st.data())
def test_an_underflowing_query_is_a_degenerate_normaliser_of_exactly_its_rows(form, causal, n, row):
    causal = causal or form == "state"
    q, k, v = seeded_qkv(n=n, d=4, dv=2)
    q, k = q.abs() + 0.1, k.abs() + 0.1  # no row is all negative: ReLU (cosFormer) keeps every other query
    i = row.draw(st.integers(0, n - 1))
    q[i] = -2000.0  # elu+1 and relu both give φ(q_i) = 0 exactly
    with pytest.raises(ValueError, match="degenerate normaliser: .* for 1 of"):
        LINEAR[form](q, k, v, **({} if form == "state" else {"causal": causal}))


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_a_batch_dim_of_size_zero_gives_an_empty_output(form):
    q, k, v = seeded_qkv(0, 3, n=5, d=4, dv=2)
    out = form(q, k, v, **({} if form is stream else {"causal": True}))
    assert out.shape == (0, 3, 5, 2)


@pytest.mark.parametrize("dtype, huge", [(torch.float32, 1e20), (torch.float64, 1e160), (torch.float16, 200.0)])
def test_softmax_refuses_scores_that_overflow_instead_of_returning_nan(dtype, huge):
    q, k, v = seeded_qkv(n=4, d=3, dtype=torch.float64)
    q, k, v = (q * huge).to(dtype), (k * huge).to(dtype), v.to(dtype)
    if dtype == torch.float16:  # computed in float32: 200² · 3 fits, the answer is finite
        assert torch.isfinite(softmax_attention(q, k, v)).all()
        return
    with pytest.raises(ValueError, match=r"^the scores q·kᵀ·scale \(the inputs overflow the dtype: rescale them\) must hold finite values"):
        softmax_attention(q, k, v)


@pytest.mark.parametrize("scale", [math.nan, math.inf, True, "1"])
def test_softmax_scale_must_be_a_finite_number(scale):
    with pytest.raises(ValueError, match="scale must be a finite number or None"):
        softmax_attention(*seeded_qkv(n=3, d=2), scale=scale)


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_meta_tensors_and_non_tensors_are_refused_by_name(form):
    q, k, v = seeded_qkv(n=3, d=2)
    with pytest.raises(ValueError, match="k is a meta tensor"):
        form(q, k.to("meta"), v)
    with pytest.raises(ArgumentTypeError, match="v must be a torch.Tensor, got list"):
        form(q, k, v.tolist())
    assert issubclass(ArgumentTypeError, ValueError) and issubclass(ArgumentTypeError, TypeError)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_half_precision_is_computed_in_float32_and_returned_in_its_own_dtype(form, dtype):
    q, k, v = seeded_qkv(2, n=40, d=8, dv=4, dtype=torch.float32)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    options = {} if form is stream else {"causal": True}
    out = form(q, k, v, **options)
    want = form(q.float(), k.float(), v.float(), **options)
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), want, atol=1e-2, rtol=1e-2)  # one rounding to the half dtype


def test_rope_refuses_nan():
    x = torch.zeros(3, 4)
    x[1, 2] = math.nan
    with pytest.raises(ValueError, match="x must hold finite values, found 1 NaN/inf"):
        rope(x)


@pytest.mark.parametrize("option, value, message", [
    ("causal", "no", "causal must be True or False, got 'no'"),
    ("causal", 1, "causal must be True or False, got 1"),
    ("decay", True, "decay must be a number in \\(0, 1\\] or a tensor of them, got True"),
    ("decay", "0.9", "decay must be a number in"),
])
def test_options_are_their_type_not_merely_truthy(option, value, message):
    options = {"causal": True, option: value}
    with pytest.raises(ValueError, match=message):
        linear_attention(*seeded_qkv(n=4, d=2), **options)


def test_a_decay_tensor_out_of_range_is_refused_with_the_result():
    q, k, v = seeded_qkv(3, n=4, d=2)
    with pytest.raises(ValueError, match="decay must lie in \\(0, 1\\]"):
        linear_attention(q, k, v, causal=True, decay=torch.tensor([0.5, 1.5, 0.9], dtype=torch.float64))
    with pytest.raises(ValueError, match="q must hold finite values"):  # the contract's order: inputs first
        linear_attention(q * math.nan, k, v, causal=True, decay=torch.tensor([0.5, 1.5, 0.9], dtype=torch.float64))


def test_an_eps_that_overflows_the_dtype_is_refused_as_eps():
    q, k, v = seeded_qkv(n=4, d=2, dtype=torch.float32)
    with pytest.raises(ValueError, match="eps must be a finite number >= 0 in torch.float32, got 1e\\+300"):
        linear_attention(q, k, v, eps=1e300)
    assert torch.isfinite(linear_attention(q.double(), k.double(), v.double(), eps=1e300)).all()


def test_an_overflowing_normaliser_is_called_an_overflow_not_an_underflow():
    q, k, v = seeded_qkv(n=4, d=2, dtype=torch.float32)
    with pytest.raises(ValueError, match="overflowed"):
        linear_attention(q + 60.0, k + 60.0, v, feature_map=torch.exp)  # e^120·... is finite in no float32 sum


def test_a_stream_refuses_an_eps_its_ledger_cannot_hold():
    q, k, v = seeded_qkv(n=4, d=2, dtype=torch.float32)
    with pytest.raises(ValueError, match="eps must be a finite number >= 0 in torch.float32"):
        LinearAttentionState(eps=1e300).extend(q, k, v)
    assert torch.isfinite(LinearAttentionState(eps=1e300, ledger_dtype=torch.float64).extend(q, k, v)).all()
