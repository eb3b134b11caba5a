"""Shared test helpers: fresh random inputs, float64 references, GPU skipping."""
import os
import secrets
import shutil
import subprocess

import numpy as np
import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Compile for real in every test session: an empty artifact cache of our own."""
    old = os.environ.get("ZYNML_CACHE_DIR")
    os.environ["ZYNML_CACHE_DIR"] = str(tmp_path_factory.mktemp("zynml-cache"))
    yield
    if old is None:
        os.environ.pop("ZYNML_CACHE_DIR", None)
    else:
        os.environ["ZYNML_CACHE_DIR"] = old


@pytest.fixture
def rng():
    """A fresh generator per test; the seed is in the test's name on failure (-rA)."""
    seed = secrets.randbits(32)
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)


def assert_close(actual, expected, rtol=1e-5, floor=0.0):
    """Norm-wise relative error of `actual` against a float64 reference. `floor` is the
    smallest scale the error is measured against: for formulas that cancel in f32 (GELU's
    1 + tanh(u) for u << 0), a tiny result is only good to an absolute error."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    scale = max(np.max(np.abs(expected), initial=0.0), floor, np.finfo(np.float64).tiny)
    err = np.max(np.abs(actual - expected), initial=0.0) / scale
    assert err < rtol, f"relative error {err:.3e} >= {rtol:.0e}"


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
