"""Every TMA descriptor a kernel copies through is fenced first, by the copying thread
(strategies/hopper.py, acquire_tensor_maps): the runtime writes descriptors into device
memory with a host copy and reuses their slots (runtime/cuda/tensor_maps.py), and the
CUDA programming guide asks for `fence.proxy.tensormap::generic.acquire` before the copy
engine reads a descriptor written that way. Checked on the PTX of each TMA strategy."""
import re
from pathlib import Path

import numpy as np
import pytest

import zynml

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "tests" / "programs" / "examples" / "matmul.zyn"
ATTENTION = ROOT / "tests" / "programs" / "attention_no_mask.zyn"

CASES = {
    "matmul_wgmma": (MATMUL, {"A": np.ones((256, 128), np.float16),
                              "B": np.ones((128, 256), np.float16)}),
    "attention_wgmma": (ATTENTION, {n: np.ones((1, 2, 70, 64), np.float16) for n in "QKV"}),
}


def _kernels(ptx: str) -> dict[str, str]:
    """Each .entry's body by name."""
    parts = re.split(r"^\.visible \.entry (\w+)\(", ptx, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("strategy", sorted(CASES))
def test_each_descriptor_is_fenced_before_its_first_copy(strategy):
    path, inputs = CASES[strategy]
    artifact = zynml.compile(path, device="cuda", require_device=False).artifact(inputs)
    kernels = {name: body for name, body in _kernels(artifact.ptx).items()
               if strategy in name}
    assert kernels, [s.get("strategy") for s in artifact.plan["body"]]
    assert re.search(r"^\.version 8\.3$", artifact.ptx, re.M)  # the fence's ISA
    for name, body in kernels.items():
        copies = [(m.start(), m.group(1)) for m in
                  re.finditer(r"cp\.async\.bulk\.tensor\S* \[[^\]]+\], \[(%rd\d+),", body)]
        fences = {m.group(1): m.start() for m in re.finditer(
            r"fence\.proxy\.tensormap::generic\.acquire\.sys \[(%rd\d+)\], 128;", body)}
        assert copies, name
        for at, descriptor in copies:
            assert descriptor in fences and fences[descriptor] < at, (name, descriptor)
