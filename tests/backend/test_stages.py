"""The stages tables (zynml/backend/*/stages.py and the driver's FRONT_STAGES): the one
source of stage names, of `zynml compile --emit`'s choices and of what each stage is."""
import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

import zynml
from zynml import compiler
from zynml.backend.cuda.launch_limits import check_launch_limits
from zynml.backend.cuda.stages import BACKEND as NATIVE
from zynml.backend.cuda.target import CudaTarget
from zynml.backend.iree.stages import BACKEND as IREE
from zynml.cli.main import _parser
from zynml.stage import Backend, Output, Stage

ROOT = Path(__file__).resolve().parents[2]


def test_the_backends_are_the_placements_backends():
    from zynml.devices import BACKENDS
    assert set(compiler.BACKENDS) == set(BACKENDS)
    assert compiler.BACKENDS == {"iree": IREE, "native": NATIVE,
                                 "interpreter": compiler.INTERPRETER}


def test_todays_stage_names_all_exist_in_run_order():
    names = compiler.stage_names()
    assert names[:4] == ["ast", "cir", "linalg", "vmfb"]
    native = [s.name for s in NATIVE.stages]
    for earlier, later in zip(["gpu", "nvvm", "llvm", "ptx", "artifact"],
                              ["nvvm", "llvm", "ptx", "artifact"]):
        assert native.index(earlier) < native.index(later)
    assert len(names) == len(set(names)), "a stage named in two tables"


def test_emit_choices_are_the_tables():
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    compile_parser = commands.choices["compile"]
    emit = next(a for a in compile_parser._actions if a.dest == "emit")
    assert list(emit.choices) == compiler.stage_names()
    assert compiler.stage_names() == [s.name for s in compiler.FRONT_STAGES] + \
        [s.name for s in IREE.stages] + [s.name for s in NATIVE.stages]


@pytest.mark.parametrize("backend", [IREE, NATIVE], ids=lambda b: b.name)
def test_a_stage_reads_only_stages_above_it(backend):
    """Stages run in table order, so each one's inputs must come before it."""
    table = compiler.FRONT_STAGES + backend.stages
    names = [s.name for s in table]
    for i, stage in enumerate(table):
        assert all(names.index(n) < i for n in stage.inputs or ()), stage.name
    assert backend.stages[-1].output.binary  # the artifact the runtime loads


def test_find_stage_names_the_owner_and_lists_the_stages_on_a_typo():
    assert compiler.find_stage("ptx") == (NATIVE, NATIVE.stages[[s.name for s in
                                                                 NATIVE.stages].index("ptx")])
    assert compiler.find_stage("vmfb")[0] is IREE
    assert compiler.find_stage("linalg")[0] is None
    with pytest.raises(ValueError, match="unknown stage 'ptxx'; stages: ast, cir, linalg"):
        compiler.find_stage("ptxx")


def test_a_backend_refuses_a_stage_named_twice():
    stage = Stage("x", lambda job: 1, Output("txt"), inputs=())
    with pytest.raises(AssertionError, match="named twice"):
        Backend("b", (stage, stage), bytes, lambda *a: None, True, None, "")


def _stage_name_lists(path: Path, names: set[str]):
    """Literal tuples, lists and sets of two or more stage names in a Python file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            strings = [e.value for e in node.elts
                       if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if sum(s in names for s in strings) >= 2:
                yield node.lineno, strings


def test_no_stage_list_is_written_outside_the_tables():
    names = set(compiler.stage_names())
    tables = {ROOT / "zynml/backend/iree/stages.py", ROOT / "zynml/backend/cuda/stages.py"}
    found = [(str(path.relative_to(ROOT)), line, strings)
             for path in sorted((ROOT / "zynml").rglob("*.py")) if path not in tables
             for line, strings in _stage_name_lists(path, names)]
    assert found == []


def test_the_tables_load_without_mlir():
    """A machine without MLIR runs cached artifacts: the tables, the driver and the API
    import no MLIR (the stages load it when they first run)."""
    code = ("import sys; sys.modules['mlir'] = None\n"
            "import zynml, zynml.compiler, zynml.cli.main\n"
            "assert 'zynml.backend.cuda.compile' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_launch_limit_check_is_the_native_backends():
    source = ("let y = compute(x) {\n    @kernel elementwise\n    @workgroup(64, 32)\n"
              "    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\n")
    generic = zynml.compile(source, device="cpu").generic  # IREE has no such limit
    with pytest.raises(zynml.ZynMLError, match="2048 threads per block"):
        check_launch_limits(generic, CudaTarget())
