"""Grader tests, one module per exercise; the module name is the exercise id (see ``registry``)."""

LINEAR_ATTENTION_FORMS = (  # the course's linear attention in every form: the model answer of ex02, ex05, ex06
    "course_lib.attention.linear_attention",
    "course_lib.attention.kernel_attention",
    "course_lib.attention.kernel_weights",
    "course_lib.attention.linear_sums",
    "course_lib.linear_forms.parallel_form",
    "course_lib.linear_forms.recurrent_form",
    "course_lib.linear_forms.chunked_form",
    "course_lib.fast_forms.causal_attention",
    "course_lib.fast_forms.fast_noncausal",
    "course_lib.state.LinearAttentionState",
    "course_lib.retention.retention_kernel_attention",
)
