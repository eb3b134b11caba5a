"""ZYNML_CPU_THREADS: the worker count of IREE's local-task device (zynml/runtime/iree_runner.py
runtime_config), checked by counting the worker threads a fresh process starts: by name, since
other threads (MLIR's compile pool on a cold cache, OpenBLAS) come and go, and once the
count holds, since a new thread takes its name only when it starts running."""
import os
import subprocess
import sys

import pytest

from zynml import knobs
from zynml.runtime import iree_runner

_COUNT_WORKERS = r"""
import os, time, numpy as np, zynml
x = np.arange(5, dtype=np.float32)
add_one = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n        out[i] = x[i] + 1.0\n}"
assert np.array_equal(zynml.run(add_one, x=x)["y"], x + 1)

def workers():
    names = [open(f"/proc/self/task/{t}/comm").read() for t in os.listdir("/proc/self/task")]
    return sum(name.startswith("iree-worker") for name in names)

# a new thread names itself once it runs: count until the count holds for 0.3 s
seen, since, deadline = workers(), time.monotonic(), time.monotonic() + 5
while time.monotonic() < deadline and time.monotonic() - since < 0.3:
    time.sleep(0.02)
    now = workers()
    if now != seen:
        seen, since = now, time.monotonic()
print(seen)
"""

@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_cpu_threads_knob_sets_the_worker_count():
    """ZYNML_CPU_THREADS=k starts k IREE workers."""
    started = {}
    for threads in (1, 2):
        env = dict(os.environ, ZYNML_CPU_THREADS=str(threads))
        done = subprocess.run([sys.executable, "-c", _COUNT_WORKERS], env=env,
                              capture_output=True, text=True, check=True)
        started[threads] = int(done.stdout.split()[-1])
    assert started == {1: 1, 2: 2}


def test_cpu_threads_knob_rejects_a_negative_count(monkeypatch):
    monkeypatch.setenv("ZYNML_CPU_THREADS", "-1")
    monkeypatch.setattr(iree_runner, "_configs", {})
    with pytest.raises(knobs.KnobError, match="ZYNML_CPU_THREADS='-1' is not a valid int: "
                                              "expected an integer of at least 0"):
        iree_runner.runtime_config("local-task")
    with pytest.raises(knobs.KnobError, match="ZYNML_CPU_THREADS"):
        knobs.validate()  # the CLIs' check at start: a usage error before any work
