"""The GPT decoder (zynml/models/gpt_decode.py) on an NVIDIA GPU (marked `gpu`): each
step's logits against PyTorch's float64 forward of the same model on the CPU (1e-4), and the graph replay (a CUDA graph)
equal to the step's calls bit for bit. Under ZYNML_GPU_COMPILE_ONLY (tools/gpu_tests.sh
compile, no GPU) the step's kernels are compiled at the GPU run's shapes."""
from __future__ import annotations

import numpy as np
import pytest

import zynml
from zynml.compile_only import DeviceScalar, cpu_values_cuda_artifacts
from zynml.models.gpt import CONFIGS, init_parameters
from zynml.models.gpt_decode import GPTDecoder

from conftest import COMPILE_ONLY, assert_close

TOY = CONFIGS["toy"]
BATCH, LENGTH = 3, 9


def _compile_only(params) -> None:
    dev = zynml.Device("cpu")
    dev.name, dev.kind = "cuda:0", "cuda"
    dev.alloc = lambda shape, dtype=np.float32: np.zeros(shape, dtype)
    with cpu_values_cuda_artifacts():
        decoder = GPTDecoder(TOY, params, dev, BATCH)
        decoder.pos = DeviceScalar(np.array(0, np.int64))  # as the GPU run's 0-d array
        decoder.reset()
        decoder.step()
    pytest.skip("compile-only: the artifacts are in the cache")


@pytest.mark.gpu
def test_cuda_decoder_matches_the_cpu_and_replays_its_calls():
    params = init_parameters(TOY, seed=4)
    if COMPILE_ONLY:
        _compile_only(params)
    torch = pytest.importorskip("torch")
    from zynml.models.gpt_torch import TorchGPT
    ids = np.random.default_rng(4).integers(0, TOY.vocab, (BATCH, LENGTH))
    with torch.no_grad():
        reference = TorchGPT(TOY, params, "cpu", torch.float64).logits(
            torch.from_numpy(ids)).numpy()
    cpu = [reference[:, t] for t in range(LENGTH)]
    direct = GPTDecoder(TOY, params, "cuda:0", BATCH).logits_of(ids, use_graph=False)
    replayed = GPTDecoder(TOY, params, "cuda:0", BATCH)
    replayed.capture()
    graph = replayed.logits_of(ids)
    for got, same, want in zip(graph, direct, cpu):
        np.testing.assert_array_equal(got, same)
        assert_close(got, want, rtol=1e-4)
    assert replayed.graph is not None
