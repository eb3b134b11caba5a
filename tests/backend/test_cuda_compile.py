"""The native CUDA backend without a GPU: targets, PTX and cubin for the spec examples,
launch plans that agree with the kernels they launch, strategy selection, and the
artifact file (zynml/backend/cuda, zynml/runtime/cuda/artifact.py). ptxas is installed
on the machines these run on, so every artifact carries a cubin."""
import functools
import io
import json
import re
import secrets
import shutil
import subprocess
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import conftest
import zynml
from zynml import compiler
from zynml.backend.cuda import CudaTarget
from zynml.backend.cuda.stages import BACKEND as NATIVE
from zynml.backend.cuda.target import DEFAULT_CHIP, PTX_ISA
from zynml.runtime.cuda.artifact import (FORMAT, VERSION, ArtifactError, CudaArtifact, describe,
                                         launches)

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"
EXAMPLES = PROGRAMS / "examples"
SOFTMAX = ROOT / "examples" / "softmax.zyn"

_SEED = secrets.randbits(32)
print(f"module rng seed {_SEED}")
_RNG = np.random.default_rng(_SEED)


def f32(*shape):
    return _RNG.standard_normal(shape).astype(np.float32)


# ============================================================================ CudaTarget

def test_default_target_is_sm_90a_at_o3():
    target = CudaTarget()
    assert (target.chip, target.opt_level) == ("sm_90a", 3) == (DEFAULT_CHIP, 3)
    assert target.ptx_features == "+ptx83"
    assert target.compute_capability == (9, 0)


@pytest.mark.parametrize("chip", ["sm_99", "sm_90b", "sm90", "compute_90", "", "SM_80"])
def test_unknown_chip(chip):
    with pytest.raises(ValueError, match="unknown CUDA target") as err:
        CudaTarget(chip)
    assert "sm_90a" in str(err.value)  # the known chips are listed


def test_chip_must_be_a_string():
    with pytest.raises(ValueError, match="unknown CUDA target"):
        CudaTarget(80)


@pytest.mark.parametrize("level", [-1, 4, "3", 3.5, None])
def test_bad_opt_level(level):
    with pytest.raises(ValueError, match="opt_level must be 0..3"):
        CudaTarget("sm_80", level)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_good_opt_levels(level):
    assert CudaTarget("sm_80", level).opt_level == level


def test_parse():
    assert CudaTarget.parse("sm_80") == CudaTarget("sm_80")
    assert CudaTarget.parse(" sm_89 ") == CudaTarget("sm_89")
    assert CudaTarget.parse("sm_90a").chip == "sm_90a"
    assert CudaTarget.parse("sm_80").opt_level == 3
    for text in ("80", "sm80", "sm_80x", "sm_", "compute_80"):
        with pytest.raises(ValueError, match="bad CUDA target"):
            CudaTarget.parse(text)
    with pytest.raises(ValueError, match="unknown CUDA target 'sm_99'"):
        CudaTarget.parse("sm_99")  # well formed, but no such chip


@pytest.mark.parametrize("chip,features,capability", [
    ("sm_70", "+ptx60", (7, 0)), ("sm_75", "+ptx63", (7, 5)), ("sm_80", "+ptx70", (8, 0)),
    ("sm_86", "+ptx71", (8, 6)), ("sm_89", "+ptx78", (8, 9)), ("sm_90", "+ptx78", (9, 0)),
    ("sm_90a", "+ptx83", (9, 0)), ("sm_100a", "+ptx86", (10, 0)),
    ("sm_120", "+ptx87", (12, 0)),
])
def test_features_and_compute_capability(chip, features, capability):
    target = CudaTarget(chip)
    assert target.ptx_features == features
    assert target.compute_capability == capability


def test_every_known_chip_has_a_capability_and_features():
    for chip in PTX_ISA:
        major, minor = CudaTarget(chip).compute_capability
        assert 7 <= major <= 12 and 0 <= minor <= 9
        assert re.fullmatch(r"\+ptx\d\d", CudaTarget(chip).ptx_features)


def test_cache_key_tells_chips_and_levels_apart():
    keys = {CudaTarget(c, o).cache_key() for c in ("sm_80", "sm_90a") for o in (0, 3)}
    assert len(keys) == 4
    assert CudaTarget("sm_80").cache_key() == CudaTarget.parse("sm_80").cache_key()


def test_target_is_frozen():
    with pytest.raises(AttributeError):
        CudaTarget().chip = "sm_80"


def test_compile_with_an_unknown_target_is_a_zynml_error():
    with pytest.raises(zynml.ZynMLError, match="unknown CUDA target 'sm_99'"):
        zynml.compile(SOFTMAX, device="cuda", target="sm_99", require_device=False)


# ============================================================================ examples

# name -> (inputs, {output: (shape, dtype)}) at odd sizes (tests/test_spec_examples.py
# calls them with the same names)
CASES = {
    "elementwise_relu": (lambda: dict(x=f32(37)), {"y": ((37,), "float32")}),
    "broadcast": (lambda: dict(matrix=f32(7, 13), vector=f32(13)),
                  {"scaled": ((7, 13), "float32")}),
    "reduce_sum": (lambda: dict(data=f32(29)), {"sum": ((), "float32")}),
    "argmax": (lambda: dict(data=f32(31)), {"max_idx": ((), "int64")}),
    "matmul": (lambda: dict(A=f32(17, 31), B=f32(31, 13)), {"C": ((17, 13), "float32")}),
    "batched_matmul": (lambda: dict(A=f32(3, 5, 7), B=f32(3, 7, 2)),
                       {"C": ((3, 5, 2), "float32")}),
    "layer_norm": (lambda: dict(x=f32(5, 13), gamma=f32(13), beta=f32(13), eps=1e-5),
                   {"normalized": ((5, 13), "float32")}),
    "rope": (lambda: dict(x=f32(2, 3, 5, 8), cos_cache=f32(5, 4), sin_cache=f32(5, 4),
                          head_dim=8), {"rotated": ((2, 3, 5, 8), "float32")}),
    "conv2d": (lambda: dict(input=f32(2, 3, 7, 5), kernel=f32(4, 3, 3, 3), bias=f32(4),
                            out_h=7, out_w=5, in_h=7, in_w=5),
               {"output": ((2, 4, 7, 5), "float32")}),
    "attention": (lambda: dict(Q=f32(2, 3, 5, 4), K=f32(2, 3, 5, 4), V=f32(2, 3, 5, 4),
                               mask=_RNG.random((5, 5)) < 0.6),
                  {"attn": ((2, 3, 5, 4), "float32")}),
    "gelu": (lambda: dict(x=f32(19)), {"activated": ((19,), "float32")}),
    "fused_softmax": (lambda: dict(logits=f32(2, 3, 5)), {"probs": ((2, 3, 5), "float32")}),
}


@functools.lru_cache(maxsize=None)
def compiled(name):
    """(inputs, artifact) of one example, compiled once per test session."""
    make_inputs, _ = CASES[name]
    inputs = make_inputs()
    prog = zynml.compile(EXAMPLES / f"{name}.zyn", device="cuda", require_device=False)
    return inputs, prog.artifact(**inputs)


@functools.lru_cache(maxsize=None)
def compiled_source(path, target=None, **shapes):
    inputs = {name: f32(*shape) for name, shape in shapes.items()}
    prog = zynml.compile(path, device="cuda", target=target, require_device=False)
    return prog.artifact(**inputs)


def entries(ptx):
    """{kernel name: number of .param} of each .entry of a PTX module."""
    return {m.group(1): len(re.findall(r"\.param\b", m.group(2)))
            for m in re.finditer(r"\.entry\s+(\w+)\s*\(([^)]*)\)", ptx)}


def ranks(plan):
    """{value name: rank} of every tensor value the plan defines."""
    out = {f"%in{i}": len(spec["shape"]) for i, spec in enumerate(plan["inputs"])
           if spec["kind"] == "tensor"}
    shapes = {g["name"]: g["shape"] for g in plan["globals"]}

    def walk(body):
        for step in body:
            if step["op"] == "alloc":
                out[step["result"]] = len(step["shape"])
            elif step["op"] == "global":
                out[step["result"]] = len(shapes[step["name"]])
            elif step["op"] == "view":
                out[step["result"]] = len(step["sizes"])
            elif step["op"] == "for":
                walk(step["body"])
    walk(plan["body"])
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_compiles_to_ptx_and_cubin(name):
    _, artifact = compiled(name)
    assert artifact.ptx.startswith("//") and ".entry" in artifact.ptx
    assert re.search(r"^\.target sm_90a\b", artifact.ptx, re.M)
    assert re.search(r"^\.version 8\.3$", artifact.ptx, re.M)  # sm_90a: PTX ISA 8.3
    assert shutil.which("ptxas"), "these tests expect the CUDA toolkit's ptxas"
    assert artifact.cubin is not None and artifact.cubin[:4] == b"\x7fELF"
    assert artifact.chip == "sm_90a"
    assert artifact.zynml_version == zynml.__version__


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_launches_the_kernels_of_the_ptx(name):
    """Every launch names an .entry of the PTX, with as many .params as its arguments'
    descriptors take (3 + 2 * rank per memref, one per scalar); every entry is launched."""
    _, artifact = compiled(name)
    kernels = entries(artifact.ptx)
    steps = list(launches(artifact.plan["body"]))
    assert steps, "no launches"
    assert {s["kernel"] for s in steps} == set(kernels)
    for step in steps:
        assert f".entry {step['kernel']}(" in artifact.ptx
        assert len(step["arg_kinds"]) == len(step["args"])
        expected = sum(3 + 2 * int(k.split(":")[1]) if k.startswith("memref:") else 1
                       for k in step["arg_kinds"])
        assert kernels[step["kernel"]] == expected, step["kernel"]
        assert all(isinstance(v, int) and v >= 1 for v in step["grid"] + step["block"])
        assert step["block"][0] * step["block"][1] * step["block"][2] <= 1024
    assert describe(artifact)["kernels"] == sorted(kernels)


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_values_are_defined_before_use_with_the_right_rank(name):
    _, artifact = compiled(name)
    plan = artifact.plan
    rank = ranks(plan)
    defined = {f"%in{i}" for i in range(len(plan["inputs"]))}

    def walk(body):
        for step in body:
            for ref in step.get("args", []) + [step.get("source")]:
                if isinstance(ref, str):
                    assert ref in defined, f"{ref} used before it is defined in {step}"
            if step["op"] == "launch":
                for ref, kind in zip(step["args"], step["arg_kinds"]):
                    if kind.startswith("memref:"):
                        assert rank[ref] == int(kind.split(":")[1]), (ref, kind)
            if step["op"] == "for":
                defined.add(step["iv"])
                defined.update(step["iter_args"])
                walk(step["body"])
                defined.update(step["results"])
            elif "result" in step:
                defined.add(step["result"])
    walk(plan["body"])
    for spec in plan["outputs"]:
        assert spec["value"] in defined
        assert len(spec["shape"]) == rank[spec["value"]]


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_inputs_and_outputs_match_the_call(name):
    inputs, artifact = compiled(name)
    plan = artifact.plan
    _, outputs = CASES[name]
    assert sorted(plan["input_names"]) == sorted(inputs)
    assert len(plan["inputs"]) == len(inputs)
    for input_name, spec in zip(plan["input_names"], plan["inputs"]):
        value = inputs[input_name]
        if isinstance(value, (int, float)):  # numbers: kernel parameters, by value
            dtype = "float32" if isinstance(value, float) else "int64"  # a float binds f32
            assert spec == {"kind": "scalar", "dtype": dtype}, input_name
            continue
        assert spec["kind"] == "tensor"
        assert (tuple(spec["shape"]), spec["dtype"]) == (value.shape, value.dtype.name), \
            input_name
    assert plan["output_names"] == list(outputs)
    for output_name, spec in zip(plan["output_names"], plan["outputs"]):
        assert (tuple(spec["shape"]), spec["dtype"]) == outputs[output_name]
    assert plan["version"] == 3
    assert json.loads(json.dumps(plan)) == plan  # plain JSON data


ACCUMULATE_INTO_INPUT = """
pipeline f(a: tensor[m, k], b: tensor[k, n], c: tensor[m, n]) -> tensor[m, n]:
    let y = compute(a, b, c) {
        @kernel matmul
        for i in 0..m, j in 0..n:
            var s: f32 = c[i, j]
            for e in 0..k:
                s += a[i, e] * b[e, j]
            out[i, j] = s
    }
    return y
"""


def test_a_product_starting_from_an_input_writes_a_copy_not_the_input(tmp_path):
    """c is not `mut`: the product accumulates into a copy of it (read-only-inputs), and
    the output is that copy; before, the kernel wrote into the caller's c."""
    source = tmp_path / "accumulate.zyn"
    source.write_text(ACCUMULATE_INTO_INPUT)
    prog = zynml.compile(source, device="cuda", require_device=False)
    plan = prog.pipeline("f").artifact(a=f32(37, 5), b=f32(5, 11), c=f32(37, 11)).plan
    assert [step["op"] for step in plan["body"]] == ["alloc", "copy", "launch"]
    alloc, copy, launch = plan["body"]
    [output] = plan["outputs"]
    assert not output["value"].startswith("%in"), output
    assert output["value"] == alloc["result"] == launch["args"][-1]
    assert "%in2" not in launch["args"]


def test_spec_examples_have_no_constant_tensors():
    """None of the examples makes a memref.global (the globals case is hand-written
    below); if one starts to, it is covered by the artifact round trip there."""
    for name in CASES:
        _, artifact = compiled(name)
        assert artifact.plan["globals"] == [] and artifact.globals == {}


def test_same_call_twice_reads_the_cache():
    prog = zynml.compile(EXAMPLES / "gelu.zyn", device="cuda", require_device=False)
    x = f32(23)
    first, second = prog.artifact(x=x), prog.artifact(x=f32(23))
    assert first.plan == second.plan and first.ptx == second.ptx
    assert first.cubin == second.cubin
    other = prog.artifact(x=f32(24))  # another shape: another artifact
    assert other.plan["inputs"][0]["shape"] == [24]


# ============================================================================ strategies

def kernel_names(artifact):
    return [s["kernel"] for s in launches(artifact.plan["body"])]


def test_large_matmul_uses_the_matmul_strategy():
    """Not row_fused: a contraction's fill and matmul stay apart, the matmul tiled."""
    artifact = compiled_source(EXAMPLES / "matmul.zyn", A=(300, 200), B=(200, 129))
    assert artifact.plan["outputs"][0]["shape"] == [300, 129]
    names = kernel_names(artifact)
    assert any(n.endswith("_matmul") for n in names), names
    matmul = next(s for s in launches(artifact.plan["body"]) if s["kernel"].endswith("_matmul"))
    assert matmul["arg_kinds"] == ["memref:2", "memref:2", "memref:2"]
    assert matmul["args"][:2] == ["%in0", "%in1"]


def _entry_ptx(ptx: str, suffix: str) -> str:
    """The PTX of the one kernel whose name ends in `suffix`."""
    [entry] = [part for part in ptx.split(".entry ")[1:]
               if part.split("(", 1)[0].strip().endswith(suffix)]
    return entry


def _ptxas_spills(ptx: str, suffix: str) -> int | None:
    """ptxas -v's spill stores of the kernel ending in `suffix`, None without ptxas."""
    if shutil.which("ptxas") is None:
        return None
    result = subprocess.run(["ptxas", "-v", f"-arch={DEFAULT_CHIP}", "-", "-o", "/dev/null"],
                            input=ptx, capture_output=True, text=True, check=True)
    for part in result.stderr.split("Compiling entry function")[1:]:
        if part.split("'")[1].endswith(suffix):
            return int(re.search(r"(\d+) bytes spill stores", part).group(1))
    raise AssertionError(result.stderr)


# simt_gemm (matmul, implicit_gemm): two shared-memory stages, one barrier per step of BK
# (two bar.sync: after the first stage, in the loop), 16-byte shared reads (BK * (TM + TN)
# / 4 per step), 16-byte global reads of row-major f32 operands whose staged dimension is
# a multiple of 4 (one before the loop, one per step and operand), nothing in local memory.
@pytest.mark.parametrize("m,k,n,vector_reads", [(256, 64, 260, 4), (300, 200, 129, 2),
                                                (129, 33, 130, 0)])
def test_f32_matmul_structure(m, k, n, vector_reads):
    from zynml.backend.cuda.strategies import matmul
    p = matmul.DEFAULT_PARAMS
    artifact = compiled_source(EXAMPLES / "matmul.zyn", A=(m, k), B=(k, n))
    [launch] = [s for s in launches(artifact.plan["body"]) if s["kernel"].endswith("_matmul")]
    assert launch["grid"] == [-(-n // p.tile_n), -(-m // p.tile_m), 1]
    assert launch["block"] == [(p.tile_m // p.thread_m) * (p.tile_n // p.thread_n), 1, 1]
    ptx = _entry_ptx(artifact.ptx, "_matmul")
    assert ptx.count("bar.sync") == 2
    assert ptx.count("ld.shared.v4.") == p.tile_k * (p.thread_m + p.thread_n) // 4
    assert ptx.count("ld.global.v4.") == vector_reads
    assert ".local" not in ptx and "st.local" not in ptx
    assert _ptxas_spills(artifact.ptx, "_matmul") in (0, None)


def test_conv2d_implicit_gemm_structure():
    """The conv2d benchmark's shape (M = 64 output channels): by_cost's first tile, two
    stages, 16-byte shared reads, no spills."""
    from zynml.backend.cuda.strategies import implicit_gemm
    prog = zynml.compile(EXAMPLES / "conv2d.zyn", device="cuda", require_device=False)
    artifact = prog.artifact(input=f32(2, 64, 16, 16), kernel=f32(64, 64, 3, 3),
                             bias=f32(64), in_h=16, in_w=16, out_h=16, out_w=16)
    p = implicit_gemm.by_cost(64, 2 * 16 * 16)[0]
    assert (p.tile_m, p.tile_n, p.tile_k, p.thread_m, p.thread_n) == (64, 256, 16, 8, 8)
    ptx = _entry_ptx(artifact.ptx, "_implicit_gemm")
    assert ptx.count("bar.sync") == 2
    assert ptx.count("ld.shared.v4.") == p.tile_k * (p.thread_m + p.thread_n) // 4
    assert ".local" not in ptx
    # 64 input channels, a multiple of BK: k runs (kh, kw, ic), so the 20 elements a
    # thread stages per step share one split of k and one set of bounds clamps (before,
    # a split and clamps per element: 24 mul.hi and 40 min with 12 elements)
    assert ptx.count("mul.hi") <= 8 and ptx.count("min.") <= 8
    assert _ptxas_spills(artifact.ptx, "_implicit_gemm") in (0, None)


@pytest.mark.parametrize("m,k,n,tensor_cores", [(192, 48, 320, True), (256, 32, 384, True),
                                                 (200, 48, 320, False), (192, 40, 320, False)])
def test_f16_matmul_takes_the_tensor_cores_when_its_sizes_tile(m, k, n, tensor_cores):
    """sm_80: 64x64 tiles of C and k in steps of 16: wmma instructions; other sizes stay
    SIMT. (On sm_90a these take matmul_wgmma, partial tiles included: below.)"""
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda", target="sm_80",
                         require_device=False)
    artifact = prog.artifact(A=np.ones((m, k), np.float16), B=np.ones((k, n), np.float16))
    names = kernel_names(artifact)
    assert any(n.endswith("_matmul_tensor_core") for n in names) == tensor_cores, names
    assert ("wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32" in artifact.ptx) == tensor_cores
    if not tensor_cores:
        assert any(n.endswith("_matmul") for n in names), names


BIAS_PRODUCT = Path(__file__).parents[1] / "programs" / "matmul_bias.zyn"


@pytest.mark.parametrize("m,k,n,tiles,strategy", [
    (192, 48, 320, 2 * 3, "matmul_wgmma"), (200, 48, 320, 2 * 3, "matmul_wgmma"),
    (8192, 768, 50304, 64 * 197, "matmul_wgmma"), (201, 48, 320, None, "matmul")])
def test_wgmma_takes_partial_tiles_where_c_is_written(m, k, n, tiles, strategy):
    """sm_90a, C = A @ B + bias (the zero fill and the bias fused, C stored through
    TMA): sizes that are multiples of 8 but not of the tiles take matmul_wgmma with
    partial tiles (TMA reads zeros past the ends and drops stores there; the bias is
    read at columns clamped into C), as wide as gemm_waves ranks first: 128 for a small
    product (more blocks), 256 for 8192 x 768 x 50304 (197 tiles a row, the last half
    inside). Rows TMA cannot copy (M = 201) stay on the SIMT tiles, the fill and the
    bias kernels of their own."""
    prog = zynml.compile(BIAS_PRODUCT, device="cuda", require_device=False)
    artifact = prog.artifact(A=np.ones((m, k), np.float16), B=np.ones((k, n), np.float16),
                             bias=np.ones(n, np.float16))
    steps = list(launches(artifact.plan["body"]))
    assert strategy in [s["strategy"] for s in steps], [s["strategy"] for s in steps]
    if tiles is not None:
        assert len(steps) == 1 and steps[0]["grid"][0] == tiles


# the width from gemm_waves' model: a small product takes narrow tiles (more blocks),
# 4096 x 768 tiles 192 wide (128 tiles in one round; 256: 96, 128: 192 in two), a large
# product the widest
@pytest.mark.parametrize("m,k,n,tile_n,tiles", [(128, 64, 256, 128, 2), (256, 192, 384, 128, 6),
                                                 (4096, 64, 768, 192, 128),
                                                 (4096, 128, 4096, 256, 512)])
def test_f16_matmul_on_sm90a_takes_wgmma_with_tma(m, k, n, tile_n, tiles):
    """sm_90a: the copy engine fills a ring of shared-memory stages (the host makes a TMA
    descriptor of A and of B), and warpgroups multiply with wgmma m64 n{tile_n}. The
    kernel is persistent: the plan asks for one block per tile of C, capped at run time
    at one block per multiprocessor, each block looping over its tiles; its copying
    warpgroup hands registers to the two multiplying ones (setmaxnreg). C (zeros first:
    not read) is stored through shared memory by TMA, 64 x 64 boxes (a descriptor of C)."""
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda", require_device=False)
    artifact = prog.artifact(A=np.ones((m, k), np.float16), B=np.ones((k, n), np.float16))
    [matmul] = [s for s in launches(artifact.plan["body"]) if s["kernel"].endswith("_wgmma")]
    maps = [s for s in artifact.plan["body"] if s["op"] == "tensor_map"]
    [c] = [s["result"] for s in artifact.plan["body"] if s["op"] == "alloc"]
    assert [(s["source"], s["box"], s["swizzle"]) for s in maps] == \
        [("%in0", [128, 64], 128), ("%in1", [64, 64], 128), (c, [64, 64], 128)]
    assert matmul["args"][-3:] == [s["result"] for s in maps]
    assert matmul["arg_kinds"][-3:] == ["pointer", "pointer", "pointer"]
    assert artifact.ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == tile_n // 64
    assert "cp.async.bulk.wait_group.read" in artifact.ptx and "fence.proxy.async" in artifact.ptx
    assert matmul["block"] == [384, 1, 1]  # two multiplying warpgroups and a copying one
    assert matmul["grid"] == [tiles, 1, 1] and matmul["blocks_per_multiprocessor"] == 1
    assert matmul["shared_bytes"] > 48 * 1024
    assert f"wgmma.mma_async.sync.aligned.m64n{tile_n}k16.f32.f16.f16" in artifact.ptx
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", artifact.ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", artifact.ptx)
    assert "cp.async.bulk.tensor.2d" in artifact.ptx
    assert "wmma.mma" not in artifact.ptx
    # the epilogue writes pairs of f16 (no f32 tile) into shared memory, and TMA stores
    # them: no thread stores C itself
    assert "st.shared.b32" in artifact.ptx and "st.shared.b16" not in artifact.ptx
    assert "st.global" not in artifact.ptx


@pytest.mark.parametrize("warpgroups,registers", [(1, 232), (2, 232), (3, 152), (4, 104)])
def test_matmul_wgmma_multiplying_warpgroups_share_a_quarters_registers(warpgroups, registers):
    """An SM quarter holds a warp of each warpgroup, launched with the block's share of
    the SM's registers: the copier keeps 40 and each multiplying warpgroup takes its share
    of the rest, at most 232 (three taking 232 each, and four taking 112 of a 640-thread
    block launched with 96, waited for registers forever)."""
    from zynml.backend.cuda.strategies import hopper
    assert hopper.consumer_registers(warpgroups) == registers
    launched = hopper.launch_registers(128 * (warpgroups + 1))
    assert hopper.COPIER_REGISTERS + warpgroups * registers <= (warpgroups + 1) * launched
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda", require_device=False,
                         params={"matmul_wgmma": {"warpgroups": warpgroups, "stages": 3,
                                                  # 256 x 192 tiles' ring: over 227 KB
                                                  "tile_n": 128 if warpgroups == 4 else 192}})
    artifact = prog.artifact(A=np.ones((768, 128), np.float16),  # 12, 6, 4 or 3 tile rows
                             B=np.ones((128, 768), np.float16))
    [matmul] = [s for s in launches(artifact.plan["body"]) if s["kernel"].endswith("_wgmma")]
    assert matmul["block"] == [128 * (warpgroups + 1), 1, 1]
    assert re.search(rf"setmaxnreg\.inc\.sync\.aligned\.u32\s+{registers};", artifact.ptx)


def test_matmul_wgmma_tile_order_covers_every_tile_once():
    """The persistent schedule (block b takes tiles b, b + grid, ...; grouped raster
    order) visits each tile of C exactly once, for a last group with fewer tile rows
    too: the tile origins it computes, evaluated for every block and step."""
    from zynml.backend.cuda.strategies.matmul_wgmma import Params
    from zynml.backend.cuda.strategies.wgmma_tiles import tile_origins
    for tiles_m, tiles_n, p, sms, batches in [
            (32, 16, Params(), 132, 1), (3, 4, Params(group_m=2), 132, 1),
            (5, 7, Params(group_m=8), 4, 1), (9, 2, Params(group_m=4), 132, 1),
            (4, 4, Params(persistent=False), 132, 1), (3, 5, Params(group_m=2), 132, 7),
            (8, 1, Params(tile_n=64), 132, 192)]:
        m, n = tiles_m * p.tile_m, tiles_n * p.tile_n
        tiles = batches * p.tiles(m, n)
        grid = min(tiles, sms) if p.persistent else tiles
        seen = [origin for block in range(grid)
                for origin in tile_origins(p, m, n, block, grid, batches)]
        assert sorted(seen) == [(b, r * p.tile_m, c * p.tile_n) for b in range(batches)
                                for r in range(tiles_m) for c in range(tiles_n)]


def test_bf16_matmul_on_sm90a_takes_wgmma():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda", require_device=False)
    artifact = prog.artifact(A=np.ones((128, 64), ml_dtypes.bfloat16),
                             B=np.ones((64, 128), ml_dtypes.bfloat16))
    assert any(n.endswith("_matmul_wgmma") for n in kernel_names(artifact))
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in artifact.ptx


@pytest.mark.parametrize("target,strategy", [("sm_90", "matmul_tensor_core"),
                                             ("sm_80", "matmul_tensor_core")])
def test_f16_matmul_without_wgmma_keeps_wmma(target, strategy):
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda", target=target,
                         require_device=False)
    artifact = prog.artifact(A=np.ones((128, 64), np.float16), B=np.ones((64, 256), np.float16))
    assert any(n.endswith("_" + strategy) for n in kernel_names(artifact))
    assert "wgmma" not in artifact.ptx and "tensor_map" not in str(artifact.plan)


@pytest.mark.parametrize("shape,lanes", [((2, 3, 17, 5), 1), ((2, 3, 40, 64), 2),
                                         ((1, 2, 33, 128), 4)])
def test_attention_is_one_flash_kernel(shape, lanes):
    """The spec's attention in f64 (attention_simt_tiled takes f32): one `attention`
    launch, no S/M/L buffers; wide rows share lanes (their partial scores meet through
    shuffles)."""
    prog = zynml.compile(EXAMPLES / "attention.zyn", device="cuda", require_device=False)
    inputs = {n: np.ones(shape, np.float64) for n in "QKV"}
    artifact = prog.artifact(mask=np.ones(shape[2:3] * 2, bool), **inputs)
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_attention"), launch
    assert launch["block"] == [64 * lanes, 1, 1]
    assert not any(step["op"] == "alloc" and step["shape"] != list(shape)
                   for step in artifact.plan["body"])
    assert ("shfl.sync.bfly" in artifact.ptx) == (lanes > 1)


MMA_F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def attention_artifact(shape, dtype, target=None, e=None, source="attention.zyn"):
    """The attention example (or another of EXAMPLES) compiled for Q, K of `shape` and V
    of head dim `e` (default: Q's)."""
    prog = zynml.compile(EXAMPLES / source, device="cuda", target=target,
                         require_device=False)
    v_shape = shape[:-1] + (e or shape[-1],)
    inputs = dict(Q=np.ones(shape, dtype), K=np.ones(shape, dtype), V=np.ones(v_shape, dtype))
    if source == "attention.zyn":
        inputs["mask"] = np.ones(shape[2:3] * 2, bool)
    return prog.artifact(**inputs)


@pytest.mark.parametrize("shape,e", [((1, 1, 1, 16), None), ((2, 3, 17, 64), None),
                                     ((1, 2, 70, 128), None), ((2, 2, 33, 48), 80)])
def test_f16_attention_takes_the_tensor_cores(shape, e):
    """f16 attention with head dims that are multiples of 16 up to 128 on sm_90 (sm_90a's
    wgmma takes head dims 64 and 128): one attention_tensor_core launch per block_m query
    rows and head, S = Q K^T and P V on mma.sync m16n8k16 (f32 accumulators), K and V
    tiles by cp.async, their fragments by ldmatrix (transposed for V), row maxima and
    sums across each quad by shuffles."""
    from zynml.backend.cuda.strategies.attention_tensor_core import CONFIGS
    e = e or shape[3]
    params = next(p for bound, p in CONFIGS if max(shape[3], e) <= bound)
    artifact = attention_artifact(shape, np.float16, target="sm_90", e=e)
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_attention_tensor_core"), launch
    assert launch["block"] == [32 * params.warps, 1, 1]
    assert launch["grid"] == [-(-shape[2] // params.block_m), shape[0] * shape[1], 1]
    ptx = artifact.ptx
    for instruction in (MMA_F16, "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                        "cp.async.cg.shared.global", "cp.async.wait_group",
                        "shfl.sync.bfly", "ex2.approx"):
        assert instruction in ptx, instruction
    assert artifact.cubin[:4] == b"\x7fELF"  # ptxas accepted it
    if shape[2] >= params.block_n:  # (fewer keys: LLVM drops products of keys past the end)
        # per key tile: an mma per 16 rows, 16 keys and 8 of d (S) or of e (P V)
        assert ptx.count(MMA_F16) == \
            params.m_tiles * params.block_n // 16 * (shape[3] + e) // 8


@pytest.mark.parametrize("shape,dtype,target,strategy", [
    ((2, 3, 40, 64), np.float32, None, "attention_simt_tiled"),   # f32: SIMT, no TF32
    ((1, 2, 33, 40), np.float16, None, "attention_simt_tiled"),   # no multiple of 16
    ((1, 2, 33, 160), np.float16, None, "attention"),  # head dim over 128 (O in registers)
    ((1, 2, 33, 64), np.float16, "sm_75", "attention"),  # no mma.sync, no cp.async
])
def test_attention_without_tensor_cores(shape, dtype, target, strategy):
    artifact = attention_artifact(shape, dtype, target)
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_" + strategy), launch
    assert "mma.sync" not in artifact.ptx and "ldmatrix" not in artifact.ptx


@pytest.mark.parametrize("shape,e,dtype", [
    ((2, 3, 17, 5), None, np.float32),      # one key tile, d % 4 != 0: scalar copies
    ((1, 2, 131, 64), None, np.float32),    # 3 key tiles, the last partial: cp.async
    ((8, 12, 512, 64), None, np.float32),   # the benchmark's size
    ((2, 2, 33, 48), 80, np.float32),       # V wider than Q
    ((1, 2, 70, 128), None, np.float32),    # head dim 128: the second CONFIGS entry
    ((1, 2, 19, 6), None, "bfloat16"),      # widened by the threads' copies
])
def test_f32_attention_takes_the_simt_tiles(shape, e, dtype, tmp_path):
    """f32 attention (and f16 / bf16 the tensor cores do not take) up to head dim 128: one
    attention_simt_tiled launch per block_m query rows and head, S = Q K^T and P V as
    register-tiled SIMT products (4 values per shared read, fma.rn.f32: no TF32, no
    tensor cores), K and V tiles by cp.async where f32 rows are 16-byte aligned, row
    maxima across the row's lanes by shuffles, exp2; ptxas keeps it all in registers."""
    from zynml.backend.cuda.strategies.attention_simt_tiled import CONFIGS
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    e = e or shape[3]
    p = next(p for bound, p in CONFIGS if max(shape[3], e) <= bound)  # sm_90a: the first
    artifact = attention_artifact(shape, dtype, e=e)
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_attention_simt_tiled"), launch
    assert launch["block"] == [p.threads, 1, 1]
    assert launch["grid"] == [-(-shape[2] // p.block_m), shape[0] * shape[1], 1]
    assert launch["shared_bytes"] == p.shared_bytes(shape[3], e)
    ptx = artifact.ptx
    for instruction in ("fma.rn.f32", "ld.shared.v4", "shfl.sync.bfly", "ex2.approx",
                        "bar.sync"):
        assert instruction in ptx, instruction
    assert "mma" not in ptx and "tf32" not in ptx
    aligned = dtype == np.float32 and shape[3] % 4 == 0 and e % 4 == 0
    assert ("cp.async.cg.shared.global" in ptx) == aligned
    (tmp_path / "k.ptx").write_text(ptx)
    report = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(tmp_path / "k.ptx"), "-o",
                             str(tmp_path / "k.cubin")], capture_output=True, text=True,
                            check=True).stderr
    spilled = int(re.search(r"(\d+) bytes spill stores", report).group(1))
    assert spilled <= 16, report  # (ptxas caps some at 128 registers: a few words)


@pytest.mark.parametrize("shape,dtype", [((1, 2, 33, 40), np.float16),
                                         ((1, 2, 33, 40), "bfloat16")])
def test_simt_tiles_read_16_bit_rows_four_at_a_time(shape, dtype):
    """attention_simt_tiled's copies of 16-bit Q, K and V (row-major from the buffer's
    start, d % 4 == 0) are aligned 4-element loads: without the alignment LLVM split each
    into four 2-byte loads."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    ptx = attention_artifact(shape, dtype).ptx
    assert re.findall(r"ld\.global(?:\.nc)?\.v4\.b16", ptx)
    assert not re.findall(r"ld\.global(?:\.nc)?\.b16", ptx)


def test_attention_simt_tiled_declines_causal_groups():
    """A group carrying a `causal` field (not yet built) stays with another kernel."""
    from types import SimpleNamespace
    from zynml.backend.cuda.strategies import attention_simt_tiled
    assert not attention_simt_tiled.matches(SimpleNamespace(causal=True), CudaTarget())
    assert not attention_simt_tiled.matches(SimpleNamespace(causal=False), CudaTarget())


def test_f16_attention_on_sm_80_takes_the_tensor_cores():
    artifact = attention_artifact((1, 2, 33, 64), np.float16, "sm_80")
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_attention_tensor_core")
    assert MMA_F16 in artifact.ptx and artifact.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("shape,dtype,target,kernel", [
    ((1, 1, 33, 5), np.float32, None, "_attention"),  # one row: attention_decode's
    ((2, 3, 17, 5), np.float32, None, "_attention"),
    ((1, 2, 131, 64), np.float16, "sm_90", "_attention_tensor_core"),
    ((2, 2, 70, 128), np.float16, "sm_90", "_attention_tensor_core"),
    ((1, 2, 131, 64), np.float16, None, "_attention_wgmma"),
    ((2, 2, 70, 128), "bfloat16", None, "_attention_wgmma"),
    ((1, 2, 70, 48), np.float16, None, "_attention_tensor_core"),  # head dim not 64 / 128
    ((1, 2, 33, 40), np.float16, None, "_attention"),  # head dim no multiple of 16
])
def test_causal_attention_takes_the_attention_kernels(shape, dtype, target, kernel):
    """`if j <= i` (causal_attention.zyn) is raised to causal attention: one launch of
    the kernel that the same shapes take without it (which skips the key tiles above
    the diagonal: lit_tests/passes/linalg-to-gpu-kernels.mlir shows the loop bound)."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    artifact = attention_artifact(shape, dtype, target=target, source="causal_attention.zyn")
    [launch] = launches(artifact.plan["body"])
    assert re.fullmatch(r"k\d+" + kernel, launch["kernel"]), launch
    assert ("mma.sync" in artifact.ptx) == (kernel == "_attention_tensor_core")
    assert ("wgmma.mma_async" in artifact.ptx) == (kernel == "_attention_wgmma")
    assert not any(step["op"] == "alloc" and step["shape"] != list(shape)
                   for step in artifact.plan["body"])  # no S, M, L buffers
    assert artifact.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("target,strategy", [("sm_90", "attention_tensor_core"),
                                             ("sm_90a", "attention_wgmma")])
def test_f16_flash_attention_fits_in_registers(d, target, strategy, tmp_path):
    """The spec's tile-form flash attention at the benchmark's sizes: tensor cores, no
    key bounds or mask (4096 keys, whole tiles), and ptxas keeps every fragment in
    registers (no local memory)."""
    artifact = attention_artifact((1, 16, 4096, d), np.float16, target=target,
                                  source="flash_attention.zyn")
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_" + strategy)
    assert "ld.global.v2.u8" not in artifact.ptx and "ld.global.u8" not in artifact.ptx
    ptx = tmp_path / "k.ptx"
    ptx.write_text(artifact.ptx)
    report = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(ptx), "-o",
                             str(tmp_path / "k.cubin")], capture_output=True, text=True,
                            check=True).stderr
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report
    registers = int(re.search(r"Used (\d+) registers", report).group(1))
    assert registers <= 255


@pytest.mark.parametrize("shape,dtype", [((1, 2, 131, 128), np.float16),
                                         ((2, 3, 17, 64), np.float16),
                                         ((1, 1, 300, 128), "bfloat16")])
def test_unmasked_attention_on_sm90a_takes_wgmma_with_tma(shape, dtype):
    """sm_90a, no mask, head dims 64 / 128: the copy engine fills Q's tile and a ring of
    K / V tiles (the host makes a TMA descriptor of each, with the tensors' leading unit
    dims), two warpgroups compute S = Q K^T (A and B from shared memory) and O += P V
    (P from registers, V transposed) with wgmma, and a copying warpgroup gives its
    registers to them (setmaxnreg)."""
    import ml_dtypes
    from zynml.backend.cuda.strategies.attention_wgmma import params_for
    dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    element = "bf16" if dtype.itemsize == 2 and dtype != np.float16 else "f16"
    prog = zynml.compile(EXAMPLES.parent / "attention_no_mask.zyn", device="cuda",
                         require_device=False)
    artifact = prog.artifact(**{name: np.ones(shape, dtype) for name in "QKV"})
    p = params_for(shape[3], shape[3], CudaTarget().max_shared_per_block)
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_attention_wgmma"), launch
    maps = [s for s in artifact.plan["body"] if s["op"] == "tensor_map"]
    assert [(s["source"], s["box"], s["swizzle"]) for s in maps] == [
        ("%in0", [1, 1, p.block_m, 64], 128), ("%in1", [1, 1, p.block_n, 64], 128),
        ("%in2", [1, 1, p.block_n, 64], 128)]
    assert launch["args"][1:] == [s["result"] for s in maps]
    assert launch["block"] == [384, 1, 1]
    # one block per (row block, slice), at most one per multiprocessor at run time:
    # each loops over its share
    assert launch["grid"] == [-(-shape[2] // p.block_m) * shape[0] * shape[1], 1, 1]
    assert launch["blocks_per_multiprocessor"] == 1 and p.persistent
    assert launch["shared_bytes"] > 48 * 1024
    d = shape[3]
    ptx = artifact.ptx
    scores = f"wgmma.mma_async.sync.aligned.m64n{p.block_n}k16.f32.{element}.{element}"
    values = f"wgmma.mma_async.sync.aligned.m64n{d}k16.f32.{element}.{element}"
    # per key tile: S over d / 16 k-steps (descriptors), P V over block_n / 16 (registers);
    # overlapped, tile 0's S comes before the loop and the last P V after it
    assert ptx.count(scores) + (ptx.count(values) if values != scores else 0) == \
        (d // 16 + p.block_n // 16) * (2 if p.overlap else 1)
    assert re.search(values.replace(".", r"\.") + r"\s*\{[^}]*\},\s*\{", ptx)  # A: regs
    assert "cp.async.bulk.tensor.4d" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32" in ptx and "setmaxnreg.inc.sync.aligned.u32" in ptx
    assert artifact.cubin[:4] == b"\x7fELF"


def ptxas_report(ptx: str, tmp_path) -> str:
    (tmp_path / "k.ptx").write_text(ptx)
    return subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(tmp_path / "k.ptx"), "-o",
                           str(tmp_path / "k.cubin")], capture_output=True, text=True,
                          check=True).stderr


@pytest.mark.parametrize("shape,dtype", [((1, 2, 131, 128), np.float16),
                                         ((1, 1, 300, 64), "bfloat16"),
                                         ((8, 12, 512, 64), np.float16),
                                         ((1, 2, 400, 128), np.float16)])
def test_masked_attention_on_sm90a_takes_wgmma(shape, dtype, tmp_path):
    """A bool mask (attention.zyn's [seq, seq]) keeps attention_wgmma: the kernel takes
    the mask's bytes as its second argument (before the three TMA descriptors). Rows of
    a multiple of 16 keys are staged: two warps of the copying warpgroup copy each key
    tile's mask bytes into shared memory by cp.async (16 bytes each, a mask ring next to
    the K/V ring: at head dim 128 two stages, one product after the other, to fit), and
    the warpgroups read their accumulators' bytes from there, one 2-byte load per row
    and 8 keys. Other rows are read from global memory: 2-byte loads where their length
    is even, byte loads where odd. No spills."""
    import ml_dtypes
    from zynml.backend.cuda.strategies.attention_wgmma import params_for
    dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    element = "f16" if dtype == np.float16 else "bf16"
    d, keys = shape[3], shape[2]
    staged = keys % 16 == 0
    p = params_for(d, d, CudaTarget().max_shared_per_block, staged)
    artifact = attention_artifact(shape, dtype)
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_attention_wgmma"), launch
    assert launch["arg_kinds"] == ["memref:4", "memref:2", "pointer", "pointer", "pointer"]
    assert launch["args"][1] == "%in3"  # the mask, as its bytes
    assert launch["block"] == [384, 1, 1]
    assert launch["grid"] == [-(-shape[2] // p.block_m) * shape[0] * shape[1], 1, 1]
    assert launch["blocks_per_multiprocessor"] == 1
    assert launch["shared_bytes"] == p.shared_bytes(d, d, staged) <= 227 * 1024
    assert (p.stages, p.overlap) == ((2, False) if staged and d == 128 else
                                     (3, d == 128 or staged))
    ptx = artifact.ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{p.block_n}k16.f32.{element}.{element}" in ptx
    pairs, single = ptx.count("ld.global.v2.b8"), ptx.count("ld.global.b8")
    from_shared = ptx.count("ld.shared.v2.b8")
    # per key tile: block_n / 8 groups of keys for each of a thread's two rows
    per_tile = 2 * p.block_n // 8
    if staged:
        assert pairs == single == 0 and from_shared in (per_tile, 2 * per_tile)
        assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group" in ptx
    elif keys % 2 == 0:
        assert single == from_shared == 0 and pairs in (per_tile, 2 * per_tile)
    else:
        assert pairs == from_shared == 0 and single >= 2 * per_tile, (pairs, single)
    report = ptxas_report(ptx, tmp_path)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report


@pytest.mark.parametrize("shape,offset", [((1, 2, 131, 64), 0), ((1, 16, 4096, 128), 0),
                                          ((1, 2, 300, 128), 16), ((1, 2, 200, 64), -70)])
def test_causal_attention_on_sm90a_takes_wgmma(shape, offset, tmp_path):
    """Causal f16 attention (`j <= i + offset`) on attention_wgmma: no mask argument and
    no mask loads; the copier's and the warpgroups' key loops end
    at the block's last row + offset (one loop bound, so every slot filled is consumed),
    and only tiles on the diagonal compare keys with rows. No spills."""
    source = conftest.conditioned_attention(f"j <= i + {offset}" if offset else "j <= i")
    prog = zynml.compile(source, device="cuda", require_device=False)
    artifact = prog.artifact(**{n: np.ones(shape, np.float16) for n in "QKV"})
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_attention_wgmma"), launch
    assert launch["arg_kinds"] == ["memref:4", "pointer", "pointer", "pointer"]
    ptx = artifact.ptx
    assert "ld.global" not in ptx
    assert "wgmma.mma_async.sync.aligned" in ptx and "cp.async.bulk.tensor.4d" in ptx
    report = ptxas_report(ptx, tmp_path)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report


def test_small_matmul_is_pointwise():
    _, artifact = compiled("matmul")  # 17x31x13
    names = kernel_names(artifact)
    assert names and all(n.endswith("_pointwise") for n in names), names


# Convolutions (conv2d.zyn: stride 1, padding 1; conv2d_stride2_pad0.zyn) run as an
# implicit GEMM: C[oc, (b, oh, ow)] over k = (ic, kh, kw), the gathers staged in shared
# memory (zynml/backend/cuda/strategies/implicit_gemm.py).
@pytest.mark.parametrize("source,image,out_hw", [("conv2d", (20, 17), (20, 17)),
                                                 ("conv2d_stride2_pad0", (20, 17), (9, 8))])
def test_convolutions_take_implicit_gemm(source, image, out_hw):
    from zynml.backend.cuda.strategies import implicit_gemm
    (h, w), (oh, ow) = image, out_hw
    prog = zynml.compile(EXAMPLES / f"{source}.zyn", device="cuda", require_device=False)
    artifact = prog.artifact(input=f32(2, 3, h, w), kernel=f32(16, 3, 3, 3), bias=f32(16),
                             in_h=h, in_w=w, out_h=oh, out_w=ow)
    steps = list(launches(artifact.plan["body"]))
    assert [s["kernel"].split("_", 1)[1] for s in steps] == ["pointwise", "implicit_gemm"]
    conv = steps[1]
    assert {"%in0", "%in1"} <= set(conv["args"])  # input and kernel, read in the kernel
    tiles = implicit_gemm.by_cost(16, 2 * oh * ow)[0]  # C: 16 channels by b * oh * ow
    assert conv["grid"] == [-(-2 * oh * ow // tiles.tile_n), 1, 1]
    assert conv["block"] == [256, 1, 1]
    assert ".shared" in artifact.ptx and "fma.rn.f32" in artifact.ptx
    assert artifact.cubin[:4] == b"\x7fELF"  # ptxas accepted it
    assert artifact.plan["outputs"][0]["shape"] == [2, 16, oh, ow]


def test_small_and_depthwise_convolutions_and_plain_products_are_not_implicit_gemm():
    """Below 1024 points of C a convolution stays with the other strategies; a depthwise
    one (its channel on both sides) is no matrix product; plain products follow matmul's
    sizes, never implicit_gemm."""
    _, small = compiled("conv2d")  # 4 output channels by 2 * 7 * 5 points
    depthwise = zynml.compile(EXAMPLES / "conv2d_depthwise.zyn", device="cuda",
                              require_device=False)
    wide = depthwise.artifact(input=f32(2, 64, 30, 30), kernel=f32(64, 3, 3), out_h=28,
                              out_w=28)
    plain = compiled_source(EXAMPLES / "matmul.zyn", A=(40, 40), B=(40, 40))
    for artifact in (small, wide, plain):
        names = kernel_names(artifact)
        assert names and not any(n.endswith("_implicit_gemm") for n in names), names


ROW_MAX = """
let row_max = compute(x) {
    @kernel reduce(max, axis=1)
    for i in 0..rows, j in 0..cols:
        yield x[i, j]
}
"""


@pytest.mark.parametrize("source", ["row max", "softmax"])
def test_wide_rows_use_a_block_per_row(source):
    """37 rows of 1000: a row strategy (row_reduce, or row_fused where the row's init
    and the maps that use it fuse with it), a block of threads per row."""
    artifact = compiled_source(ROW_MAX if source == "row max" else SOFTMAX, x=(37, 1000))
    names = kernel_names(artifact)
    rows = [s for s in launches(artifact.plan["body"])
            if re.fullmatch(r"k\d+_row_(reduce|fused)", s["kernel"])]
    assert rows, names
    for step in rows:
        assert step["grid"][0] * step["grid"][1] * step["grid"][2] == 37
        assert step["block"][0] * step["block"][1] * step["block"][2] >= 32
        assert "%in0" in step["args"]


@pytest.mark.parametrize("source", ["row max", "softmax"])
def test_small_rows_are_pointwise_only(source):
    artifact = compiled_source(ROW_MAX if source == "row max" else SOFTMAX, x=(7, 13))
    names = kernel_names(artifact)
    assert names and all(n.endswith("_pointwise") for n in names), names


# Softmax as a user writes it first (also benchmarked): the exp values are a
# temporary of the pipeline, not an output.
SOFTMAX_PIPELINE = (ROOT / "tests" / "programs" / "softmax_pipeline.zyn").read_text()


def row_fused_ptx(artifact):
    """The PTX of the one row_fused kernel of `artifact`, from its .entry to the next."""
    names = [n for n in kernel_names(artifact) if n.endswith("_row_fused")]
    assert len(names) == 1, kernel_names(artifact)
    start = artifact.ptx.index(f".entry {names[0]}(")
    end = artifact.ptx.find(".entry", start + 1)
    return artifact.ptx[start:end if end > 0 else None]


def backward_branches(ptx):
    """Branches to a label above them: the loops of a kernel."""
    seen, count = set(), 0
    for line in ptx.splitlines():
        label = re.match(r"\s*(\$\w+):", line)
        if label:
            seen.add(label.group(1))
        target = re.search(r"\bbra(?:\.uni)?\s+(\$\w+);", line)
        count += bool(target and target.group(1) in seen)
    return count


def count(ptx, pattern):
    return len(re.findall(pattern, ptx))


V4_LOAD, V4_STORE = r"\bld\.global(?:\.\w+)*\.v4\.[bf]32\b", r"\bst\.global(?:\.\w+)*\.v4\.[bf]32\b"


@pytest.mark.parametrize("source,shape,loads,stores", [
    ("softmax", (64, 2048), 2, 2),        # x; probs (the exp values stay in registers)
    ("layer_norm", (64, 4096), 12, 4),    # x, gamma, beta: 4 chunks of 4 each; y
    ("residual", (64, 4096), 16, 4),      # x, projected, weight, bias; normed
    ("bias_residual", (64, 4096), 20, 4),  # x, bias, residual, weight, bias; normed
])
def test_fused_rows_are_read_and_written_once_16_bytes_at_a_time(source, shape, loads, stores):
    """row_fused keeps a row's values in registers (a thread per 4 columns, 256 threads):
    no loop, each input chunk loaded by one 16-byte load where the buffer is aligned (the
    other branch loads the same columns one by one), each output chunk stored once; ptxas
    takes it without spilling."""
    rows, cols = shape
    if source == "softmax":
        prog = zynml.compile(SOFTMAX_PIPELINE, device="cuda", require_device=False)
        artifact = prog.softmax._program.artifact(x=f32(rows, cols))
    elif source == "layer_norm":
        prog = zynml.compile(EXAMPLES / "layer_norm.zyn", device="cuda", require_device=False)
        artifact = prog.artifact(x=f32(rows, cols), gamma=f32(cols), beta=f32(cols), eps=1e-5)
    elif source == "residual":
        artifact = compiled_source(EXAMPLES / "transformer_residual_layernorm.zyn",
                                   x=(1, rows, cols), projected=(1, rows, cols),
                                   ln_weight=(cols,), ln_bias=(cols,))
    else:
        artifact = bias_residual_layer_norm(rows, cols)
    ptx = row_fused_ptx(artifact)
    assert ".maxntid 256, 1, 1" in ptx
    assert backward_branches(ptx) == 0
    assert (count(ptx, V4_LOAD), count(ptx, V4_STORE)) == (loads, stores)
    assert ".local" not in ptx
    assert artifact.cubin[:4] == b"\x7fELF"


TRANSPOSE_SCALE = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n, j in 0..m:
        out[i, j] = x[j, i] * 2.0
}
"""


@pytest.mark.parametrize("program,shapes,loads,stores,threads", [
    ("gelu", {"x": (1 << 20,)}, 1, 1, 512),             # one chunk of 4 a thread
    ("gelu", {"x": (4100,)}, 1, 1, 512),                # one chunk a thread
    ("bias_gelu", {"x": (1, 64, 4096), "bias": (4096,)}, 2, 1, 512),  # x and bias; y
    ("gelu", {"x": (4097,)}, 0, 0, 256),                # no multiple of 4: scalar kernel
    ("gelu", {"x": (3,)}, 0, 0, 256),
    ("transpose", {"x": (12, 8)}, 0, 0, 256),           # x read along its rows: scalar
])
def test_elementwise_moves_16_bytes_per_access(program, shapes, loads, stores, threads):
    """pointwise's vector path: a thread loads each operand read along the last loop 16
    bytes at a time where every buffer is aligned (the other branch reads the same points
    one by one) and stores 16 bytes at a time; sizes that are no multiple of 4 and operands
    read across the last loop take the scalar kernels."""
    if program == "transpose":
        artifact = zynml.compile(TRANSPOSE_SCALE, device="cuda", require_device=False) \
            .artifact(x=f32(*shapes["x"]))
    else:
        path = EXAMPLES / "gelu.zyn" if program == "gelu" else PROGRAMS / "bias_gelu.zyn"
        artifact = compiled_source(path, **shapes)
    assert kernel_names(artifact) == ["k0_pointwise"]
    ptx = artifact.ptx
    assert f".maxntid {threads}, 1, 1" in ptx
    assert (count(ptx, V4_LOAD), count(ptx, V4_STORE)) == (loads, stores)
    assert ".local" not in ptx
    assert artifact.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("program,shapes,chunks", [
    ("gelu", {"x": (4 * 600011,)}, 600011),
    ("bias_gelu", {"x": (1, 37, 65540), "bias": (65540,)}, 37 * 65540 // 4),
])
def test_grid_stride_elementwise_gets_a_grid_per_multiprocessor(monkeypatch, program, shapes,
                                                                 chunks):
    """pointwise with `blocks_per_multiprocessor`: a large vector-path kernel loops over its
    chunks with the grid's size read at run time (%nctaid), and its launch step asks the
    run time to cap the grid at that many blocks per multiprocessor. (Shapes of their
    own: the artifact cache's key does not include the strategies' Params.)"""
    from zynml.backend.cuda.strategies import pointwise
    monkeypatch.setattr(pointwise, "DEFAULT_PARAMS", pointwise.Params(
        vectors=2, vector_block=512, blocks_per_multiprocessor=4))
    path = EXAMPLES / "gelu.zyn" if program == "gelu" else PROGRAMS / "bias_gelu.zyn"
    prog = zynml.compile(path, device="cuda", require_device=False)
    artifact = prog.artifact(**{name: f32(*shape) for name, shape in shapes.items()})
    [step] = [s for s in artifact.plan["body"] if s["op"] == "launch"]
    assert step["kernel"] == "k0_pointwise" and step["blocks_per_multiprocessor"] == 4
    assert step["grid"] == [-(-chunks // (2 * 512)), 1, 1] and step["block"] == [512, 1, 1]
    ptx = artifact.ptx
    assert "%nctaid.x" in ptx
    assert (count(ptx, V4_LOAD), count(ptx, V4_STORE)) == (2 if program == "gelu" else 4, 2)
    assert ".local" not in ptx


def bias_residual_layer_norm(rows, cols):
    return compiled_source(PROGRAMS / "bias_residual_layernorm.zyn", x=(1, rows, cols),
                           bias=(cols,), residual=(1, rows, cols), ln_weight=(cols,),
                           ln_bias=(cols,))


def steps(body):
    """Every step of a launch plan's body, loop bodies included, in order."""
    for step in body:
        yield step
        if step["op"] == "for":
            yield from steps(step["body"])


@pytest.mark.parametrize("chain,strategy", [
    ("layer_norm", "row_fused"), ("residual", "row_fused"), ("bias_residual", "row_fused"),
    ("bias_gelu", "pointwise"),
])
def test_fused_chains_are_one_kernel(chain, strategy):
    """A layer norm, with the residual and BERT's FFN bias added before it, is one
    row_fused kernel: the sum and the sum of squares start from fills of their own
    (split-shared-fills), which the kernel does as the row's init, so no fill kernel runs
    and nothing is copied before it. The FFN's bias + GELU is one pointwise kernel. Rows of
    4096 and of 4099 (no 16-byte loads, the last chunk guarded)."""
    for rows, cols in ((64, 4096), (333, 4099)):
        if chain == "layer_norm":
            prog = zynml.compile(EXAMPLES / "layer_norm.zyn", device="cuda",
                                 require_device=False)
            artifact = prog.artifact(x=f32(rows, cols), gamma=f32(cols), beta=f32(cols),
                                     eps=1e-5)
        elif chain == "residual":
            artifact = compiled_source(EXAMPLES / "transformer_residual_layernorm.zyn",
                                       x=(1, rows, cols), projected=(1, rows, cols),
                                       ln_weight=(cols,), ln_bias=(cols,))
        elif chain == "bias_residual":
            artifact = bias_residual_layer_norm(rows, cols)
        else:
            artifact = compiled_source(PROGRAMS / "bias_gelu.zyn", x=(1, rows, cols),
                                       bias=(cols,))
        body = list(steps(artifact.plan["body"]))
        assert [s["kernel"] for s in body if s["op"] == "launch"] == [f"k0_{strategy}"]
        assert not [s for s in body if s["op"] in ("copy", "for")], body


def test_fused_rows_no_multiple_of_4_load_each_column_once():
    """Rows of 4099: a column at a time, 17 per thread of 256 (the last chunk guarded): 17
    loads of x and the 4 row values (max and sum, read by thread 0 and by all), no loop."""
    prog = zynml.compile(SOFTMAX_PIPELINE, device="cuda", require_device=False)
    ptx = row_fused_ptx(prog.softmax._program.artifact(x=f32(3, 4099)))
    assert backward_branches(ptx) == 0
    assert count(ptx, V4_LOAD) == 0
    assert count(ptx, r"\bld\.global\.") <= 17 + 4
    assert count(ptx, r"\bst\.global\.") <= 17 + 4  # probs, and max and sum (init, total)


def test_rows_too_long_for_registers_loop_through_memory():
    prog = zynml.compile(SOFTMAX_PIPELINE, device="cuda", require_device=False)
    ptx = row_fused_ptx(prog.softmax._program.artifact(x=f32(2, 65536)))
    assert backward_branches(ptx) >= 4 and count(ptx, V4_LOAD) == 0


# ============================================================================ other chips

def test_compile_for_sm_80():
    artifact = compiled_source(SOFTMAX, target="sm_80", x=(7, 13))
    assert re.search(r"^\.target sm_80$", artifact.ptx, re.M)
    assert re.search(r"^\.version 7\.0$", artifact.ptx, re.M)
    assert artifact.chip == "sm_80"
    assert artifact.cubin[:4] == b"\x7fELF"
    default = compiled_source(SOFTMAX, x=(7, 13))
    assert default.cubin != artifact.cubin  # not the sm_90a binary from the cache
    assert kernel_names(default) == kernel_names(artifact)


def test_image_is_the_cubin_only_for_its_own_gpu():
    _, artifact = compiled("gelu")
    assert artifact.image((9, 0)) == artifact.cubin
    assert artifact.image((8, 0)) == artifact.ptx.encode()
    assert artifact.image(None) == artifact.ptx.encode()
    sm80 = compiled_source(SOFTMAX, target="sm_80", x=(7, 13))
    assert sm80.image((8, 0)) == sm80.cubin
    assert sm80.image((9, 0)) == sm80.ptx.encode()


# ============================================================================ artifact files

def assert_same_artifact(a, b):
    assert a.plan == b.plan
    assert a.ptx == b.ptx
    assert a.chip == b.chip
    assert a.cubin == b.cubin
    assert a.zynml_version == b.zynml_version
    assert sorted(a.globals) == sorted(b.globals)
    for name in a.globals:
        assert a.globals[name].dtype == b.globals[name].dtype
        np.testing.assert_array_equal(a.globals[name], b.globals[name])


def test_artifact_bytes_round_trip():
    _, artifact = compiled("layer_norm")
    data = artifact.to_bytes()
    assert data[:2] == b"PK"  # a zip archive
    back = CudaArtifact.from_bytes(data)
    assert_same_artifact(artifact, back)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert manifest["format"] == FORMAT == "zynml-cuda-artifact"
        assert manifest["version"] == VERSION
        assert manifest["chip"] == "sm_90a"
        assert archive.read("kernels.cubin") == artifact.cubin


def test_artifact_save_and_load(tmp_path):
    _, artifact = compiled("attention")
    path = tmp_path / "sub" / "attention.zynart"
    path.parent.mkdir()
    artifact.save(path)
    assert path.stat().st_size > 0
    assert_same_artifact(artifact, CudaArtifact.load(path))
    assert_same_artifact(artifact, CudaArtifact.load(str(path)))
    assert list(path.parent.iterdir()) == [path]  # no temporary left behind


def test_artifact_without_cubin_round_trips():
    _, artifact = compiled("gelu")
    ptx_only = CudaArtifact(artifact.plan, artifact.ptx, artifact.chip, None, {}, "x")
    back = CudaArtifact.from_bytes(ptx_only.to_bytes())
    assert back.cubin is None
    assert_same_artifact(ptx_only, back)
    assert back.image((9, 0)) == artifact.ptx.encode()


def constant_tensor_artifact():
    """A hand-written linalg module with a non-splat constant: x * [1.5, -2, ...]."""
    from mlir import ir
    from zynml.dialects import new_context
    text = """
#map = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<5xf32>) -> tensor<5xf32> {
  %c = arith.constant dense<[1.5, -2.0, 3.25, 4.0, 0.5]> : tensor<5xf32>
  %e = tensor.empty() : tensor<5xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%x, %c : tensor<5xf32>, tensor<5xf32>) outs(%e : tensor<5xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<5xf32>
  return %r : tensor<5xf32>
}
"""
    with new_context() as ctx, ir.Location.unknown(ctx):
        return linalg_to(ir.Module.parse(text), "artifact", CudaTarget())


def test_constant_tensors_become_globals_and_round_trip(tmp_path):
    artifact = constant_tensor_artifact()
    plan = artifact.plan
    assert plan["globals"] == [{"name": "g0", "shape": [5], "dtype": "float32"}]
    assert any(s["op"] == "global" and s["name"] == "g0" for s in plan["body"])
    assert artifact.globals["g0"].dtype == np.float32
    np.testing.assert_array_equal(artifact.globals["g0"], [1.5, -2.0, 3.25, 4.0, 0.5])
    launch = next(launches(plan["body"]))
    assert entries(artifact.ptx)[launch["kernel"]] == 15  # three 1-d descriptors
    back = CudaArtifact.from_bytes(artifact.to_bytes())
    assert_same_artifact(artifact, back)
    artifact.save(tmp_path / "c.zynart")
    assert_same_artifact(artifact, CudaArtifact.load(tmp_path / "c.zynart"))


def linalg_to(module, stage, target):
    """What the native stages make of a linalg module, up to `stage`."""
    return compiler.run_stages(compiler.Compilation(NATIVE, target), stage,
                               given={"linalg": module})


def test_native_stages_from_linalg_agree():
    """The stages run by hand from a linalg module: the plan launches the PTX's kernels."""
    from mlir import ir
    prog = zynml.compile(EXAMPLES / "broadcast.zyn", device="cuda", require_device=False)
    module = prog.stage_module({"matrix": f32(7, 13), "vector": f32(13)})
    assert isinstance(module, ir.Module)
    artifact = linalg_to(module, "artifact", CudaTarget("sm_80"))
    assert artifact.chip == "sm_80"
    assert ".target sm_80" in artifact.ptx
    assert set(entries(artifact.ptx)) == {s["kernel"] for s in launches(artifact.plan["body"])}
    assert artifact.plan["inputs"] == [{"kind": "tensor", "shape": [7, 13], "dtype": "float32"},
                                       {"kind": "tensor", "shape": [13], "dtype": "float32"}]


def _zip(files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _manifest(**changes):
    manifest = {"format": FORMAT, "version": VERSION, "chip": "sm_90a", "zynml": "0.1.0",
                "plan": {"globals": [], "body": [], "inputs": [], "outputs": []}}
    manifest.update(changes)
    return json.dumps(manifest)


def test_corrupted_bytes_are_an_artifact_error():
    _, artifact = compiled("gelu")
    data = artifact.to_bytes()
    for bad in (b"", b"not a zip", data[: len(data) // 2], b"\0" * 100):
        with pytest.raises(ArtifactError, match="x.zynart: not a readable ZynML CUDA artifact"):
            CudaArtifact.from_bytes(bad, "x.zynart")


def test_wrong_format_is_an_artifact_error():
    data = _zip({"manifest.json": _manifest(format="something-else"), "kernels.ptx": "//"})
    with pytest.raises(ArtifactError) as err:
        CudaArtifact.from_bytes(data, "other.zip")
    assert str(err.value) == "other.zip: not a ZynML CUDA artifact"


def test_wrong_version_is_an_artifact_error():
    data = _zip({"manifest.json": _manifest(version=VERSION + 1), "kernels.ptx": "//"})
    with pytest.raises(ArtifactError) as err:
        CudaArtifact.from_bytes(data, "new.zynart")
    assert str(err.value) == (f"new.zynart: artifact version {VERSION + 1}, "
                              f"this ZynML reads version {VERSION}")


@pytest.mark.parametrize("files,why", [
    ({"kernels.ptx": "//"}, "manifest.json"),                         # no manifest
    ({"manifest.json": "{not json", "kernels.ptx": "//"}, "Expecting"),  # bad JSON
    ({"manifest.json": _manifest()}, "kernels.ptx"),                  # no kernels
    ({"manifest.json": _manifest(plan={"globals": [{"name": "g0"}]}), "kernels.ptx": "//"},
     "g0.npy"),                                                       # a global missing
])
def test_incomplete_archives_are_artifact_errors(files, why):
    with pytest.raises(ArtifactError) as err:
        CudaArtifact.from_bytes(_zip(files), "bad.zynart")
    message = str(err.value)
    assert message.startswith("bad.zynart: not a readable ZynML CUDA artifact (")
    assert why in message


def test_load_of_a_missing_file_is_an_artifact_error(tmp_path):
    path = tmp_path / "absent.zynart"
    with pytest.raises(ArtifactError, match="cannot read '.*absent.zynart'"):
        CudaArtifact.load(path)
    path.write_bytes(b"garbage")
    with pytest.raises(ArtifactError, match="absent.zynart: not a readable"):
        CudaArtifact.load(path)


def test_artifact_error_is_a_value_error():
    assert issubclass(ArtifactError, ValueError)


@pytest.mark.parametrize("annotation,target,where,message", [
    ("@workgroup(64, 32)", None, "3:5", "@workgroup asks for 2048 threads per block"),
    ("@shared(200 * 1024)", "sm_80", "3:5", "@shared asks for 204800 bytes; a block on sm_80 has at most 166912"),
])
def test_launch_annotations_are_checked_against_the_target(annotation, target, where, message):
    source = ("let y = compute(x) {\n    @kernel elementwise\n    " + annotation +
              "\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\n")
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(source, device="cuda", target=target, require_device=False)
    assert f"<string>:{where}: error: {message}" in str(err.value)
    # the same program is fine where the limit allows it
    zynml.compile(source, device="cuda", target="sm_90a", require_device=False) \
        if target else zynml.compile(source, device="cpu")


# ============================================================================ bf16
# bf16 programs compile to PTX (sm_90a has bf16 add/mul/fma; LLVM widens elsewhere); a
# bf16 matmul takes the SIMT `matmul` strategy (f32 accumulation), never wmma.

BF16 = np.dtype(ml_dtypes.bfloat16)


def bf16(*shape):
    return _RNG.standard_normal(shape).astype(BF16)


BF16_CASES = {  # name -> (example, inputs, {output: dtype}, strategy of the last kernel)
    "elementwise": ("elementwise_relu", lambda: dict(x=bf16(37)), {"y": "bfloat16"},
                    "pointwise"),
    "reduce": ("reduce_sum", lambda: dict(data=bf16(1009)), {"sum": "bfloat16"},
               "pointwise"),
    "argmax": ("argmax", lambda: dict(data=bf16(31)), {"max_idx": "int64"}, "pointwise"),
    "matmul": ("matmul", lambda: dict(A=bf16(300, 200), B=bf16(200, 129)), {"C": "bfloat16"},
               "matmul"),
    "layer_norm": ("layer_norm", lambda: dict(x=bf16(5, 13), gamma=bf16(13), beta=bf16(13),
                                              eps=BF16.type(1e-5)),
                   {"normalized": "bfloat16"}, "pointwise"),
}


@pytest.mark.parametrize("case", sorted(BF16_CASES))
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_bf16_programs_compile_to_ptx_and_cubin(case, target):
    example, make_inputs, outputs, strategy = BF16_CASES[case]
    prog = zynml.compile(EXAMPLES / f"{example}.zyn", device="cuda", target=target,
                         require_device=False)
    artifact = prog.artifact(**make_inputs())
    assert re.search(rf"^\.target {target}\b", artifact.ptx, re.M)
    assert artifact.cubin[:4] == b"\x7fELF"  # ptxas took it
    assert [i["dtype"] for i in artifact.plan["inputs"] if i["kind"] == "tensor"][0] == \
        "bfloat16"
    assert {n: o["dtype"] for n, o in zip(artifact.plan["output_names"],
                                          artifact.plan["outputs"])} == outputs
    if target == "sm_90a":
        assert ".bf16" in artifact.ptx  # bf16 instructions (sm_80 may shift bits instead)
    assert kernel_names(artifact)[-1].endswith("_" + strategy)


def test_bf16_arithmetic_is_native_on_sm_90a():
    source = ("let y = compute(x, w) {\n    @kernel elementwise\n    for i in 0..n:\n"
              "        out[i] = x[i] * w[i] + x[i]\n}\n")
    ptx = {target: zynml.compile(source, device="cuda", target=target, require_device=False)
           .artifact(x=bf16(37), w=bf16(37)).ptx for target in ("sm_90a", "sm_80")}
    assert re.search(r"\b(fma|mul|add)\.rn\.bf16\b", ptx["sm_90a"])
    assert "mul.rn.bf16 " not in ptx["sm_80"]  # sm_80 has bf16 fma only


@pytest.mark.parametrize("m,k,n,target", [(192, 48, 320, "sm_90"), (256, 32, 384, "sm_90"),
                                          (300, 200, 129, "sm_90a"), (257, 31, 33, "sm_90a")])
def test_bf16_matmul_takes_the_simt_strategy(m, k, n, target):
    """Sizes that take the f16 tensor cores (wmma) on sm_90, and others: bf16 stays SIMT."""
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda", target=target,
                         require_device=False)
    artifact = prog.artifact(A=bf16(m, k), B=bf16(k, n))
    names = kernel_names(artifact)
    assert any(n.endswith("_matmul") for n in names), names
    assert not any("tensor_core" in n or "wgmma" in n for n in names), names
    assert "wmma" not in artifact.ptx and "mma.sync" not in artifact.ptx
    output = artifact.plan["outputs"][0]
    assert (output["shape"], output["dtype"]) == ([m, n], "bfloat16")


def bf16_constant_artifact(constant):
    """x * constant over tensor<5xbf16>, hand-written (the front end folds no tensor)."""
    from mlir import ir
    from zynml.dialects import new_context
    text = """
#map = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<5xbf16>) -> tensor<5xbf16> {
  %c = arith.constant CONSTANT : tensor<5xbf16>
  %e = tensor.empty() : tensor<5xbf16>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%x, %c : tensor<5xbf16>, tensor<5xbf16>) outs(%e : tensor<5xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %m = arith.mulf %a, %b : bf16
    linalg.yield %m : bf16
  } -> tensor<5xbf16>
  return %r : tensor<5xbf16>
}
""".replace("CONSTANT", constant)
    with new_context() as ctx, ir.Location.unknown(ctx):
        return linalg_to(ir.Module.parse(text), "artifact", CudaTarget())


def test_bf16_constant_tensors_become_globals_of_their_bits(tmp_path):
    """.npy has no bfloat16: a bf16 global is stored as its uint16 bits, which the kernels
    read as bf16 (-2.0 is 0xC000, not the integer -2)."""
    values = [1.5, -2.0, 3.25, 4.0, 0.5]
    artifact = bf16_constant_artifact(f"dense<{values}>")
    assert artifact.plan["globals"] == [{"name": "g0", "shape": [5], "dtype": "bfloat16"}]
    bits = artifact.globals["g0"]
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bits, np.array(values, BF16).view(np.uint16))
    artifact.save(tmp_path / "c.zynart")
    assert_same_artifact(artifact, CudaArtifact.load(tmp_path / "c.zynart"))


@pytest.mark.parametrize("text,shape", [("dense<-2.5> : tensor<2x3xbf16>", [2, 3]),
                                        ("dense<[[1.0, -0.375], [65280.0, -1.0e-3]]> : "
                                         "tensor<2x2xbf16>", [2, 2])])
def test_bf16_dense_attributes_read_as_bits(text, shape):
    from mlir import ir
    from zynml.backend.cuda.launch_plan import _dense_to_numpy
    from zynml.dialects import new_context
    with new_context():
        attr = ir.Attribute.parse(text)
        bits = _dense_to_numpy(attr, shape, "bfloat16")
    assert bits.dtype == np.uint16 and list(bits.shape) == shape
    expected = np.full(shape, -2.5) if "<-2.5>" in text else \
        np.array([[1.0, -0.375], [65280.0, -1.0e-3]])
    np.testing.assert_array_equal(bits, expected.astype(BF16).view(np.uint16))


def test_causal_attention_on_sm90a_launches_a_block_per_item():
    """Causal work items differ in key tiles, so attention_wgmma leaves their balance to
    the GPU's block scheduler: one block per item, no run-time cap (not persistent)."""
    shape = (1, 2, 300, 64)
    prog = zynml.compile(EXAMPLES / "causal_attention.zyn", device="cuda",
                         require_device=False)
    artifact = prog.artifact(**{name: np.ones(shape, np.float16) for name in "QKV"})
    [launch] = launches(artifact.plan["body"])
    assert launch["kernel"].endswith("_attention_wgmma"), launch
    assert launch["grid"] == [3 * 2, 1, 1]
    assert not launch.get("blocks_per_multiprocessor")


# ============================================================================ bool scalars

ANY_POSITIVE = """
let found = compute(x) {
    @kernel reduce(or)
    for i in 0..n:
        yield x[i] > 0.0
}
"""


def test_the_plan_names_bool_scalar_outputs():
    """A bool scalar crosses the boundary as 0-d i8; the plan says which outputs are bools,
    so a loaded artifact returns np.bool_ as the API does (differential_cuda found int8)."""
    prog = zynml.compile(ANY_POSITIVE, device="cuda", require_device=False)
    plan = prog.artifact(x=f32(13)).plan
    assert plan["bool_outputs"] == ["found"]
    assert plan["outputs"][0]["dtype"] == "int8"
    softmax = zynml.compile(SOFTMAX, device="cuda", require_device=False)
    assert softmax.artifact(x=f32(3, 17)).plan["bool_outputs"] == []
