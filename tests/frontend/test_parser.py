"""Parser tests: every spec program parses, the trees have the expected shape, and syntax
errors are reported at exact locations (several per run, without cascades)."""
import math
from pathlib import Path

import pytest

from zynml.errors import SourceFile, ZynMLError
from zynml.frontend import ast
from zynml.frontend.parser import parse

SPEC_DIR = Path(__file__).resolve().parents[1] / "programs" / "spec"
SPEC_FILES = sorted(SPEC_DIR.glob("*.zyn"))


def prog(text: str) -> ast.Program:
    return parse(SourceFile("t.zyn", text))


def spec(name: str) -> ast.Program:
    path = SPEC_DIR / name
    return parse(SourceFile(path.name, path.read_text()))


def value_of(text: str) -> ast.Expr:
    """The value of a one-line `let v = <expr>` program."""
    (stmt,) = prog(f"let v = {text}\n").body
    return stmt.value


def syntax_error(text: str) -> ZynMLError:
    with pytest.raises(ZynMLError) as info:
        parse(SourceFile("t.zyn", text))
    return info.value


def where(diag) -> tuple[int, int]:
    return (diag.loc.line, diag.loc.col)


def lets(program: ast.Program) -> dict:
    """Top-level `let name = value` by name (the last one wins, as in the spec files)."""
    return {s.targets[0]: s.value for s in program.body if isinstance(s, ast.Let)}


def sexpr(e) -> str:
    """A compact rendering of an expression, to assert precedence and associativity."""
    if isinstance(e, ast.Binary):
        return f"({sexpr(e.left)} {e.op} {sexpr(e.right)})"
    if isinstance(e, ast.Unary):
        return f"({e.op} {sexpr(e.operand)})"
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, (ast.IntLit, ast.FloatLit)):
        return repr(e.value)
    if isinstance(e, ast.Call):
        return f"{sexpr(e.func)}({', '.join(sexpr(a) for a in e.args)})"
    if isinstance(e, ast.Attribute):
        return f"{sexpr(e.base)}.{e.name}"
    if isinstance(e, ast.Index):
        return f"{sexpr(e.base)}[{', '.join(sexpr(i) for i in e.indices)}]"
    if isinstance(e, ast.Slice):
        return f"{sexpr(e.lo) if e.lo else ''}:{sexpr(e.hi) if e.hi else ''}"
    if isinstance(e, ast.Pipe):
        return f"({sexpr(e.value)} |> {sexpr(e.call)})"
    if isinstance(e, ast.Await):
        return f"(await {sexpr(e.value)})"
    return type(e).__name__


# ============================================================================ spec programs


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_every_spec_program_parses(path):
    program = parse(SourceFile(path.name, path.read_text()))
    assert program.body or program.pipelines


def test_spec_directory_is_complete():
    assert {p.name for p in SPEC_FILES} >= {
        "basic_syntax.zyn", "kernel_elementwise.zyn", "kernel_reduction.zyn",
        "kernel_matrix.zyn", "kernel_convolution.zyn", "kernel_attention.zyn",
        "kernel_custom.zyn", "device_management.zyn", "async.zyn", "memory.zyn",
        "transformer_block.zyn"}


def test_spec_kernel_counts():
    """Each kernel example of the spec becomes one top-level compute."""
    counts = {"kernel_elementwise.zyn": 3, "kernel_reduction.zyn": 5, "kernel_matrix.zyn": 2,
              "kernel_convolution.zyn": 2, "kernel_attention.zyn": 2, "kernel_custom.zyn": 4}
    for name, count in counts.items():
        values = [s.value.value if isinstance(s.value, ast.Pipe) else s.value
                  for s in spec(name).body]
        computes = [v for v in values if isinstance(v, ast.Compute)]
        assert len(computes) == count, name
        assert all(c.kernel is not None and not c.elided for c in computes), name


# ============================================================================ compute


def test_reduce_kernel_spec_with_axis():
    row_sums = lets(spec("kernel_reduction.zyn"))["row_sums"]
    assert isinstance(row_sums, ast.Compute)
    assert [n.id for n in row_sums.inputs] == ["matrix"]
    kernel = row_sums.kernel
    assert kernel.kind == "reduce"
    assert [type(a) for a in kernel.args] == [ast.ReduceOpName]
    assert kernel.args[0].op == "+"
    (axis,) = kernel.kwargs
    assert axis.name == "axis" and isinstance(axis.value, ast.IntLit) and axis.value.value == 1
    assert (kernel.loc.line, kernel.loc.col) == (27, 5)  # at the `@`


@pytest.mark.parametrize("op", ["+", "*", "max", "min", "and", "or", "argmax", "argmin", "mine"])
def test_reduce_kernel_operators(op):
    c = value_of(f"compute(d) {{ @kernel reduce({op}) }}")
    assert isinstance(c.kernel.args[0], ast.ReduceOpName) and c.kernel.args[0].op == op


def test_builtin_reduce_takes_a_bare_operator():
    probs = lets(spec("kernel_custom.zyn"))["probs"]
    max_val, _, _, sum_exp, assign = probs.body
    call = max_val.value
    assert isinstance(call, ast.Call) and call.func.id == "reduce"
    assert isinstance(call.args[0], ast.ReduceOpName) and call.args[0].op == "max"
    assert isinstance(call.args[1], ast.Name) and call.args[1].id == "logits"
    assert sum_exp.value.args[0].op == "+"
    # A non-operator name stays a Name; elsewhere `max` is a plain function call.
    assert isinstance(value_of("reduce(data, axis=0)").args[0], ast.Name)
    assert sexpr(value_of("max(m, row_max(S))")) == "max(m, row_max(S))"
    assert isinstance(assign, ast.Assign) and assign.target.id == "out" and assign.op is None


def test_broadcast_and_other_inner_annotations():
    scaled = lets(spec("kernel_elementwise.zyn"))["scaled"]
    assert scaled.kernel.kind == "elementwise" and scaled.kernel.args == []
    (broadcast,) = scaled.inner
    assert broadcast.name == "broadcast"
    assert [a.id for a in broadcast.args] == ["vector"]
    assert [(k.name, k.value.value) for k in broadcast.kwargs] == [("axis", 1)]

    flash = [s.value for s in spec("kernel_attention.zyn").body][1]
    assert flash.kernel.kind == "flash_attention"
    workgroup, tile = flash.inner
    assert (workgroup.name, [a.value for a in workgroup.args]) == ("workgroup", [64])
    assert [(k.name, k.value.value) for k in tile.kwargs] == [("block_q", 64), ("block_kv", 64)]

    matmul = lets(spec("kernel_matrix.zyn"))["C"]  # the batched one (last C)
    assert [a.value for a in matmul.inner[0].args] == [16, 16, 1]


def test_shared_annotation_expression():
    first_c = [s.value for s in spec("kernel_matrix.zyn").body][0]
    workgroup, shared = first_c.inner
    assert shared.name == "shared"
    assert sexpr(shared.args[0]) == "(((16 * 16) * 4) * 2)"


def test_annotations_may_follow_kernel_in_any_order():
    c = value_of("compute(x) {\n    @workgroup(8)\n    @kernel matmul\n    @device(\"auto\")\n"
                 "    out = x\n}")
    assert c.kernel.kind == "matmul"
    assert [a.name for a in c.inner] == ["workgroup", "device"]


def test_outer_annotations():
    body = spec("device_management.zyn").body
    data_parallel = body[4].value
    device, parallel = data_parallel.outer
    assert device.name == "device" and isinstance(device.args[0], ast.ListExpr)
    assert [e.value for e in device.args[0].elts] == ["cuda:0", "cuda:1"]
    assert parallel.name == "parallel" and parallel.args[0].id == "data"
    assert data_parallel.elided and data_parallel.kernel.kind == "matmul"
    assert isinstance(data_parallel.body[0], ast.Ellipsis_)
    assert body[5].value.kernel.kind == "large_model_forward"


def test_one_line_bodies_inside_a_list():
    futures = lets(spec("async.zyn"))["futures"]
    assert isinstance(futures, ast.ListExpr) and len(futures.elts) == 3
    for elt, name in zip(futures.elts, ["batch1", "batch2", "batch3"]):
        assert isinstance(elt, ast.Compute) and elt.inputs[0].id == name
        assert [a.name for a in elt.outer] == ["async"]
        assert elt.kernel is None and elt.elided


def test_compute_inputs_may_be_attribute_paths():
    (pipeline,) = spec("transformer_block.zyn").pipelines
    qkv = pipeline.body[1].value
    assert sexpr(qkv.inputs[1]) == "weights.qkv_proj"
    assert qkv.inner[0].name == "device" and qkv.inner[0].args[0].value == "auto"


def test_body_of_only_annotations_and_comments():
    (pipeline,) = spec("transformer_block.zyn").pipelines
    attn_out = [s for s in pipeline.body if isinstance(s, ast.Let)][6]
    assert attn_out.targets == ["attn_out"]
    assert attn_out.value.kernel.kind == "flash_attention"
    assert attn_out.value.body == [] and not attn_out.value.elided


def test_pipe_after_closing_brace():
    norm = lets(spec("kernel_reduction.zyn"))["norm"]
    assert isinstance(norm, ast.Pipe)
    assert isinstance(norm.value, ast.Compute) and norm.value.kernel.args[0].op == "+"
    assert norm.call.func.id == "sqrt" and norm.call.args == []


def test_pipe_chain_and_bare_function():
    assert sexpr(value_of("x |> f(1) |> g")) == "((x |> f(1)) |> g())"
    assert sexpr(value_of("a + b |> data.norm(2)")) == "((a + b) |> data.norm(2))"


def test_empty_and_one_line_bodies():
    empty = value_of("compute(x) {\n}")
    assert empty.kernel is None and empty.body == []
    one = value_of("compute(x) { @kernel elementwise for i in 0..n: out[i] = x[i] }")
    assert one.kernel.kind == "elementwise"
    (loop,) = one.body
    assert isinstance(loop, ast.For) and isinstance(loop.body[0], ast.Assign)


def test_multiline_body_as_a_call_argument():
    call = value_of("foo(\n        a,\n        compute(x) {\n            @kernel elementwise\n"
                    "            out = x\n        }, 3)")
    assert [type(a).__name__ for a in call.args] == ["Name", "Compute", "IntLit"]


# ============================================================================ statements


def test_for_with_several_ranges_and_step():
    flash = [s.value for s in spec("kernel_attention.zyn").body][1]
    (outer,) = flash.body
    assert [(r.var, sexpr(r.lo), sexpr(r.hi), r.step) for r in outer.ranges] == [
        ("b", "0", "batch", None), ("h", "0", "heads", None)]
    (q_loop,) = outer.body
    (q_range,) = q_loop.ranges
    assert (q_range.var, sexpr(q_range.hi), sexpr(q_range.step)) == ("q_block", "seq_len", "64")
    kv_loop = q_loop.body[3]
    assert isinstance(kv_loop, ast.For) and kv_loop.ranges[0].step.value == 64
    rope = lets(spec("kernel_custom.zyn"))["rotated"]
    assert [r.var for r in rope.body[0].ranges] == ["b", "h", "s", "d"]
    assert sexpr(rope.body[0].ranges[3].hi) == "(head_dim / 2)"


def test_if_and_else():
    conv = [s.value for s in spec("kernel_convolution.zyn").body][0]
    ic_loop = conv.body[0].body[0].body[1]
    cond_if = ic_loop.body[0].body[2]
    assert isinstance(cond_if, ast.If) and cond_if.else_body == []
    assert sexpr(cond_if.cond) == "((((ih >= 0) and (ih < in_h)) and (iw >= 0)) and (iw < in_w))"
    stmt = prog("if a:\n    x = 1\nelse if b: x = 2\nelse:\n    x = 3\n    y = 4\n").body[0]
    assert sexpr(stmt.cond) == "a" and len(stmt.then_body) == 1
    (nested,) = stmt.else_body
    assert isinstance(nested, ast.If) and sexpr(nested.cond) == "b"
    assert [s.target.id for s in nested.else_body] == ["x", "y"]
    assert (nested.loc.line, nested.loc.col) == (3, 6)


def test_long_else_if_chain_is_not_limited_by_nesting():
    text = "if c0: x = 0\n" + "".join(f"else if c{i}: x = {i}\n" for i in range(1, 500))
    node = prog(text).body[0]
    depth = 0
    while node.else_body:
        node, depth = node.else_body[0], depth + 1
    assert depth == 499


def test_let_tuple_and_let_locations():
    program = spec("async.zyn")
    tup = [s for s in program.body if len(s.targets) == 2][0]
    assert tup.targets == ["result", "index"]
    assert [(l.line, l.col) for l in tup.target_locs] == [(34, 6), (34, 14)]
    assert isinstance(tup.value, ast.Await) and sexpr(tup.value.value) == "any(futures)"
    (pipeline,) = spec("transformer_block.zyn").pipelines
    split = pipeline.body[2]
    assert split.targets == ["q", "k", "v"]
    assert split.value.kwargs[0].name == "axis" and sexpr(split.value.kwargs[0].value) == "(- 1)"


def test_compound_assignment_on_out_and_names():
    text = "let r = compute(x) {\n    out += x\n    out[i, j] -= 1\n    s *= 2\n    t /= n\n}\n"
    body = prog(text).body[0].value.body
    assert [(type(s.target).__name__, s.op) for s in body] == [
        ("Name", "+"), ("Index", "-"), ("Name", "*"), ("Name", "/")]
    assert body[0].target.id == "out"


def test_var_is_a_keyword_only_at_statement_start():
    layer_norm = lets(spec("kernel_custom.zyn"))["normalized"]
    loop = layer_norm.body[0]
    var_decl = loop.body[3]
    assert isinstance(var_decl, ast.Var) and var_decl.name == "var"
    assert isinstance(var_decl.value, ast.FloatLit) and var_decl.value.value == 0.0
    inner = loop.body[4].body
    assert isinstance(inner[1], ast.Assign) and inner[1].target.id == "var" and inner[1].op == "+"
    var_div = loop.body[5]
    assert isinstance(var_div, ast.Assign) and var_div.target.id == "var" and var_div.op == "/"
    assert sexpr(loop.body[6].value) == "rsqrt((var + eps))"
    assert isinstance(prog("var x = 1\n").body[0], ast.Var)
    assert isinstance(prog("var(1)\n").body[0], ast.ExprStmt)
    assert prog("let var = 2\n").body[0].targets == ["var"]


def test_shared_var_and_barrier():
    (pipeline,) = spec("transformer_block.zyn").pipelines
    ffn = [s for s in pipeline.body if isinstance(s, ast.Let) and s.targets == ["ffn_out"]]
    loop = ffn[0].value.body[0]
    shared, up_loop, barrier, _ = loop.body
    assert isinstance(shared, ast.SharedVar) and shared.name == "up"
    assert [d.id for d in shared.dims] == ["ffn_hidden"]
    assert isinstance(barrier, ast.ExprStmt) and sexpr(barrier.value) == "barrier()"
    assert isinstance(prog("let shared = 1\n").body[0], ast.Let)


def test_yield_tuple_return_and_ellipsis():
    argmax = lets(spec("kernel_reduction.zyn"))["max_idx"]
    (yld,) = argmax.body[0].body
    assert isinstance(yld, ast.Yield) and isinstance(yld.value, ast.TupleExpr)
    assert sexpr(yld.value.elts[0]) == "data[i]"
    (pipeline,) = spec("transformer_block.zyn").pipelines
    ret = pipeline.body[-1]
    assert isinstance(ret, ast.Return) and ret.value.id == "output"
    assert prog("pipeline p():\n    return\n").pipelines[0].body[0].value is None
    assert isinstance(prog("...\n").body[0], ast.Ellipsis_)


def test_pipeline_signature():
    (pipeline,) = spec("transformer_block.zyn").pipelines
    assert pipeline.name == "transformer_block"
    x, layer = pipeline.params
    assert x.name == "x" and x.type.name == "tensor"
    assert [d.id for d in x.type.dims] == ["batch", "seq", "hidden"]
    assert layer.name == "layer" and layer.type.name == "int" and layer.type.dims is None
    assert pipeline.result.name == "tensor" and len(pipeline.result.dims) == 3
    assert sexpr(pipeline.body[0].value) == "model.layers[layer]"
    p = prog("pipeline f(a, b: f32, c: tensor[4, n * 2]):\n    return a\n").pipelines[0]
    assert [(q.name, q.type and q.type.name) for q in p.params] == [
        ("a", None), ("b", "f32"), ("c", "tensor")]
    assert p.result is None and sexpr(p.params[2].type.dims[1]) == "(n * 2)"


def test_a_dynamic_size_in_a_parameter_type():
    """`tensor[?seq, d]`: `seq` is a dimension like any, and listed as dynamic."""
    p = prog("pipeline f(x: tensor[?seq, d, ?n]):\n    return x\n").pipelines[0]
    dims = p.params[0].type.dims
    assert [d.id for d in dims] == ["seq", "d", "n"]
    assert p.params[0].type.dynamic == [dims[0], dims[2]]
    assert (dims[0].loc.line, dims[0].loc.col) == (1, 23)
    with pytest.raises(ZynMLError, match="1:23: error: expected a size name after '\\?'"):
        prog("pipeline f(x: tensor[?4, d]):\n    return x\n")
    with pytest.raises(ZynMLError, match="expected a dimension, found ']'"):
        prog("pipeline f(x: tensor[]):\n    return x\n")


def test_config_entries():
    (config,) = spec("device_management.zyn").configs
    (entry,) = config.entries
    assert entry.key == "compute_device" and entry.value.value == "cuda:0"
    inline = prog('config { device: "cpu", threads: 4 }\n').configs[0]
    assert [(e.key, e.value.value) for e in inline.entries] == [("device", "cpu"), ("threads", 4)]
    multi = prog("config {\n    a: 1\n    b: 2, c: true\n}\n").configs[0]
    assert [e.key for e in multi.entries] == ["a", "b", "c"]


def test_empty_and_comment_only_programs():
    for text in ["", "\n\n", "// only a comment\n   // another\n"]:
        program = prog(text)
        assert (program.body, program.pipelines, program.configs) == ([], [], [])


def test_top_level_expression_statements():
    body = spec("memory.zyn").body
    free, reset = body[-2:]
    assert isinstance(free, ast.ExprStmt) and sexpr(free.value) == "pool.free(tensor1)"
    assert sexpr(reset.value) == "pool.reset()"


# ============================================================================ expressions


@pytest.mark.parametrize("text, expected", [
    ("a + b * c - d", "((a + (b * c)) - d)"),
    ("a * b / c % d", "(((a * b) / c) % d)"),
    ("a @ b + c", "((a @ b) + c)"),
    ("-x ^ 2", "(- (x ^ 2))"),
    ("a ^ b ^ c", "(a ^ (b ^ c))"),
    ("2 ^ -1", "(2 ^ (- 1))"),
    ("- -x", "(- (- x))"),
    ("not a == b and c or d", "(((not (a == b)) and c) or d)"),
    ("a or b and not c", "(a or (b and (not c)))"),
    ("a < b + 1", "(a < (b + 1))"),
    ("-inf", "(- inf)"),
    ("(a + b) * c", "((a + b) * c)"),
    ("f(x)[i].y", "f(x)[i].y"),
    ("exp(m - m_new) * o + exp(S - m_new) @ V_block",
     "((exp((m - m_new)) * o) + (exp((S - m_new)) @ V_block))"),
    ("Q[b, h, q_block:q_block+64] @ transpose(K_block) / sqrt(head_dim)",
     "((Q[b, h, q_block:(q_block + 64)] @ transpose(K_block)) / sqrt(head_dim))"),
])
def test_precedence(text, expected):
    assert sexpr(value_of(text)) == expected


def test_literals():
    assert value_of("inf").value == math.inf
    assert isinstance(value_of("1e-6"), ast.FloatLit) and value_of("1e-6").value == 1e-6
    assert isinstance(value_of("42"), ast.IntLit) and value_of("42").value == 42
    assert value_of("true").value is True and value_of("false").value is False
    assert value_of('"cuda:0"').value == "cuda:0"
    for text, number, unit in [("1000ms", 1000.0, "ms"), ("5s", 5.0, "s"), ("1GB", 1.0, "GB"),
                               ("512MB", 512.0, "MB")]:
        lit = value_of(text)
        assert isinstance(lit, ast.UnitLit) and (lit.value, lit.unit) == (number, unit)


def test_unit_literal_in_spec():
    pool = lets(spec("memory.zyn"))["pool"]
    size = pool.kwargs[1]
    assert size.name == "size" and isinstance(size.value, ast.UnitLit)
    assert (size.value.value, size.value.unit) == (1.0, "GB")


def test_slices():
    (index,) = [value_of("x[a:b, :, c:, :d, e]")]
    kinds = [(type(i).__name__, i.lo and sexpr(i.lo), i.hi and sexpr(i.hi))
             if isinstance(i, ast.Slice) else (type(i).__name__, sexpr(i), None)
             for i in index.indices]
    assert kinds == [("Slice", "a", "b"), ("Slice", None, None), ("Slice", "c", None),
                     ("Slice", None, "d"), ("Name", "e", None)]
    flash = [s.value for s in spec("kernel_attention.zyn").body][1]
    store = flash.body[0].body[0].body[-1]
    assert sexpr(store.target) == "out[b, h, q_block:(q_block + 64)]"


def test_method_calls_and_keywords():
    program = lets(spec("memory.zyn"))
    view = program["gpu_view"]
    assert isinstance(view.func, ast.Attribute) and view.func.name == "to_device"
    assert view.func.base.id == "data"
    assert [a.value for a in view.args] == ["cuda:0"]
    assert [(k.name, k.value.value) for k in view.kwargs] == [("copy", False)]
    alloc = program["gpu_tensor"]
    assert [k.name for k in alloc.kwargs] == ["shape", "dtype", "device"]
    assert [e.value for e in alloc.kwargs[0].value.elts] == [1024, 1024]


def test_await_with_timeout_and_default():
    result = lets(spec("async.zyn"))["result"]
    assert isinstance(result, ast.Await) and result.value.id == "future"
    assert isinstance(result.timeout, ast.UnitLit) and result.timeout.unit == "ms"
    assert result.default.id == "default_value"
    assert value_of("await f timeout 5s").default is None
    assert sexpr(value_of("await x |> f()")) == "((await x) |> f())"
    assert isinstance(value_of("await a or b").value, ast.Binary)


def test_tuples_and_lists():
    assert [sexpr(e) for e in value_of("(a, b + 1)").elts] == ["a", "(b + 1)"]
    assert isinstance(value_of("(a,)"), ast.TupleExpr)
    assert isinstance(value_of("(a)"), ast.Name)
    assert value_of("[]").elts == []
    assert len(value_of("[\n  1,\n  2,\n]").elts) == 2


def test_expression_locations():
    e = value_of("a + f(b)[c].d")  # `let v = ` is 8 columns
    assert (e.loc.line, e.loc.col) == (1, 11)  # the operator
    attr = e.right
    assert (attr.loc.col, attr.base.loc.col, attr.base.base.loc.col) == (21, 17, 13)


# ============================================================================ errors


def test_error_unexpected_token():
    err = syntax_error("let x = 1\nlet y = 2 +* 3\n")
    assert str(err).startswith("t.zyn:2:12: error: expected an expression, found '*'")
    err = syntax_error("let = 5\n")
    assert str(err).startswith("t.zyn:1:5: error: expected a name or '(' after 'let', found '='")


def test_error_unterminated_string():
    err = syntax_error('let a = 1\nlet d = data.to_device("cuda:0)\n')
    assert str(err).startswith("t.zyn:2:24: error: unterminated string literal")
    assert len(err.errors) == 1


def test_error_bad_indentation():
    err = syntax_error("pipeline p(x: int) -> int:\n        let a = 1\n    let b = 2\n"
                       "    return b\n")
    assert str(err).startswith(
        "t.zyn:3:5: error: unindent does not match any outer indentation level")
    assert len(err.errors) == 1


def test_error_missing_closing_brace():
    text = ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
            "        out[i] = x[i]\nlet z = 1\n")
    err = syntax_error(text)
    assert str(err).startswith(
        "t.zyn:5:1: error: expected '}' to close the '{' at 1:20, found 'let'")
    assert len(err.errors) == 1
    err = syntax_error("let y = compute(x) {\n    @kernel elementwise\n    out = x\n")
    assert str(err).startswith("t.zyn:1:20: error: '{' was never closed")


def test_error_missing_colon_after_for():
    err = syntax_error("let y = compute(x) {\n    for i in 0..n\n        out[i] = x[i]\n}\n")
    assert str(err).startswith(
        "t.zyn:2:18: error: expected ':' after the loop ranges, found end of line")
    assert len(err.errors) == 1  # the indented body is skipped with the broken `for`


def test_two_independent_errors_in_one_kernel():
    text = ("let y = compute(x) {\n"
            "    @kernel elementwise\n"
            "    for i in 0..n:\n"
            "        let a = x[i] +\n"
            "        out[i] = * 2\n"
            "        out[i] = a\n"
            "}\n"
            "let ok = 1\n")
    err = syntax_error(text)
    assert len(err.errors) == 2
    assert [where(d) for d in err.errors] == [(4, 23), (5, 18)]
    assert str(err).startswith("t.zyn:4:23: error: expected an expression, found end of line")
    assert "t.zyn:5:18: error: expected an expression, found '*'" in str(err)


def test_errors_in_separate_statements_and_pipelines():
    text = ("let a = (1\n"
            "let b = 2\n"
            "pipeline p(x: int) -> int:\n"
            "    let c = x x\n"
            "    return c\n"
            "let d = compute(x) { @kernel }\n")
    err = syntax_error(text)
    assert [(where(d), d.message) for d in err.errors] == [
        ((1, 9), "'(' was never closed"),
        ((4, 15), "expected the end of the statement, found name 'x'"),
        ((6, 30), "expected the kernel kind after '@kernel', found '}'"),
    ]


@pytest.mark.parametrize("text, expected", [
    ("let a = x < y < z\n", "t.zyn:1:15: error: comparisons cannot be chained"),
    ("let y = compute(x) {\n    out = x\n    @kernel elementwise\n}\n",
     "t.zyn:3:5: error: annotations must come before the statements"),
    ("pipeline p():\n    pipeline q():\n        return 1\n",
     "t.zyn:2:5: error: 'pipeline' is only allowed at the top level"),
    ("f(x) = 3\n", "t.zyn:1:1: error: cannot assign to this expression"),
    ("let y = compute(x) @kernel matmul { ... }\n", "t.zyn:1:20: error: '@kernel' goes inside"),
    ("let y = compute(x) {\n    @kernel a\n    @kernel b\n}\n",
     "t.zyn:3:5: error: a second '@kernel' (the first is at 2:5)"),
    ("else: x = 1\n", "t.zyn:1:1: error: 'else' without a matching 'if'"),
    ("    let a = 1\n", "t.zyn:1:5: error: unexpected indentation"),
    ("let a = f(x, k=1, y)\n", "t.zyn:1:19: error: positional argument after a keyword"),
    ("let a = b |> 3\n", "t.zyn:1:14: error: the right side of '|>' must be a function call"),
    ("let a = 1 + await b\n", "t.zyn:1:13: error: 'await' must be parenthesized"),
    ("let a = b == not c\n", "t.zyn:1:14: error: 'not' must be parenthesized here"),
    ("for i in 0 to n:\n    x = 1\n", "t.zyn:1:12: error: expected '..' between the bounds"),
    ("let a = [1, 2\n", "t.zyn:1:9: error: '[' was never closed"),
    ("let a = x[]\n", "t.zyn:1:11: error: expected an index, found ']'"),
    ("let a = (1, 2]\n", "t.zyn:1:14: error: expected ')' to close the '(' at 1:9, found ']'"),
    ("shared var s\n", "t.zyn:1:13: error: expected '[' and the sizes of the shared array"),
    ("for i in 0..n: for j in 0..n: x = 1\n", "t.zyn:1:16: error: 'for' needs its own line"),
])
def test_error_messages(text, expected):
    assert str(syntax_error(text)).startswith(expected)


def test_error_in_block_header_does_not_cascade():
    text = ("pipeline p(x: int) -> int:\n"
            "    if x > :\n"
            "        let a = 1\n"
            "    else:\n"
            "        let a = 2\n"
            "    let y = compute(x) $ {\n"
            "        @kernel elementwise\n"
            "        out = x\n"
            "    } |> sqrt()\n"
            "    return y\n")
    err = syntax_error(text)
    assert [where(d) for d in err.errors] == [(2, 12), (6, 24)]


MATMUL = """let c = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += a[i, k] * b[k, j]
            sum += 1.0
        out[i, j] = sum
}
let d = 1
"""


def replace_line(text: str, number: int, new: str) -> str:
    lines = text.split("\n")
    lines[number - 1] = new
    return "\n".join(lines)


@pytest.mark.parametrize("number, new, expected", [
    # a body line moved to column 0: first of its block, inside it, last of the kernel
    (6, "sum += a[i, k] * b[k, j]", (6, 1, "expected an indented block")),
    (7, "sum += 1.0", (7, 1, "this line is less indented than the lines around it")),
    (8, "out[i, j] = sum", (8, 1, "expected '}' to close the '{' at 1:23")),
    # two spaces short: inside a block, at its end
    (7, "          sum += 1.0", (7, 11, "unindent does not match any outer indentation level")),
    (8, "      out[i, j] = sum", (8, 7, "unindent does not match any outer indentation level")),
    # a loop body left at the loop's own indentation
    (6, "        sum += a[i, k] * b[k, j]", (6, 9, "expected an indented block")),
    # a '}' deeper than the '{' line
    (9, "    }", (9, 5, "'}' closing a multi-line block must start its own line")),
])
def test_one_misplaced_line_is_one_error(number, new, expected):
    """Indentation recovery: one wrong line gives one error, not a cascade."""
    err = syntax_error(replace_line(MATMUL, number, new))
    assert [(d.loc.line, d.loc.col) for d in err.errors] == [expected[:2]]
    assert err.errors[0].message.startswith(expected[2])


@pytest.mark.parametrize("text, expected", [
    ("let fs = [\n    compute(a) @async { ...,\n    compute(b) @async { ... },\n]\nlet z = 1\n",
     (2, 28, "expected '}' to close the '{' at 2:23, found ','")),
    ("@kernel matmul\n@workgroup(16)\n@shared(4)\nlet x = 1\n",
     (1, 1, "annotations are only allowed before the statements of a compute body")),
    ("let y = compute(x) { @kernel elementwise\n    out = x\n}\nlet z = 1\n",
     (1, 41, "a multi-line body must start on the line after '{'")),
    ("let y = compute(x) {\n    out = foo(x,\n}\nlet z = (1 +\n", (2, 14, "'(' was never closed")),
])
def test_recovery_without_cascades(text, expected):
    err = syntax_error(text)
    assert [(d.loc.line, d.loc.col, d.message) for d in err.errors][:1] == [expected]
    assert len(err.errors) == (2 if "z = (1" in text else 1)


def test_error_rendering_has_source_line_and_caret():
    err = syntax_error("let a = 1\nlet b = 2 +\n")
    assert str(err).splitlines()[:3] == [
        "t.zyn:2:12: error: expected an expression, found end of line",
        "let b = 2 +",
        "           ^",
    ]


def test_too_deep_nesting_is_a_located_error():
    err = syntax_error("let x = " + "(" * 300 + "1" + ")" * 300 + "\n")
    assert "nesting too deep" in err.message
    assert err.loc.line == 1
    ok = prog("let x = " + "(" * 150 + "1" + ")" * 150 + "\n")
    assert isinstance(ok.body[0].value, ast.IntLit)
