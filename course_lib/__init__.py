"""Companion package of the linear-attention course.

Reference implementations come first (``attention.softmax_attention``,
``attention.kernel_attention``), the fast linear forms second
(``attention.linear_attention``, ``state.LinearAttentionState``); every fast
form is tested against the explicit kernel oracle.
"""

from course_lib.attention import kernel_attention, linear_attention, softmax_attention
from course_lib.device import get_device
from course_lib.feature_maps import elu_plus_one
from course_lib.state import LinearAttentionState

__all__ = [
    "LinearAttentionState",
    "elu_plus_one",
    "get_device",
    "kernel_attention",
    "linear_attention",
    "softmax_attention",
]
