"""A fake `torch` for the benchmarks' timing helpers, without a GPU: its CUDA events,
sleep and synchronize record the stream of GPU work in `stream`, and each event pair's
elapsed time is taken from `durations` in turn."""
import types


def fake_torch(stream: list, durations: list):
    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing

        def record(self):
            stream.append("event")

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return durations.pop(0)

    cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: None,
                                 _sleep=lambda cycles: stream.append(("sleep", cycles)))
    return types.SimpleNamespace(cuda=cuda)
