"""benchmarks/gpu_vs_torch.py's timing, without a GPU: a fake torch records the stream
of GPU work each timed call queues."""
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import gpu_vs_torch  # noqa: E402  (benchmarks/ is no package)

from .fake_gpu import fake_torch  # noqa: E402


def test_queued_calls_wait_behind_a_gpu_sleep():
    stream: list = []
    durations = [0.5, 0.3, 0.1, 0.2]  # the first: the probe for calls over 100 ms
    torch = fake_torch(stream, durations)
    ms = gpu_vs_torch.median_ms(lambda: stream.append("call"), 3, torch)
    assert ms == 0.2 and not durations
    timed = stream[2:]  # after the two warm-up calls
    sleep = ("sleep", gpu_vs_torch.QUEUE_CYCLES)
    assert timed == [sleep, "event", "call", "event"] * 4


def test_per_call_timing_starts_on_an_idle_gpu():
    stream: list = []
    torch = fake_torch(stream, [0.5, 0.4, 0.6, 0.1])
    ms = gpu_vs_torch.median_ms(lambda: stream.append("call"), 3, torch, queued=False)
    assert ms == 0.4
    assert stream[2:] == ["event", "call", "event"] * 4


def test_slow_calls_are_timed_three_times():
    stream: list = []
    durations = [150.0] + [120.0, 130.0, 110.0]
    ms = gpu_vs_torch.median_ms(lambda: stream.append("call"), 20,
                                fake_torch(stream, durations))
    assert ms == 120.0 and not durations
