import pytest
import torch

from course_lib.device import DEVICE_ENV_VAR, describe_device, float64_device, get_device, one_thread, seeded_qkv


def test_override_argument_wins(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV_VAR, "cuda")
    assert get_device("cpu") == torch.device("cpu")


def test_environment_variable_is_honoured(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV_VAR, "cpu")
    assert get_device() == torch.device("cpu")


def test_default_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV_VAR, raising=False)
    if torch.cuda.is_available():
        expected = "cuda"
    elif torch.backends.mps.is_available():
        expected = "mps"
    else:
        expected = "cpu"
    assert get_device().type == expected


def test_unknown_name_is_refused(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV_VAR, "gpu-please")
    with pytest.raises(ValueError, match="COURSE_DEVICE must name a torch device.*'gpu-please'"):
        get_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_is_refused_not_silently_replaced():
    with pytest.raises(ValueError, match="asks for device 'cuda', which is not available"):
        get_device("cuda")


@pytest.mark.parametrize(
    ("threads", "expected"), [(1, "cpu (1 thread)"), (2, "cpu (2 threads)"), (3, "cpu (3 threads)")]
)
def test_describe_cpu_names_the_thread_count(threads, expected):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        described = describe_device(torch.device("cpu"))
    finally:
        torch.set_num_threads(before)
    assert described == expected


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_describe_cuda_names_the_card():
    assert torch.cuda.get_device_name(0) in describe_device(get_device("cuda"))


def test_float64_work_leaves_mps_for_the_cpu():
    assert float64_device(torch.device("mps")) == torch.device("cpu")
    assert float64_device(torch.device("cuda", 1)) == torch.device("cuda", 1)
    assert float64_device(torch.device("cpu")) == torch.device("cpu")


def test_one_thread_holds_torch_to_one_thread_and_restores_the_count_after_an_error():
    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="student error"), one_thread():
        assert torch.get_num_threads() == 1
        raise RuntimeError("student error")
    assert torch.get_num_threads() == threads


def test_seeded_qkv_draws_q_then_k_then_v_from_one_seeded_stream():
    q, k, v = seeded_qkv(2, 3, n=5, m=7, d=4, dv=2, seed=1)
    assert (q.shape, k.shape, v.shape) == ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 2)) and v.dtype == torch.float64
    g = torch.Generator().manual_seed(1)
    for x in (q, k, v):
        assert torch.equal(x, torch.randn(x.shape, generator=g, dtype=torch.float64))
    scaled = seeded_qkv(2, 3, n=5, m=7, d=4, dv=2, seed=1, scale=0.5)  # q and k scaled, v not
    assert all(torch.equal(a, b) for a, b in zip(scaled, (0.5 * q, 0.5 * k, v)))
    assert [x.shape for x in seeded_qkv(n=3, d=2, dtype=torch.float32)] == [(3, 2)] * 3  # m = n, dv = d
