"""zynml/knobs.py: every ZYNML_* variable is typed there, read nowhere else, and documented
in docs/developer-guide.md by the same table."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zynml import knobs
from zynml.cli import main as zynml_main, opt
from zynml.passes import get_pass

ROOT = Path(__file__).resolve().parent.parent
# Every folder of Python code; only zynml/knobs.py may read a ZYNML_* variable.
SCANNED = ("zynml", "passes", "dialects", "benchmarks", "tools", "tests", "lit_tests", "examples")
KNOBS_FILE = ROOT / "zynml" / "knobs.py"
THIS_FILE = Path(__file__).resolve()


# ----------------------------------------------------------------------------- no raw reads


def _python_files() -> list[Path]:
    files = [p for folder in SCANNED for p in sorted((ROOT / folder).rglob("*.py"))]
    return [p for p in files if p != KNOBS_FILE]


def _names_zynml(node: ast.AST, constants: set[str]) -> bool:
    """Whether `node` evaluates to a ZYNML_* name, as far as the source shows."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith("ZYNML_")
    if isinstance(node, ast.JoinedStr):  # f"ZYNML_{suffix}"
        return bool(node.values) and _names_zynml(node.values[0], constants)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "ZYNML_" + suffix
        return _names_zynml(node.left, constants)
    if isinstance(node, ast.Name):  # DEBUG_ENV, assigned "ZYNML_DEBUG" somewhere
        return node.id in constants
    if isinstance(node, ast.Attribute):  # opt.REPRODUCER_DIR_ENV
        return node.attr in constants
    return False


def zynml_constants(trees: list[ast.AST]) -> set[str]:
    """Every name assigned a ZYNML_* string (or such a name: `TRACEBACK_ENV = DEBUG_ENV`) in
    any of `trees`, at module level or not. Names are not told apart by module: a
    false alarm costs a rename, a miss would let a raw read through."""
    constants: set[str] = set()
    while True:
        found = set(constants)
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if _names_zynml(node.value, constants):
                        found |= {t.id for t in targets if isinstance(t, ast.Name)}
        if found == constants:
            return constants
        constants = found


def raw_reads(tree: ast.AST, constants: set[str]) -> list[int]:
    """Lines of `tree` that read a ZYNML_* variable from the environment: os.environ.get(K),
    os.environ[K], os.getenv(K), K in os.environ, os.environ.setdefault(K), and
    os.environ.pop(K) whose value is used (`from os import environ, getenv` and
    `import os as o` too). Setting and deleting a variable is no read."""
    os_names, environs, getenvs = {"os"}, set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_names |= {a.asname or a.name for a in node.names if a.name == "os"}
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in ("environ", "environb"):
                    environs.add(alias.asname or alias.name)
                elif alias.name in ("getenv", "getenvb"):
                    getenvs.add(alias.asname or alias.name)

    def is_os_attr(node, attrs, bare):
        if isinstance(node, ast.Name):
            return node.id in bare
        return (isinstance(node, ast.Attribute) and node.attr in attrs
                and isinstance(node.value, ast.Name) and node.value.id in os_names)

    def is_environ(node):
        return is_os_attr(node, ("environ", "environb"), environs)

    # a call whose value is thrown away is a statement of its own
    discarded = {id(stmt.value) for stmt in ast.walk(tree) if isinstance(stmt, ast.Expr)}
    lines = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if is_os_attr(func, ("getenv", "getenvb"), getenvs):
                key = node.args[0]
            elif (isinstance(func, ast.Attribute) and is_environ(func.value)
                  and (func.attr in ("get", "setdefault")
                       or func.attr == "pop" and id(node) not in discarded)):
                key = node.args[0]
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
              and is_environ(node.value)):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.In, ast.NotIn)) and is_environ(right)
                for op, right in zip(node.ops, node.comparators)):
            key = node.left
        if key is not None and _names_zynml(key, constants):
            lines.append(node.lineno)
    return lines


def _scan(sources: dict[str, str]) -> list[str]:
    trees = {name: ast.parse(text, name) for name, text in sources.items()}
    constants = zynml_constants(list(trees.values()))
    return [f"{name}:{line}" for name, tree in trees.items()
            for line in sorted(raw_reads(tree, constants))]


def test_no_module_reads_a_zynml_variable_but_knobs():
    sources = {str(p.relative_to(ROOT)): p.read_text() for p in _python_files()}
    assert len(sources) > 100, "the scan found too few files to mean anything"
    reads = _scan(sources)
    assert not reads, ("read ZYNML_* variables through zynml.knobs (knobs.NAME.get()), "
                       "not os.environ: " + ", ".join(reads))


def test_the_scan_sees_every_kind_of_read():
    flagged = {
        "os.environ.get('ZYNML_X')": 1,
        "os.environ['ZYNML_X']": 1,
        "os.getenv('ZYNML_X', '1')": 1,
        "'ZYNML_X' in os.environ": 1,
        "x = os.environ.pop('ZYNML_X', None)": 1,
        "os.environ.setdefault('ZYNML_X', '1')": 1,
        "import os as o\no.environ.get(f'ZYNML_{s}')": 2,
        "from os import environ as e\ne.get('ZYNML_' + s)": 2,
        "from os import getenv as g\ng('ZYNML_X')": 2,
        "ENV = 'ZYNML_X'\nALIAS = ENV\nos.environ.get(ALIAS)": 3,
        "import m\nos.environ[m.ENV]": 2,  # ENV holds a ZYNML_ name in m (below)
    }
    for code, line in flagged.items():
        assert _scan({"m.py": "ENV = 'ZYNML_Y'", "t.py": code}) == [f"t.py:{line}"], code
    for code in ("os.environ['ZYNML_X'] = '1'", "del os.environ['ZYNML_X']",
                 "os.environ.pop('ZYNML_X', None)", "monkeypatch.setenv('ZYNML_X', '1')",
                 "os.environ.get('HOME')", "env = {'ZYNML_X': '1'}", "d.get('ZYNML_X')"):
        assert _scan({"t.py": code}) == [], code


# ----------------------------------------------------------------------------- values


def test_bools_take_the_usual_words_in_any_case(monkeypatch):
    for text, value in [("1", True), ("TRUE", True), ("yes", True), (" On ", True),
                        ("0", False), ("False", False), ("NO", False), ("off", False)]:
        monkeypatch.setenv("ZYNML_DEBUG", text)
        assert knobs.DEBUG.get() is value, text


def test_unset_or_empty_is_the_default(monkeypatch):
    for knob in knobs.KNOBS:
        monkeypatch.delenv(knob.name, raising=False)
        assert knob.get() == knob.default
        monkeypatch.setenv(knob.name, "")
        assert knob.get() == knob.default
    assert knobs.AUTOTUNE.get() is True and knobs.LOG.get() == ()


def test_values_are_read_at_each_get_not_at_import(monkeypatch):
    monkeypatch.setenv("ZYNML_AUTOTUNE", "off")
    assert knobs.AUTOTUNE.get() is False
    monkeypatch.setenv("ZYNML_AUTOTUNE", "on")
    assert knobs.AUTOTUNE.get() is True


def test_typed_values(monkeypatch, tmp_path):
    monkeypatch.setenv("ZYNML_FUZZ_SCALE", "0.5")
    assert knobs.FUZZ_SCALE.get() == 0.5
    monkeypatch.setenv("ZYNML_CACHE_DIR", str(tmp_path))
    assert knobs.CACHE_DIR.get() == tmp_path
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ZYNML_REPRODUCER_DIR", "~/repros")
    assert knobs.REPRODUCER_DIR.get() == tmp_path / "repros"
    monkeypatch.setenv("ZYNML_LOG", "recompiles, ,recompiles")
    assert knobs.LOG.get() == ("recompiles", "recompiles")
    count = knobs.Knob("ZYNML_COUNT", "int", 1, "an int knob")
    monkeypatch.setenv("ZYNML_COUNT", "12")
    assert count.get() == 12


@pytest.mark.parametrize("name,text,accepted", [
    ("ZYNML_DEBUG", "maybe", "1, 0, true, false, yes, no, on or off (any case)"),
    ("ZYNML_FUZZ_SCALE", "lots", "a number"),
    ("ZYNML_LOG", "recompiles,everything", "comma-separated words of: recompiles"),
])
def test_a_bad_value_names_the_variable_the_value_and_what_is_accepted(
        monkeypatch, name, text, accepted):
    monkeypatch.setenv(name, text)
    knob = next(k for k in knobs.KNOBS if k.name == name)
    with pytest.raises(knobs.KnobError) as caught:
        knob.get()
    assert caught.value.message == (f"environment variable {name}={text!r} is not a valid "
                                    f"{knob.type}: expected {accepted}, or leave it unset")
    with pytest.raises(knobs.KnobError):
        knobs.validate()


def test_the_table_is_well_formed():
    names = [knob.name for knob in knobs.KNOBS]
    assert len(names) == len(set(names))
    exported = {n for n in knobs.__all__ if isinstance(getattr(knobs, n), knobs.Knob)}
    assert exported == {n for n, v in vars(knobs).items() if isinstance(v, knobs.Knob)}
    assert {getattr(knobs, n) for n in exported} == set(knobs.KNOBS)
    for name in exported:  # knobs.X is $ZYNML_X
        assert getattr(knobs, name).name == "ZYNML_" + name


# ----------------------------------------------------------------------------- the tools


@pytest.mark.parametrize("tool", ["zynml.cli.main", "zynml.cli.opt"])
def test_the_tools_report_a_bad_value_as_a_usage_error(tmp_path, tool):
    prog = tmp_path / "p.zyn"
    prog.write_text("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
                    "        out[i] = relu(x[i])\n}\n")
    args = ["compile", prog, "--emit", "cir"] if tool.endswith("main") else [prog]
    done = subprocess.run([sys.executable, "-m", tool, *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, "ZYNML_AUTOTUNE": "maybe"}, timeout=120)
    prog_name = "zynml" if tool.endswith("main") else "zynml-opt"
    assert done.returncode == 1
    assert done.stderr == (f"{prog_name}: error: environment variable ZYNML_AUTOTUNE='maybe' "
                           "is not a valid bool: expected 1, 0, true, false, yes, no, on or "
                           "off (any case), or leave it unset\n")
    assert done.stdout == ""


def _broken(*args, **kwargs):
    raise RuntimeError("simulated bug")


def test_zynml_debug_raises_a_tool_bug_with_its_traceback(monkeypatch, tmp_path):
    monkeypatch.setattr(opt, "process_chunk", _broken)
    source = tmp_path / "a.mlir"
    source.write_text("module {}\n")
    monkeypatch.setenv("ZYNML_DEBUG", "0")
    assert opt.main([str(source)]) == 2
    monkeypatch.setenv("ZYNML_DEBUG", "1")
    with pytest.raises(RuntimeError, match="simulated bug"):
        opt.main([str(source)])
    monkeypatch.setattr(zynml_main, "_compile", _broken)
    with pytest.raises(RuntimeError, match="simulated bug"):
        zynml_main.main(["compile", str(source)])


def test_zynml_debug_prints_the_traceback_of_a_bug_in_a_pass(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(get_pass("cir-verify"), "run", _broken)
    source = tmp_path / "a.mlir"
    source.write_text("module {}\n")
    for debug in ("0", "1"):
        monkeypatch.setenv("ZYNML_DEBUG", debug)
        assert opt.main([str(source), "--cir-verify"]) == 2
        err = capsys.readouterr().err
        assert "internal error in pass 'cir-verify': RuntimeError: simulated bug" in err
        assert ("Traceback" in err) == (debug == "1")


# ----------------------------------------------------------------------------- the docs


def _rows(table: str) -> dict[str, list[str]]:
    """A markdown table's knob rows: variable name -> its cells."""
    rows = [line for line in table.splitlines() if line.startswith("| `ZYNML_")]
    return {row.split("`")[1]: [c.strip() for c in row.strip("|").split(" | ")] for row in rows}


def test_the_docs_table_is_the_knobs_table():
    text = (ROOT / "docs" / "developer-guide.md").read_text()
    section = text.split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    documented, expected = _rows(section), _rows(knobs.markdown_table())
    assert not expected.keys() - documented.keys(), \
        f"knobs missing from the docs: {sorted(expected.keys() - documented.keys())}"
    assert not documented.keys() - expected.keys(), \
        f"doc rows with no knob: {sorted(documented.keys() - expected.keys())}"
    columns = ("name", "type", "default", "meaning", "read by")
    for name, cells in documented.items():
        for column, doc, knob in zip(columns, cells, expected[name], strict=True):
            assert doc == knob, f"{name}'s {column}: the docs say {doc!r}, knobs.py {knob!r}"
    # and the same order and header: the section holds `python -m zynml.knobs`'s output
    assert knobs.markdown_table() in section, "paste `python -m zynml.knobs` into the docs"


def test_read_by_names_exactly_the_files_that_read_each_knob():
    readers: dict[str, set[str]] = {knob.name: set() for knob in knobs.KNOBS}
    for path in _python_files():
        if path == THIS_FILE:  # its tests call get() on any knob
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            # knobs.X.get()
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get" and isinstance(node.func.value, ast.Attribute)
                    and isinstance(node.func.value.value, ast.Name)
                    and node.func.value.value.id == "knobs"):
                knob = getattr(knobs, node.func.value.attr)
                readers[knob.name].add(str(path.relative_to(ROOT)))
    for knob in knobs.KNOBS:
        assert readers[knob.name] == set(knob.read_by), knob.name


def test_every_zynml_variable_named_anywhere_is_a_knob():
    # a typo (monkeypatch.setenv("ZYNML_CUDA_POSION")) or a stale name in the docs (as
    # ZYNML_OPT_TRACEBACK once was) would otherwise pass unnoticed
    names = {knob.name for knob in knobs.KNOBS}
    files = [p for p in (ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *_python_files(),
                         *(ROOT / "tools").rglob("*.sh"), *(ROOT / "tools").rglob("*.md"))
             if p != THIS_FILE]
    unknown = {f"{p.relative_to(ROOT)}: {name}" for p in files
               for name in re.findall(r"ZYNML_[A-Z0-9_]+", p.read_text()) if name not in names}
    assert not unknown, sorted(unknown)
