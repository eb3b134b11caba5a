"""Hostile programs end to end on the CPU: valid examples mutated (integers replaced by
huge, negative or zero values, operators swapped, expressions nested deeply, reads made
data-dependent), compiled and run on the seeds' inputs. Each must give a result or a
located ZynMLError: never another exception, never a crash of the process.

A run is bounded by its number of examples (ZYNML_FUZZ_SCALE multiplies it, as in
frontend/test_frontend_fuzz.py): each example that checks compiles through iree-compile,
so the default stays at a few tens of seconds. Programs that once broke the compiler are
kept in REGRESSIONS.

A campaign (docs/developer-guide.md, "Fuzz campaigns"): a new hypothesis seed per run,
  ZYNML_FUZZ_SCALE=120 pytest -s -p no:cacheprovider --hypothesis-seed=N \
      --hypothesis-show-statistics tests/test_mutation_fuzz.py -k hostile
(30 examples per unit of scale); examples slower than SLOW_SECONDS are printed.
"""
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zynml
from zynml import knobs
from zynml.errors import BackendError
from zynml.frontend.symbols import is_tensor

EXAMPLES = Path(__file__).resolve().parent / "programs" / "examples"
SCALE = knobs.FUZZ_SCALE.get()
SLOW_SECONDS = 10.0
_ran = {"examples": 0}
SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))

GATHER = """let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]] * 2.0 + x[i % 7]
}
let s = compute(x, idx) {
    @kernel reduce(argmax)
    for i in 0..n:
        yield (x[idx[i]], i)
}
"""


def _f32(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape).astype(
        np.float32)


_ATTENTION = dict(Q=_f32(1, 2, 5, 4), K=_f32(1, 2, 5, 4), V=_f32(1, 2, 5, 4))
_CONV = dict(input=_f32(1, 2, 5, 5), kernel=_f32(3, 2, 3, 3), bias=_f32(3), in_h=5, in_w=5)
# seed -> (its source, inputs it runs on)
SEEDS = {name: ((EXAMPLES / name).read_text() if name != "gather" else GATHER, inputs)
         for name, inputs in {
    "argmax.zyn": dict(data=_f32(7)),
    "argmin.zyn": dict(data=_f32(7)),
    "reduce_max.zyn": dict(data=_f32(7)),
    "reduce_sum.zyn": dict(data=_f32(7)),
    "reduce_norm.zyn": dict(data=_f32(7)),
    "reduce_min_axis.zyn": dict(matrix=_f32(3, 5)),
    "row_sums.zyn": dict(matrix=_f32(3, 5)),
    "elementwise_relu.zyn": dict(x=_f32(7)),
    "elementwise_two_inputs.zyn": dict(x=_f32(7), y=_f32(7)),
    "gelu.zyn": dict(x=_f32(7)),
    "broadcast.zyn": dict(matrix=_f32(3, 4), vector=_f32(4)),
    "matmul.zyn": dict(A=_f32(3, 4), B=_f32(4, 5)),
    "batched_matmul.zyn": dict(A=_f32(2, 3, 4), B=_f32(2, 4, 5)),
    "tiled_matmul.zyn": dict(A=_f32(20, 4), B=_f32(4, 3), scale=_f32(20)),
    "fused_softmax.zyn": dict(logits=_f32(3, 5)),
    "layer_norm.zyn": dict(x=_f32(3, 5), gamma=_f32(5), beta=_f32(5), eps=1e-5),
    "rope.zyn": dict(x=_f32(1, 2, 3, 4), cos_cache=_f32(3, 2), sin_cache=_f32(3, 2),
                     head_dim=4),
    "conv2d.zyn": dict(_CONV, out_h=5, out_w=5),
    "conv2d_stride2_pad0.zyn": dict(_CONV, out_h=2, out_w=2),
    "conv2d_depthwise.zyn": dict(input=_f32(1, 2, 5, 5), kernel=_f32(2, 3, 3), out_h=3,
                                 out_w=3),
    "attention.zyn": dict(_ATTENTION, mask=np.tri(5, dtype=bool)),
    "causal_attention.zyn": _ATTENTION,
    "flash_attention.zyn": dict(Q=_f32(1, 1, 9, 4), K=_f32(1, 1, 9, 4), V=_f32(1, 1, 9, 4)),
    "transformer_ffn.zyn": dict(normed=_f32(2, 3, 4), ffn_up=_f32(4, 8), ffn_down=_f32(8, 4)),
    "transformer_residual_layernorm.zyn": dict(x=_f32(2, 3, 4), projected=_f32(2, 3, 4),
                                               ln_weight=_f32(4), ln_bias=_f32(4)),
    "gather": dict(x=_f32(7), idx=np.array([0, 6, 3, 1, 2], np.int64)),
}.items()}

# Integers a hostile user writes: zero, negative, beyond a loop's reach, beyond 64 bits.
INTEGERS = ["0", "-1", "-3", "1", "2", "100", "-999999999999", str(2 ** 40), str(2 ** 62),
            str(2 ** 63 - 1), str(2 ** 64), "99999999999999999999"]
OPERATORS = ["+", "-", "*", "/", "%", "^", "<", ">", "==", "and", "or", "@"]
TOKEN = re.compile(r"\d+\.\d+(?:e-?\d+)?|\d+|\w+|\.\.|[-+*/%^@<>=!]=?|[()\[\]{},:]|\n|[ ]+|.")
# A read of an element (not a write: `out[i] = ...`, `h[f] = ...`)
LOAD = re.compile(r"\b[A-Za-z_]\w*\[[^\[\]\n]*\](?!\s*[-+*/]?=[^=])")

REGRESSIONS = [
    # a result too large for a 64-bit byte size (IREE: "shape element count overflows
    # device size", an IndexError at the call; found by this fuzzer)
    ("rope.zyn", SEEDS["rope.zyn"][0].replace("out[b, h, s, d * 2 + 1]",
                                              "out[b, h, s, d * 2 + 4611686018427387904]")),
    # a loop from 2: upstream's convolution analysis crashed iree-compile on `ow + kw + 2`
    ("conv2d_depthwise.zyn", SEEDS["conv2d_depthwise.zyn"][0].replace("kw in 0..", "kw in 2..")),
    # a local array of more than 2^63 elements: an internal error in cir-to-linalg
    # (campaign seed 20261128)
    ("transformer_ffn.zyn", SEEDS["transformer_ffn.zyn"][0].replace(
        "shared var up[ffn_hidden]",
        "shared var up[ffn_hidden * ffn_hidden + 9223372036854775807]")),
    # an AffineMap compared with None (a gather yielded by a reduction)
    ("gather", GATHER.replace("(x[idx[i]], i)", "(x[idx[i]] + x[i], i)")
     .replace("reduce(argmax)", "reduce(+)").replace("yield (x[idx[i]] + x[i], i)",
                                                     "yield x[idx[i]]")),
]


@st.composite
def hostile_program(draw):
    """(seed name, mutated source)."""
    name = draw(st.sampled_from(sorted(SEEDS)))
    text = SEEDS[name][0]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["integer", "operator", "nest", "sum", "gather"]))
        tokens = TOKEN.findall(text)
        if kind == "integer":
            spots = [k for k, t in enumerate(tokens) if t.isdigit()]
            if spots:
                tokens[draw(st.sampled_from(spots))] = draw(st.sampled_from(INTEGERS))
        elif kind == "operator":
            spots = [k for k, t in enumerate(tokens) if t in OPERATORS]
            if spots:
                tokens[draw(st.sampled_from(spots))] = draw(st.sampled_from(OPERATORS))
        text = "".join(tokens)
        loads = list(LOAD.finditer(text))
        if kind in ("nest", "sum", "gather") and loads:
            load = draw(st.sampled_from(loads))
            expr = load.group()
            if kind == "nest":  # unary minus chains, up to past the parser's nesting limit
                new = "(" + "- " * draw(st.integers(1, 220)) + expr + ")"
            elif kind == "sum":  # a flat sum, up to past the expression depth limit
                new = "(" + " + ".join([expr] * draw(st.sampled_from([2, 50, 400, 2100]))) + ")"
            else:  # an index made data-dependent and out of range
                base, index = expr.split("[", 1)
                first = index.split(",")[0].rstrip("]")
                offset = draw(st.sampled_from(INTEGERS))
                new = f"{base}[{first} * {first} + {offset}" + index[len(first):]
            text = text[:load.start()] + new + text[load.end():]
    return name, text


def _inputs(prog: zynml.Program, seed_inputs: dict) -> dict:
    """The seed's inputs that the program takes; others: ones of the rank it reads them
    with (3 along each dimension), or 3 for a scalar."""
    inputs = {}
    for name, t in prog.generic.inputs.items():
        if name in seed_inputs:
            inputs[name] = seed_inputs[name]
        elif is_tensor(t):
            inputs[name] = np.ones((3,) * (t.rank or 1), np.float32)
        else:
            inputs[name] = 3
    return inputs


def _run(text: str, seed_inputs: dict):
    """A result or a ZynMLError; anything else fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ZynMLNote: a kind lowered generically
        try:
            prog = zynml.compile(text, device="cpu")
            return prog(**_inputs(prog, seed_inputs))
        except zynml.ZynMLError as err:
            # located, but for the toolchain's own failures (out of memory, an IREE bug)
            assert err.loc is not None or isinstance(err, BackendError), str(err)
            return err


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seeds_take_their_inputs(name):
    """Each seed takes exactly its inputs, tensors of the ranks it reads (else the
    mutations test little; the examples themselves run in test_spec_examples.py)."""
    text, inputs = SEEDS[name]
    generic = zynml.compile(text, device="cpu").generic
    assert set(generic.inputs) == set(inputs)
    for input_name, t in generic.inputs.items():
        if is_tensor(t) and t.rank is not None:
            assert np.ndim(inputs[input_name]) == t.rank, input_name


@settings(max_examples=max(1, int(30 * SCALE)), **SETTINGS)
@given(hostile_program())
def test_hostile_programs_give_results_or_zynml_errors(program):
    name, text = program
    start = time.monotonic()
    _run(text, SEEDS[name][1])
    # Not an assertion (no timed tests): campaigns run with -s and count these lines as
    # hangs to look at; a loaded machine makes a few of them by itself.
    seconds = time.monotonic() - start
    if seconds > SLOW_SECONDS:
        print(f"\nslow example ({seconds:.1f} s, seed {name}):\n{text}\n--- end", flush=True)
    _ran["examples"] += 1
    if _ran["examples"] % 100 == 0:  # a campaign's progress (-s)
        print(f"\n{_ran['examples']} examples ran", flush=True)


@pytest.mark.parametrize("seed,text", REGRESSIONS)
def test_regressions(seed, text):
    _run(text, SEEDS[seed][1])
