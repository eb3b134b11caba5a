"""benchmarks/decode_products.py's timing, without a GPU: each timed replay waits behind
a GPU sleep longer than the host took to launch it, between its two events."""
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import decode_products  # noqa: E402  (benchmarks/ is no package)

from .fake_gpu import fake_torch  # noqa: E402


def test_replays_are_timed_behind_a_sleep_longer_than_their_launch(monkeypatch):
    stream: list = []
    clock = iter([0.0, 0.5])  # the probe replay took half a second on the host
    monkeypatch.setattr(decode_products.time, "perf_counter", lambda: next(clock))
    durations = [0.5, 0.3, 0.1, 0.2]  # the first: median_ms's probe for slow calls
    ms = decode_products.graph_ms(fake_torch(stream, durations),
                                  lambda: stream.append("replay"), repeat=3)
    assert ms == 0.2 and not durations
    sleep = ("sleep", 2_000_000_000 + 200_000)  # 0.5 s twice over at 2 GHz, a margin
    # two replays before timing (the host probe), median_ms's two warm-ups, then each
    # timed replay between its events behind the sleep
    assert stream == ["replay"] * 4 + [sleep, "event", "replay", "event"] * 4
