"""The driver (zynml/compiler.py): running a stages table, `build` through the artifact
cache, `save_temps` dumps and the compiler fingerprint in the cache key."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml import compiler
from zynml.backend.cuda.target import CudaTarget
from zynml.backend.iree.target import CPU
from zynml.cache import ArtifactCache
from zynml.devices import resolve
from zynml.errors import ZynMLError
from zynml.frontend.types import TensorType, from_numpy
from zynml.stage import Backend, Compilation, Output, Stage

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n" \
         "        out[i] = x[i] * 2.0\n}\n"


# ------------------------------------------------------------------ the runner, on a toy

def toy_backend(ran: list, fail: str = ""):
    """one -> two -> pack, with `look` a side stage of one that only pack reads."""
    def stage(name):
        def run(*args):
            *inputs, job = args
            if name == fail:
                raise ZynMLError(f"{name} failed")
            ran.append(name)
            return f"{name}({', '.join(inputs)})"
        return run
    stages = (Stage("one", stage("one"), Output("txt")),
              Stage("look", stage("look"), Output("txt")),
              Stage("two", stage("two"), Output("txt"), inputs=("one",)),
              Stage("pack", stage("pack"), Output("bin", binary=True, show=str.encode),
                    inputs=("look", "two")))
    return Backend("toy", stages, load=bytes, check=lambda *a: None, shape_generic=True,
                   emit_device=None, wrong_backend="")


def run_toy(upto, ran, **kwargs):
    job = Compilation(toy_backend(ran, kwargs.pop("fail", "")), target=None)
    return compiler.run_stages(job, upto, given={"linalg": "L"}, **kwargs)


def test_only_the_stages_a_stage_reads_run_in_table_order():
    ran = []
    assert run_toy("two", ran) == "two(one(L))" and ran == ["one", "two"]
    ran = []
    assert run_toy("pack", ran) == "pack(look(one(L)), two(one(L)))"
    assert ran == ["one", "look", "two", "pack"]


def test_save_temps_runs_and_writes_every_stage_up_to_the_one_asked_for(tmp_path):
    ran = []
    run_toy("two", ran, save_temps=tmp_path / "temps")
    assert ran == ["one", "look", "two"]  # `look` too, though `two` does not read it
    assert sorted(p.name for p in (tmp_path / "temps").iterdir()) == \
        ["look.txt", "one.txt", "two.txt"]
    assert (tmp_path / "temps" / "two.txt").read_text() == "two(one(L))"


def test_save_temps_keeps_what_was_made_before_a_failing_stage(tmp_path):
    with pytest.raises(ZynMLError, match="two failed"):
        run_toy("pack", [], fail="two", save_temps=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["look.txt", "one.txt"]
    assert (tmp_path / "one.txt").read_text() == "one(L)"  # the failing stage's input


def test_a_stage_of_another_backend_is_an_error_naming_the_stages():
    with pytest.raises(ValueError, match="the toy backend has no stage 'ptx'; its stages: "
                                         "ast, cir, linalg, one, look, two, pack"):
        run_toy("ptx", [])


# ------------------------------------------------------------------ build and the cache

def double_checked(n=5):
    source, program = compiler.parse_source(DOUBLE)
    signature = {"x": TensorType(from_numpy(np.dtype(np.float32)), (n,))}
    return compiler.check_program(source, program, signature), source, signature


@pytest.fixture
def compiles(monkeypatch):
    """Counts compilations: every build that misses the cache makes `cir` once."""
    count = []
    to_cir = compiler.to_cir
    monkeypatch.setattr(compiler, "to_cir", lambda checked: count.append(1) or to_cir(checked))
    return count


def test_build_reads_the_cache_the_second_time_without_compiling(tmp_path, compiles):
    checked, source, signature = double_checked()
    cache = ArtifactCache(tmp_path)
    args = (checked, source, resolve("cpu"), CPU, signature, {})
    first = compiler.build(*args, cache=cache)
    assert len(compiles) == 1 and first[:2] == b"PK"  # a vmfb
    assert compiler.build(*args, cache=cache) == first
    assert len(compiles) == 1
    other, _, other_signature = double_checked(6)
    compiler.build(other, source, resolve("cpu"), CPU, other_signature, {}, cache=cache)
    assert len(compiles) == 2  # another signature, another artifact


def test_programs_share_the_cache_through_the_driver(tmp_path, monkeypatch, compiles):
    monkeypatch.setenv("ZYNML_CACHE_DIR", str(tmp_path))
    x = np.arange(5, dtype=np.float32)
    assert np.array_equal(zynml.run(DOUBLE, device="cpu", x=x)["y"], 2 * x)
    assert np.array_equal(zynml.run(DOUBLE, device="cpu", x=x)["y"], 2 * x)
    assert len(compiles) == 1  # the second Program found the first one's vmfb


def test_the_key_is_the_source_signature_scalars_pipeline_target_and_compiler():
    checked, source, signature = double_checked()
    iree = compiler.BACKENDS["iree"]
    base = dict(backend=iree, source=source, pipeline_name="", signature=signature,
                scalars={}, target=CPU)
    key = compiler.artifact_key(**base)
    changed = [dict(source=compiler.parse_source(DOUBLE + "\n")[0]),
               dict(pipeline_name="p"), dict(signature=double_checked(6)[2]),
               dict(scalars={"n": 3}), dict(target=CPU.with_flags("--iree-opt-level=O1")),
               dict(backend=compiler.BACKENDS["native"], target=CudaTarget())]
    for change in changed:
        assert compiler.artifact_key(**(base | change)) != key, change
    assert compiler.artifact_key(**base) == key
    assert CudaTarget("sm_80").cache_key() != CudaTarget().cache_key()


def test_the_fingerprint_hashes_every_compiler_source_and_nothing_else():
    files = {p.resolve() for p in compiler.compiler_files()}
    package = ROOT / "zynml"
    for folder in ("frontend", "cirgen", "lowering", "backend"):
        assert set((package / folder).rglob("*.py")) <= files, folder
    for folder in (ROOT / "passes", ROOT / "dialects"):  # zynml.passes, zynml.dialects
        assert set(folder.rglob("*.py")) <= files, folder
    assert {package / "compiler.py", package / "stage.py"} <= files
    assert (package / "backend" / "cuda" / "strategies" / "matmul.py") in files
    assert not [f for f in files if "runtime" in f.parts or f.parent.name == "cli" or
                f.name in ("api.py", "cache.py", "devices.py")]
    assert len(compiler.fingerprint()) == 64


def test_a_cached_artifact_runs_where_there_is_no_mlir(tmp_path):
    """The key is the source and signature, not the IR: a machine without MLIR finds
    what another compiled into a shared cache."""
    code = ("import sys\n{block}import numpy as np, zynml\n"
            "p = zynml.compile('{path}', device='cuda', require_device=False)\n"
            "print(len(p.artifact(x=np.ones((3, 5), np.float32)).ptx))\n"
            "assert 'zynml.backend.cuda.compile' not in sys.modules or not {blocked}\n")
    env = dict(os.environ, ZYNML_CACHE_DIR=str(tmp_path))
    path = ROOT / "examples" / "softmax.zyn"
    outputs = []
    for blocked in (False, True):  # compile into the cache, then read it without MLIR
        block = "sys.modules['mlir'] = None\n" if blocked else ""
        done = subprocess.run([sys.executable, "-c", code.format(
            block=block, path=path, blocked=blocked)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and int(outputs[0]) > 0


def test_an_artifact_that_is_not_cached_where_there_is_no_compiler_says_so(tmp_path,
                                                                         monkeypatch):
    checked, source, signature = double_checked()
    monkeypatch.setattr(compiler, "installed", lambda: False)
    with pytest.raises(ZynMLError, match=r"not in the artifact cache \(.*\), and ZynML's "
                       r"compiler \(the MLIR bindings\) is not installed here"):
        compiler.build(checked, source, resolve("cpu"), CPU, signature, {},
                       cache=ArtifactCache(tmp_path))


# ------------------------------------------------------------------ save_temps

def written(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_save_temps_writes_every_iree_stage_even_when_cached(tmp_path, compiles):
    checked, source, signature = double_checked()
    args = (checked, source, resolve("cpu"), CPU, signature, {})
    cache = ArtifactCache(tmp_path / "cache")
    vmfb = compiler.build(*args, cache=cache)
    compiler.build(*args, cache=cache, save_temps=tmp_path / "temps")
    assert len(compiles) == 2  # compiled again, to dump the stages
    files = written(tmp_path / "temps")
    assert sorted(files) == ["ast.txt", "cir.mlir", "linalg.mlir", "vmfb.vmfb"]
    assert files["vmfb.vmfb"] == vmfb
    prog = zynml.compile(DOUBLE, device="cpu")
    inputs = {"x": np.ones(5, np.float32)}
    for stage in ("ast", "cir", "linalg"):  # each file is what `--emit` shows
        ext = compiler.find_stage(stage)[1].output.ext
        assert files[f"{stage}.{ext}"].decode() == prog.emit(stage, inputs), stage


def test_save_temps_writes_every_native_stage(tmp_path):
    prog = zynml.compile(ROOT / "examples" / "softmax.zyn", device="cuda",
                         require_device=False)
    inputs = {"x": np.ones((3, 5), np.float32)}
    zynart = prog.emit("artifact", inputs, save_temps=tmp_path)
    files = written(tmp_path)
    table = compiler.FRONT_STAGES + compiler.BACKENDS["native"].stages
    expected = {f"{s.name}.{s.output.ext}" for s in table}
    if shutil.which("ptxas") is None:
        expected.discard("cubin.cubin")
    assert set(files) == expected
    artifact = prog.artifact(**inputs)
    assert files["ptx.ptx"].decode() == artifact.ptx
    assert json.loads(files["plan.json"]) == artifact.plan
    assert files["artifact.zynart"] == zynart
    for stage in ("gpu", "nvvm", "llvm"):  # as `--emit` shows them, each from its own run
        assert files[f"{stage}.{compiler.find_stage(stage)[1].output.ext}"].decode() == \
            prog.emit(stage, inputs), stage
