"""Device names, placement and the devices present (zynml/devices.py). Runs anywhere:
the GPUs of a machine with some are simulated by patching `_cuda_devices`."""
import os

import numpy as np
import pytest

import zynml
import zynml.devices as devices
from zynml.devices import DeviceError, Placement, compute_devices, parse_device, resolve


@pytest.fixture
def fresh_devices():
    """compute_devices() is cached: clear it before and after a test that patches what
    it finds, so that neither the real list nor the simulated one leaks."""
    compute_devices.cache_clear()
    yield
    compute_devices.cache_clear()


@pytest.fixture
def no_gpu(monkeypatch, fresh_devices):
    """This machine as a machine without any GPU, whatever it really has."""
    monkeypatch.setattr(devices, "_cuda_devices", lambda: [])
    monkeypatch.setattr(devices, "_iree_devices", lambda kind, driver: [])


@pytest.fixture
def two_gpus(monkeypatch, fresh_devices):
    def found():  # a new list each call: compute_devices extends what it gets
        return [{"id": f"cuda:{i}", "type": "gpu", "name": f"Fake H100 #{i}",
                 "memory": 80 * 2 ** 30, "compute_capability": "9.0"} for i in range(2)]
    monkeypatch.setattr(devices, "_cuda_devices", found)
    monkeypatch.setattr(devices, "_iree_devices", lambda kind, driver: [])


# ============================================================================ parse_device

@pytest.mark.parametrize("name,expected", [
    ("cpu", ("cpu", 0)), ("cpu:0", ("cpu", 0)), ("cuda", ("cuda", 0)),
    ("cuda:0", ("cuda", 0)), ("cuda:3", ("cuda", 3)), ("cuda:17", ("cuda", 17)),
    ("vulkan:1", ("vulkan", 1)), ("rocm", ("rocm", 0)), ("metal:2", ("metal", 2)),
    ("auto", ("auto", 0)), (" cuda:2 ", ("cuda", 2)),
])
def test_parse_device(name, expected):
    assert parse_device(name) == expected


# "gpu" gets an id of its own: conftest skips any test with a keyword "gpu" on a machine
# without one, and a parameter's id is a keyword.
@pytest.mark.parametrize("name", [pytest.param("gpu", id="word-gpu"), "cuda:x", "cuda:",
                                  "cuda:-1", "cuda:1:2", "CUDA", "", "tpu:0", "cuda0",
                                  "cuda 1"])
def test_parse_device_rejects_unknown_or_malformed_names(name):
    with pytest.raises(DeviceError) as err:
        parse_device(name)
    assert "unknown device" in str(err.value)
    assert "cuda:N" in str(err.value)  # the message lists what is accepted


@pytest.mark.parametrize("name", ["cpu:1", "auto:1", "cpu:7"])
def test_cpu_and_auto_take_no_device_number(name):
    with pytest.raises(DeviceError, match="takes no device number"):
        parse_device(name)


@pytest.mark.parametrize("name", [0, None, ("cuda", 0)])
def test_parse_device_rejects_non_strings(name):
    with pytest.raises(DeviceError, match="string"):
        parse_device(name)


def test_device_error_is_a_value_error():
    assert issubclass(DeviceError, ValueError)


# ============================================================================ resolve, no GPU

def test_auto_without_a_gpu_is_the_cpu_through_iree(no_gpu):
    placement = resolve("auto")
    assert placement == Placement("cpu", 0, "iree")
    assert placement.device == "cpu"
    assert resolve("auto", "iree") == Placement("cpu", 0, "iree")


def test_auto_with_the_native_backend_and_no_gpu_is_an_error(no_gpu):
    with pytest.raises(DeviceError, match="backend 'native' cannot run device 'auto'"):
        resolve("auto", "native")


def test_a_missing_gpu_is_not_available(no_gpu):
    with pytest.raises(DeviceError) as err:
        resolve("cuda:0", require_present=True)
    message = str(err.value)
    assert "device 'cuda:0' is not available" in message
    assert "available devices: auto, cpu" in message
    with pytest.raises(DeviceError, match="is not available"):
        resolve("cuda:0")  # require_present is the default
    with pytest.raises(DeviceError, match="device 'vulkan:1' is not available"):
        resolve("vulkan:1")


def test_a_missing_gpu_is_a_placement_when_not_required(no_gpu):
    placement = resolve("cuda:0", require_present=False)
    assert placement == Placement("cuda", 0, "native")
    assert (placement.kind, placement.ordinal, placement.backend) == ("cuda", 0, "native")
    assert placement.device == "cuda:0"
    assert resolve("cuda:5", require_present=False).device == "cuda:5"
    assert resolve("cuda", require_present=False) == Placement("cuda", 0, "native")
    assert resolve("vulkan:2", require_present=False) == Placement("vulkan", 2, "iree")


def test_iree_runs_cuda_too(no_gpu):
    assert resolve("cuda:1", "iree", require_present=False) == Placement("cuda", 1, "iree")
    assert resolve("cuda", "native", require_present=False) == Placement("cuda", 0, "native")


@pytest.mark.parametrize("device", ["cpu", "vulkan", "vulkan:0", "rocm", "metal"])
def test_native_backend_runs_only_cuda(no_gpu, device):
    with pytest.raises(DeviceError) as err:
        resolve(device, "native", require_present=False)
    assert f"backend 'native' cannot run device '{device}'" in str(err.value)
    assert "it runs on: iree" in str(err.value)


@pytest.mark.parametrize("backend", ["cuda", "tensorrt", "IREE", ""])
def test_unknown_backend(no_gpu, backend):
    with pytest.raises(DeviceError) as err:
        resolve("cpu", backend)
    assert f"unknown backend '{backend}'" in str(err.value)
    assert "native, iree" in str(err.value)


def test_resolve_rejects_bad_device_names(no_gpu):
    with pytest.raises(DeviceError, match="unknown device 'gpu'"):
        resolve("gpu", require_present=False)


def test_cpu_is_always_present(no_gpu):
    assert resolve("cpu") == Placement("cpu", 0, "iree")
    assert resolve("cpu", "iree") == Placement("cpu", 0, "iree")


# ============================================================================ compute_devices

def test_compute_devices_ends_with_the_cpu(fresh_devices):
    found = compute_devices()
    assert found, "the CPU is always there"
    cpu = found[-1]
    assert cpu["id"] == "cpu" and cpu["type"] == "cpu"
    assert isinstance(cpu["name"], str) and cpu["name"]
    assert cpu["cores"] == (os.cpu_count() or 1)
    assert [d["id"] for d in found].count("cpu") == 1
    for device in found[:-1]:  # whatever GPUs there are come first, numbered
        kind, ordinal = parse_device(device["id"])
        assert kind in ("cuda", "vulkan", "rocm", "metal") and device["type"] == "gpu"
    assert compute_devices() is found  # cached


# ============================================================================ two simulated GPUs

def test_simulated_gpus_are_listed_before_the_cpu(two_gpus):
    ids = [d["id"] for d in compute_devices()]
    assert ids == ["cuda:0", "cuda:1", "cpu"]
    assert compute_devices() == compute_devices()  # no entry appended twice


def test_auto_with_gpus_is_cuda_0_native(two_gpus):
    assert resolve("auto") == Placement("cuda", 0, "native")
    assert resolve("auto").device == "cuda:0"
    assert resolve("auto", "native") == Placement("cuda", 0, "native")
    assert resolve("auto", "iree") == Placement("cuda", 0, "iree")


def test_present_and_absent_ordinals(two_gpus):
    assert resolve("cuda:1") == Placement("cuda", 1, "native")
    assert resolve("cuda:0", "iree") == Placement("cuda", 0, "iree")
    with pytest.raises(DeviceError) as err:
        resolve("cuda:2")
    assert "device 'cuda:2' is not available" in str(err.value)
    assert "available devices: auto, cuda:0, cuda:1, cpu" in str(err.value)
    assert resolve("cuda:2", require_present=False) == Placement("cuda", 2, "native")
    with pytest.raises(DeviceError, match="is not available"):
        resolve("vulkan:0")  # CUDA GPUs are no Vulkan devices


def test_cache_is_cleared_after_simulation(fresh_devices):
    """What the simulated tests left behind: nothing (the fixture cleared the cache)."""
    ids = [d["id"] for d in compute_devices()]
    assert "Fake" not in " ".join(d["name"] for d in compute_devices())
    assert ids[-1] == "cpu"


def test_compute_devices_in_the_language_is_a_host_value(rng):
    """The spec's `let devices = compute_devices()`: the list zynml.compute_devices() gives,
    returned with the outputs; a body cannot read it."""
    prog = zynml.compile("let devices = compute_devices()\nlet y = compute(x) {\n"
                         "    @kernel elementwise\n    for i in 0..n:\n"
                         "        out[i] = x[i] * 2.0\n}\n")
    x = rng.standard_normal(5).astype(np.float32)
    result = prog(x=x)
    assert result["devices"] == zynml.compute_devices()
    np.testing.assert_array_equal(result["y"], x * 2)
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile("let devices = compute_devices()\nlet y = compute(x) {\n"
                      "    @kernel elementwise\n    for i in 0..n:\n"
                      "        out[i] = x[i] * devices\n}\n")
    assert str(err.value).startswith("<string>:5:25: error: 'devices' is the list of devices")
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile("let d = compute_devices(1)\n")
    assert str(err.value).startswith("<string>:1:9: error: compute_devices() takes no arguments")
