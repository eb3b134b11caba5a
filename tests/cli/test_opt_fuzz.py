"""Fuzzing zynml-opt with mutated MLIR: the inputs of the lit tests (lit_tests/**/*.mlir,
a few .zyn), cut at `// -----`, their tokens replaced, deleted, duplicated and swapped
(values from the corpus itself and from a list of troublemakers: huge and negative sizes,
odd types, the cir ops, dangling symbols), run through the passes their RUN lines name
or others. Every run must exit 0 or 1, with no traceback and no "internal error": MLIR's
aborts are caught by the forked child each chunk runs in (zynml/cli/isolate.py), and a
pass must reject with a located error what it cannot handle.

Plain seeded mutation: case(seed) makes a case again, and a failure names the seed, the
flags and the mutated text. ZYNML_FUZZ_SCALE=N runs N times as many cases (the default
takes about 20 s: 1000 mutants); `python tests/cli/test_opt_fuzz.py FIRST COUNT` runs a
campaign and counts the outcomes.
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import re
import shlex
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from zynml import knobs
from zynml.cli import opt
from zynml.compiler import CIR_TO_LINALG_PIPELINE

SCALE = knobs.FUZZ_SCALE.get()
CASES = max(1, int(1000 * SCALE))
LIT = Path(__file__).resolve().parents[2] / "lit_tests"
FILES = sorted(p for p in LIT.rglob("*.mlir") if "Output" not in p.parts) + \
    sorted(p for p in (LIT / "frontend").glob("*.zyn"))[:6]

TOKEN = re.compile(r'%[\w.$#]+|@[\w.$]+|"[^"\n]*"|\^\w+|#[\w.]+|![\w.]+|'
                   r'-?\d+\.\d+(?:e[+-]?\d+)?|0x[0-9a-fA-F]+|-?\d+|[A-Za-z_][\w.$]*|->|'
                   r'\s+|.')
TROUBLE = ["99999999999", "-1", "0", "4294967296", "9223372036854775807",
           "18446744073709551616", "1e309", "nan", "index", "i0", "i1", "f32", "bf16",
           "tensor<?xf32>", "tensor<0xf32>", "tensor<99999999999xf32>", "tensor<f32>",
           "memref<?xf32>", "vector<4xf32>", "array<index: 1>", "array<i64: -1>",
           "array<i64>", "dense<1.0>", "affine_map<(d0) -> (d0 floordiv 0)>",
           '"cir.compute"', '"cir.load"', '"cir.store"', '"cir.yield"', '"cir.attention"',
           '"cir.alloc"', '"cir.barrier"', "@missing", "{", "}", "(", ")", "<", ">", "[", "]",
           ",", ":", "=", "%c0", "%arg0", "scf.for", "scf.if", "cir.body", "kind", "body",
           '"reduce"', '"elementwise"', '"matmul"', '"argmax"', "out_dims", "names",
           "operandSegmentSizes", "mask_dims", "causal_offset", "axis", "reduce", "unsigned"]
PASS_FLAGS = ["--cir-verify", "--cir-shape-propagation", "--cir-raise-attention",
              "--cir-to-linalg", "--cir-to-linalg=named-ops=false", "--canonicalize", "--cse",
              f"--pass-pipeline={CIR_TO_LINALG_PIPELINE}", "--fold-scalar-tensors",
              "--split-shared-fills", "--linalg-to-gpu-kernels",
              "--convert-nvgpu-kernels-to-nvvm"]
OTHER_FLAGS = ["--verify-diagnostics", "--mlir-print-op-generic", "--verify-each=false",
               "--allow-unregistered-dialect", "--mlir-print-debuginfo",
               "--zyn-input=x=4x8", "--zyn-input=x=?"]


def _chunks(path: Path) -> list[str]:
    text = path.read_text()
    return [c for c in text.split("\n// -----\n") if c.strip()]


def _run_flags(path: Path) -> list[list[str]]:
    """The zynml-opt flags of the file's RUN lines (its own pipelines)."""
    flags = []
    for line in path.read_text().splitlines():
        found = re.search(r"RUN: .*?zynml-opt (.*?)(?:\||>|$)", line)
        if found:
            words = shlex.split(found.group(1).replace("%cir_to_linalg_pipeline",
                                                      CIR_TO_LINALG_PIPELINE))
            flags.append([w for w in words if w.startswith("-") and w != "-"])
    return flags


CORPUS = {path: (_chunks(path), _run_flags(path)) for path in FILES}
VOCABULARY = sorted({t for chunks, _ in CORPUS.values() for c in chunks
                     for t in TOKEN.findall(c) if t.strip()})


def _kind(token: str) -> str:
    """A token's class: a mutant that swaps within a class mostly still parses, and so
    reaches the verifier and the passes."""
    if re.fullmatch(r"-?\d+(\.\d+)?(e[+-]?\d+)?|0x[0-9a-fA-F]+|nan", token):
        return "number"
    return {"%": "ssa", "@": "symbol", '"': "string", "^": "block", "#": "alias",
            "!": "type"}.get(token[:1], "word" if token[:1].isalpha() else "punct")


KINDS: dict[str, list[str]] = {}
for _token in VOCABULARY + TROUBLE:
    KINDS.setdefault(_kind(_token), []).append(_token)


def case(seed: int) -> tuple[str, str, list[str]]:
    """(file suffix, mutated text, flags) of case `seed`."""
    rng = random.Random(seed)
    path = rng.choice(FILES)
    chunks, run_flags = CORPUS[path]
    tokens = TOKEN.findall(rng.choice(chunks))
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(tokens)) if tokens else 0
        kind = rng.choice(["alike", "alike", "alike", "replace", "trouble", "delete",
                           "duplicate", "swap", "insert"])
        if kind == "alike" and tokens and tokens[i].strip():
            tokens[i] = rng.choice(KINDS[_kind(tokens[i])])
        elif kind == "replace" and tokens:
            tokens[i] = rng.choice(VOCABULARY)
        elif kind == "trouble" and tokens:
            tokens[i] = rng.choice(TROUBLE)
        elif kind == "delete":
            del tokens[i:i + rng.randint(1, 4)]
        elif kind == "duplicate":
            tokens[i:i] = tokens[i:i + rng.randint(1, 12)]
        elif kind == "swap" and tokens:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        else:
            tokens.insert(i, rng.choice(TROUBLE + VOCABULARY[:50]))
    flags = list(rng.choice(run_flags)) if run_flags and rng.random() < 0.6 else []
    for _ in range(rng.randint(0 if flags else 1, 2)):
        flags.append(rng.choice(PASS_FLAGS))
    if rng.random() < 0.2:
        flags.append(rng.choice(OTHER_FLAGS))
    if "--pass-pipeline" in " ".join(flags):  # not with pass flags: a usage error
        flags = [f for f in flags if not f.startswith("--") or "pipeline" in f or
                 f in OTHER_FLAGS or f in ("--split-input-file", "--verify-diagnostics")]
        flags = [f for i, f in enumerate(flags) if not f.startswith("--pass-pipeline")
                 or f not in flags[:i]][:3]
    return path.suffix, "".join(tokens), flags


def run_case(seed: int) -> tuple[int, str]:
    """Run case `seed` through opt.main in this process; assert; (exit code, stderr)."""
    suffix, text, flags = case(seed)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="zynml-opt-fuzz-") as folder:
        path = Path(folder) / f"input{suffix}"
        path.write_text(text)
        out, err = io.StringIO(), io.StringIO()
        os.chdir(folder)  # what the flags write (`-o FILE`, reproducers) stays in there
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = opt.main([str(path), *flags])
        finally:
            os.chdir(cwd)
    err_text = err.getvalue()
    where = f"seed {seed}: zynml-opt input{suffix} {shlex.join(flags)}\n--- input:\n{text}\n---"
    assert code in (0, 1), f"{where}\nexit {code}\n{err_text}"
    # (the input's own lines, echoed under a diagnostic, may hold any words: a lit
    # file's comment mutated into an op line echoed "it was an internal error", seed
    # 14323; a diagnostic's own words follow its "FILE:LINE:COL: error: ", the tool's
    # its "zynml-opt: ")
    assert not re.search(r"(error: |^zynml-opt: )internal error|Traceback \(most recent",
                         err_text, re.MULTILINE), f"{where}\n{err_text}"
    return code, err_text


@pytest.mark.parametrize("chunk", range(4))
def test_mutated_mlir_exits_0_or_1_without_internal_errors(chunk):
    for seed in range(chunk, CASES, 4):
        run_case(seed)


def test_the_corpus_is_the_lit_inputs():
    assert len(FILES) >= 12 and len(VOCABULARY) > 300
    assert any("cir-to-linalg" in " ".join(f) for _, runs in CORPUS.values() for f in runs)


if __name__ == "__main__":  # a campaign: python tests/cli/test_opt_fuzz.py FIRST COUNT
    first, count = (int(a) for a in sys.argv[1:3])
    codes, messages, crashes = Counter(), Counter(), 0
    failures = []
    for seed in range(first, first + count):
        try:
            code, err = run_case(seed)
        except AssertionError as failure:  # keep going: count them all
            failures.append(seed)
            print(f"FAILED {failure}", flush=True)
            continue
        codes[code] += 1
        if "MLIR crashed" in err:
            crashes += 1
            print(f"seed {seed}: {err.strip().splitlines()[0].split(': error: ')[-1]}",
                  flush=True)
        head = (err.strip().splitlines() or ["(nothing)"])[0]
        messages["ok" if code == 0 else re.sub(r"^\S*: error: ", "", head)[:70]] += 1
    print(f"{count} mutants from seed {first}: exit 0: {codes[0]}, exit 1: {codes[1]}, "
          f"MLIR aborts caught: {crashes}, failed: {len(failures)} {failures[:20]}")
    for message, n in messages.most_common(40):
        print(f"{n:6d}  {message}")
