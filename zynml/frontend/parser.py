"""ZynML parser: tokens -> ast.Program, by recursive descent (statements) and precedence
climbing (expressions).

Grammar sketch (NEWLINE/INDENT/DEDENT come from the lexer, see lexer.py):

    program    := (use | pipeline | config | statement)*
    use        := 'use' NAME ('.' NAME)*            (`use` is a soft keyword here only)
    pipeline   := 'pipeline' NAME '(' [param (',' param)*] ')' ['->' type] ':' suite
    config     := 'config' '{' (NEWLINE INDENT entries DEDENT | entries) '}'
    statement  := let | var | shared | for | if | yield | return | '...' | assign | expr
    for        := 'for' range (',' range)* ':' suite
    range      := NAME 'in' expr '..' expr ['step' expr]
    if         := 'if' expr ':' suite ['else' (':' suite | if)]
    suite      := NEWLINE INDENT statement+ DEDENT | simple_statement
    compute    := 'compute' '(' args ')' annotation* '{' body '}'
    body       := NEWLINE INDENT annotation_line* statement* DEDENT   (multi-line)
                | annotation* [statement]                             (one line)

Expression precedence, lowest first: `|>`, `await`, `or`, `and`, `not`, comparisons
(non-associative), `+ -`, `* / % @`, unary `-`, `^` (right-associative), postfix
(call, index, attribute).

Error handling: an error inside a statement is reported (DiagnosticSink, through the
lexer's Reporter: one error per line) and parsing resumes at the next statement of the
same block, so one run reports independent mistakes without cascades. All errors are
raised together at the end as one ZynMLError. Nesting deeper than MAX_NESTING stops the
parse with "nesting too deep": no input can make the parser raise anything but ZynMLError.

Node locations: literals and names at their token; Unary/Binary/Pipe at the operator;
Call at its callee (Attribute at the attribute name); Index/List/Tuple at the opening
bracket; statements at their first token; Annotation/KernelSpec at the `@`.
"""
from __future__ import annotations

import sys
from typing import Callable, NoReturn, Optional

from . import ast
from ..errors import SourceFile, SourceLocation, ZynMLError
from .lexer import Reporter, Token, lex

__all__ = ["parse", "MAX_NESTING"]

# Nested brackets + nested blocks + chained prefix operators one parse may hold. Like
# CPython's limit of 200 nested parentheses; far above anything a real program writes.
MAX_NESTING = 200
# Python frames one nesting level may use (measured with the deepest paths, e.g.
# `-(-(...))`, plus margin); parse() makes sure this much recursion is available.
_FRAMES_PER_LEVEL = 12

# Binding strength, loosest first (`|>` and `await` sit below these, in parse_expr).
_NOT_PRECEDENCE = 3  # prefix `not`: its operand includes comparisons
_COMPARISON_PRECEDENCE = 4
_UNARY_PRECEDENCE = 7  # prefix `-`: tighter than `*`, looser than `^` (-x^2 == -(x^2))
_BINARY_PRECEDENCE = {
    "or": 1, "and": 2,
    "==": _COMPARISON_PRECEDENCE, "!=": _COMPARISON_PRECEDENCE, "<": _COMPARISON_PRECEDENCE,
    "<=": _COMPARISON_PRECEDENCE, ">": _COMPARISON_PRECEDENCE, ">=": _COMPARISON_PRECEDENCE,
    "+": 5, "-": 5,
    "*": 6, "/": 6, "%": 6, "@": 6,
    "^": 8,
}

_ASSIGN_OPS = {"=": None, "+=": "+", "-=": "-", "*=": "*", "/=": "/"}
# Operator tokens that stand for themselves as the first argument of `reduce(...)`.
_REDUCE_OPERATOR_TOKENS = frozenset({"+", "-", "*", "/", "%", "^", "@", "and", "or"})
# Names taken as a reduction operator in the builtin `reduce(max, logits)`. In
# `@kernel reduce(...)` any bare name is (the checker reports an unknown one).
_REDUCE_OPERATOR_NAMES = frozenset({"max", "min", "argmax", "argmin"})
_STATEMENT_END = frozenset({"NEWLINE", "EOF"})
_LAYOUT = frozenset({"NEWLINE", "INDENT", "DEDENT", "EOF"})


class _ParseError(Exception):
    """Unwinds to the nearest statement boundary (already reported)."""


class _FatalParseError(Exception):
    """Stops the whole parse (nesting too deep, too many errors)."""


def parse(src: SourceFile) -> ast.Program:
    """Parse a ZynML source file. Raises ZynMLError carrying every syntax error found.

    The descent uses up to ~7 Python frames per nesting level, so MAX_NESTING levels need
    more than the default recursion limit of 1000 when the caller is itself deep (pytest
    is). The limit is raised for the duration of the parse; on Python 3.11 Python-to-Python
    calls do not grow the C stack, so this is safe.
    """
    reporter = Reporter()
    parser = Parser(src, lex(src, reporter), reporter)
    old_limit = sys.getrecursionlimit()
    needed = _stack_depth() + MAX_NESTING * _FRAMES_PER_LEVEL + 100
    try:
        if needed > old_limit:
            sys.setrecursionlimit(needed)
        program = parser.parse_program()
    except _FatalParseError:
        program = None
    except RecursionError:  # a backstop only: MAX_NESTING should always trigger first
        reporter.error("nesting too deep", parser.tok.loc)
        program = None
    finally:
        if needed > old_limit:
            sys.setrecursionlimit(old_limit)
    reporter.raise_if_any()
    if program is None:  # fatal without a reported error: cannot happen, but stay safe
        raise ZynMLError("could not parse the program", parser.tok.loc)
    return program


def _stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


class Parser:
    def __init__(self, src: SourceFile, tokens: list[Token], reporter: Reporter):
        self.src = src
        self.tokens = tokens
        self.reporter = reporter
        self.pos = 0
        self.tok = tokens[0]
        self.depth = 0
        # The `{` of the one-line body `{ ... }` being parsed, if any: there `}` also ends
        # a statement.
        self.inline_brace: Optional[Token] = None

    # ================================================================== token helpers

    @property
    def kind(self) -> str:
        return self.tok.kind

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tok
        if self.pos < len(self.tokens) - 1:
            self.pos += 1
            self.tok = self.tokens[self.pos]
        return tok

    def accept(self, kind: str) -> Optional[Token]:
        return self.advance() if self.tok.kind == kind else None

    def expect(self, kind: str, message: str) -> Token:
        """Consume a `kind` token, or fail with `message, found <token>`."""
        if self.tok.kind != kind:
            self.fail(f"{message}, found {self.tok.describe()}")
        return self.advance()

    def is_name(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead) if ahead else self.tok
        return tok.kind == "NAME" and tok.text == text

    # ================================================================== errors

    def report(self, message: str, loc: SourceLocation) -> None:
        """Record an error and carry on (the tree stays usable)."""
        self.reporter.error(message, loc)
        if self.reporter.full:
            raise _FatalParseError

    def fail(self, message: str, loc: Optional[SourceLocation] = None) -> NoReturn:
        """Report an error at the current token (or `loc`) and abandon the statement."""
        self.report(message, loc or self.tok.loc)
        raise _ParseError

    def enter(self) -> None:
        """Count one level of nesting; paired with `self.depth -= 1` in a finally."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.reporter.error(f"nesting too deep (more than {MAX_NESTING} levels)",
                                self.tok.loc)
            raise _FatalParseError

    def synchronize(self) -> None:
        """Skip the rest of a broken statement, including the indented blocks that belong
        to it (a `for` body, a multi-line `{ }` body and what follows its `}`), and stop
        before the next statement of the current block."""
        depth = 0  # INDENTs entered while skipping
        while True:
            kind = self.kind
            if kind == "EOF" or (kind == "DEDENT" and depth == 0):
                return
            self.advance()
            if kind == "INDENT":
                depth += 1
            elif kind == "DEDENT":
                depth -= 1
                if depth == 0 and not self.continues_statement():
                    return
            elif kind == "NEWLINE" and depth == 0 and not self.continues_statement():
                return

    def continues_statement(self) -> bool:
        """After a line or block of a broken statement: is this still part of it? (its
        indented block, an `else`, the `}` closing its multi-line `{` body; and annotation
        lines, so a run of misplaced ones is reported once)"""
        return self.kind in ("INDENT", "else", "}", "@")

    def block_items(self, parse_item: Callable[[], None]) -> None:
        """Parse items of an indented block (INDENT consumed) up to and including its
        DEDENT, resuming after each broken item."""
        while self.kind not in ("DEDENT", "EOF"):
            try:
                parse_item()
            except _ParseError:
                self.synchronize()
        self.accept("DEDENT")

    # ================================================================== program level

    def parse_program(self) -> ast.Program:
        program = ast.Program(SourceLocation(self.src, 1, 1), [], [], [])
        while self.kind != "EOF":
            try:
                if self.kind == "pipeline":
                    program.pipelines.append(self.parse_pipeline())
                elif self.kind == "config":
                    program.configs.append(self.parse_config())
                elif self.is_name("use") and self.peek().kind == "NAME":
                    program.uses.append(self.parse_use())
                elif self.kind == "DEDENT":  # unreachable with a balanced lexer
                    self.advance()
                else:
                    program.body.append(self.parse_statement())
            except _ParseError:
                self.synchronize()
        return program

    def parse_use(self) -> ast.Use:
        """`use kernels.swiglu`: a library kernel's pipelines join the program's."""
        kw = self.advance()
        parts = [self.expect("NAME", "expected a library name after 'use'")]
        while self.accept("."):
            parts.append(self.expect("NAME", "expected a name after '.'"))
        self.end_statement()
        return ast.Use(kw.loc, [part.text for part in parts])

    def parse_pipeline(self) -> ast.Pipeline:
        kw = self.advance()
        name = self.expect("NAME", "expected the pipeline's name after 'pipeline'")
        opener = self.expect("(", "expected '(' and the parameters after the pipeline name")
        params: list[ast.Param] = []
        while not self.at_list_end(")"):
            pname = self.expect("NAME", "expected a parameter name")
            ptype = self.parse_type() if self.accept(":") else None
            params.append(ast.Param(pname.loc, pname.text, ptype))
            if not self.accept(","):
                break
        self.expect_closer(")", opener)
        result = self.parse_type() if self.accept("->") else None
        self.expect(":", "expected ':' after the pipeline signature")
        return ast.Pipeline(kw.loc, name.text, params, result, self.parse_suite())

    def parse_type(self) -> ast.TypeExpr:
        """`tensor[batch, seq, hidden]`, `int`, `f32`, a record name, ..."""
        name = self.expect("NAME", "expected a type")
        if self.kind != "[":
            return ast.TypeExpr(name.loc, name.text)
        opener = self.advance()
        dims, dynamic = [], []
        if self.kind == "]":
            self.fail("expected a dimension, found ']'")
        while not self.at_list_end("]"):
            if self.accept("?"):  # `?seq`: a size compiled dynamic (docs/language.md §4)
                size = self.expect("NAME", "expected a size name after '?'")
                dynamic.append(ast.Name(size.loc, size.text))
                dims.append(dynamic[-1])
            else:
                dims.append(self.parse_expr())
            if not self.accept(","):
                break
        self.expect_closer("]", opener)
        return ast.TypeExpr(name.loc, name.text, dims, dynamic)

    def parse_config(self) -> ast.Config:
        """`config { key: value }`: entries one per line in an indented block, or on one
        line separated by commas."""
        kw = self.advance()
        opener = self.expect("{", "expected '{' after 'config'")
        entries: list[ast.ConfigEntry] = []
        if self.accept("NEWLINE"):
            if self.kind != "}":
                self.expect("INDENT", "expected indented 'key: value' lines")
                self.block_items(lambda: self.parse_config_line(entries))
        else:
            while self.kind == "NAME":
                entries.append(self.parse_config_entry())
                if not self.accept(","):
                    break
        self.expect_closer("}", opener)
        self.end_statement()
        return ast.Config(kw.loc, entries)

    def parse_config_line(self, entries: list[ast.ConfigEntry]) -> None:
        entries.append(self.parse_config_entry())
        while self.accept(",") and self.kind == "NAME":
            entries.append(self.parse_config_entry())
        self.end_statement()

    def parse_config_entry(self) -> ast.ConfigEntry:
        key = self.expect("NAME", "expected a configuration key")
        self.expect(":", "expected ':' after the configuration key")
        return ast.ConfigEntry(key.loc, key.text, self.parse_expr())

    # ================================================================== statements

    def parse_statement(self) -> ast.Stmt:
        kind = self.kind
        if kind in ("for", "if"):
            return self.parse_for() if kind == "for" else self.parse_if()
        if kind in ("pipeline", "config"):
            self.fail(f"'{kind}' is only allowed at the top level of a program")
        if kind == "INDENT":
            self.fail("unexpected indentation")
        if kind == "else":
            self.fail("'else' without a matching 'if'")
        if kind == "@":
            self.fail("annotations are only allowed before the statements of a compute body")
        return self.parse_simple_statement()

    def parse_simple_statement(self) -> ast.Stmt:
        """A one-line statement, including its end (NEWLINE, or `}` in a one-line body)."""
        tok = self.tok
        if tok.kind == "let":
            stmt = self.parse_let()
        elif tok.kind == "yield":
            self.advance()
            stmt = ast.Yield(tok.loc, self.parse_expr())
        elif tok.kind == "return":
            self.advance()
            stmt = ast.Return(tok.loc, None if self.at_statement_end() else self.parse_expr())
        elif tok.kind == "...":
            self.advance()
            stmt = ast.Ellipsis_(tok.loc)
        elif self.is_name("var") and self.peek().kind == "NAME":
            stmt = self.parse_var()
        elif self.is_name("shared") and self.is_name("var", 1):
            stmt = self.parse_shared_var()
        elif tok.kind in ("for", "if", "pipeline", "config"):
            self.fail(f"'{tok.kind}' needs its own line here")
        else:
            stmt = self.parse_assign_or_expr()
        self.end_statement()
        return stmt

    def at_statement_end(self) -> bool:
        return self.kind in _STATEMENT_END or (self.kind == "}" and self.inline_brace is not None)

    def end_statement(self) -> None:
        if self.kind == "NEWLINE":
            self.advance()
        elif self.inline_brace is not None:
            if self.kind != "}":
                self.expect_closer("}", self.inline_brace)
        elif self.kind != "EOF":
            self.fail(f"expected the end of the statement, found {self.tok.describe()}")

    def parse_let(self) -> ast.Let:
        """`let name = e` or `let (a, b, c) = e`."""
        kw = self.advance()
        names: list[Token] = []
        if self.kind == "(":
            opener = self.advance()
            while True:
                names.append(self.expect("NAME", "expected a name to bind"))
                if not self.accept(",") or self.kind == ")":
                    break
            self.expect_closer(")", opener)
        else:
            names.append(self.expect("NAME", "expected a name or '(' after 'let'"))
        self.expect("=", "expected '=' after the names bound by 'let'")
        value = self.parse_expr()
        return ast.Let(kw.loc, [n.text for n in names], value, [n.loc for n in names])

    def parse_var(self) -> ast.Var:
        kw = self.advance()
        name = self.advance()
        self.expect("=", f"expected '=' after 'var {name.text}'")
        return ast.Var(kw.loc, name.text, self.parse_expr())

    def parse_shared_var(self) -> ast.SharedVar:
        """`shared var name[size, ...]`."""
        kw = self.advance()
        self.advance()  # `var`
        name = self.expect("NAME", "expected a name after 'shared var'")
        opener = self.expect("[", "expected '[' and the sizes of the shared array")
        dims = self.parse_expr_list("]", "expected a size")
        self.expect_closer("]", opener)
        return ast.SharedVar(kw.loc, name.text, dims)

    def parse_assign_or_expr(self) -> ast.Stmt:
        start = self.tok
        target = self.parse_expr()
        if self.kind not in _ASSIGN_OPS:
            return ast.ExprStmt(start.loc, target)
        op = self.advance()
        if not isinstance(target, (ast.Name, ast.Index)):
            self.report("cannot assign to this expression (only to a name or an indexed "
                        "element)", target.loc)
        return ast.Assign(start.loc, target, _ASSIGN_OPS[op.kind], self.parse_expr())

    def parse_for(self) -> ast.For:
        kw = self.advance()
        ranges = [self.parse_range()]
        while self.accept(","):
            ranges.append(self.parse_range())
        self.expect(":", "expected ':' after the loop ranges")
        return ast.For(kw.loc, ranges, self.parse_suite())

    def parse_range(self) -> ast.Range:
        """`i in lo..hi [step s]` (`step` is a keyword only here)."""
        var = self.expect("NAME", "expected a loop variable")
        self.expect("in", f"expected 'in' after the loop variable '{var.text}'")
        lo = self.parse_expr()
        self.expect("..", "expected '..' between the bounds of the range")
        hi = self.parse_expr()
        step = None
        if self.is_name("step"):
            self.advance()
            step = self.parse_expr()
        return ast.Range(var.loc, var.text, lo, hi, step)

    def parse_if(self) -> ast.If:
        """`if c: ... else if d: ... else: ...`; the `else if` chain is built iteratively
        (each one nests an If in the previous else_body) so its length is not limited."""
        kw = self.advance()
        root = node = ast.If(kw.loc, self.parse_condition(), self.parse_suite())
        while self.kind == "else":
            self.advance()
            if self.kind == "if":
                kw = self.advance()
                nested = ast.If(kw.loc, self.parse_condition(), self.parse_suite())
                node.else_body = [nested]
                node = nested
            else:
                self.expect(":", "expected ':' or 'if' after 'else'")
                node.else_body = self.parse_suite()
                break
        return root

    def parse_condition(self) -> ast.Expr:
        cond = self.parse_expr()
        self.expect(":", "expected ':' after the condition")
        return cond

    def parse_suite(self) -> list[ast.Stmt]:
        """The body after `:`: an indented block, or one simple statement on the line."""
        if self.kind != "NEWLINE":
            return [self.parse_simple_statement()]
        self.advance()
        self.expect("INDENT", "expected an indented block")
        body: list[ast.Stmt] = []
        self.enter()
        saved, self.inline_brace = self.inline_brace, None
        try:
            self.block_items(lambda: body.append(self.parse_statement()))
        finally:
            self.depth -= 1
            self.inline_brace = saved
        return body

    # ================================================================== compute

    def parse_compute(self) -> ast.Compute:
        """`compute(inputs) @outer... { @kernel K; @annotations; body }`."""
        kw = self.advance()
        mutable: list[bool] = []
        inputs, kwargs = self.parse_arguments(self.expect("(", "expected '(' after 'compute'"),
                                              mutable=mutable)
        if kwargs:
            self.report("compute inputs cannot be keyword arguments", kwargs[0].loc)
        outer: list[ast.Annotation] = []
        while self.kind == "@":
            ann = self.parse_annotation()
            if isinstance(ann, ast.KernelSpec):
                self.report("'@kernel' goes inside the compute body", ann.loc)
            else:
                outer.append(ann)
        opener = self.expect("{", "expected '{' to start the compute body")
        body = _ComputeBody(self)
        if self.accept("NEWLINE"):
            self.parse_compute_block(body)
        else:
            self.parse_compute_line(body, opener)
        self.expect_closer("}", opener)
        elided = len(body.stmts) == 1 and isinstance(body.stmts[0], ast.Ellipsis_)
        return ast.Compute(kw.loc, inputs, outer, body.kernel, body.inner, body.stmts, elided,
                           mutable)

    def parse_compute_block(self, body: "_ComputeBody") -> None:
        """Multi-line body: annotation lines first, then statements, in an indented block."""
        if self.kind == "}":
            return
        self.expect("INDENT", "expected an indented compute body")
        self.enter()
        saved, self.inline_brace = self.inline_brace, None
        try:
            self.block_items(body.parse_line)
        finally:
            self.depth -= 1
            self.inline_brace = saved

    def parse_compute_line(self, body: "_ComputeBody", opener: Token) -> None:
        """One-line body `{ [annotations] [statement] }`, e.g. `{ ... }`."""
        saved, self.inline_brace = self.inline_brace, opener
        try:
            while self.kind == "@":
                body.add(self.parse_annotation())
            if self.kind == "NEWLINE" and self.peek().kind == "INDENT":
                self.fail("a multi-line body must start on the line after '{'")
            if self.kind != "}":
                body.stmts.append(self.parse_statement())
        finally:
            self.inline_brace = saved

    def parse_annotation(self) -> ast.Annotation | ast.KernelSpec:
        """`@name`, `@name(args)`, or `@kernel KIND` / `@kernel KIND(params)`."""
        at = self.advance()
        name = self.expect("NAME", "expected an annotation name after '@'")
        if name.text != "kernel":
            args, kwargs = self.parse_arguments(self.advance()) if self.kind == "(" else ([], [])
            return ast.Annotation(at.loc, name.text, args, kwargs)
        kind = self.expect("NAME", "expected the kernel kind after '@kernel'")
        args, kwargs = [], []
        if self.kind == "(":
            mode = "kernel" if kind.text == "reduce" else None
            args, kwargs = self.parse_arguments(self.advance(), reduce_mode=mode)
        return ast.KernelSpec(at.loc, kind.text, args, kwargs)

    # ================================================================== expressions

    def parse_expr(self) -> ast.Expr:
        """Full expression: `await` and `|>` (the two lowest levels) over parse_binary."""
        self.enter()
        try:
            value = self.parse_await() if self.kind == "await" else self.parse_binary(0)
            while self.kind == "|>":
                value = self.parse_pipe_step(value)
            return value
        finally:
            self.depth -= 1

    def parse_await(self) -> ast.Await:
        """`await e [timeout t [else d]]` (`timeout` is a keyword only here)."""
        kw = self.advance()
        value = self.parse_expr_no_pipe()
        timeout = default = None
        if self.is_name("timeout"):
            self.advance()
            timeout = self.parse_binary(0)
            if self.accept("else"):
                default = self.parse_binary(0)
        return ast.Await(kw.loc, value, timeout, default)

    def parse_expr_no_pipe(self) -> ast.Expr:
        """The awaited value: an expression without a `|>` (that applies to the Await)."""
        self.enter()
        try:
            return self.parse_await() if self.kind == "await" else self.parse_binary(0)
        finally:
            self.depth -= 1

    def parse_pipe_step(self, value: ast.Expr) -> ast.Pipe:
        """`value |> f(args)`; a bare `|> f` means `f()`."""
        op = self.advance()
        rhs = self.parse_postfix()
        if isinstance(rhs, (ast.Name, ast.Attribute)):
            rhs = ast.Call(rhs.loc, rhs, [])
        if not isinstance(rhs, ast.Call):
            self.fail("the right side of '|>' must be a function call", rhs.loc)
        return ast.Pipe(op.loc, value, rhs)

    def parse_binary(self, min_prec: int) -> ast.Expr:
        """Precedence climbing over _BINARY_PRECEDENCE; comparisons do not chain."""
        left = self.parse_unary(min_prec)
        compared = False
        while True:
            prec = _BINARY_PRECEDENCE.get(self.kind)
            if prec is None or prec < min_prec:
                return left
            op = self.advance()
            if compared and prec == _COMPARISON_PRECEDENCE:
                self.fail("comparisons cannot be chained; combine them with 'and'", op.loc)
            compared = prec == _COMPARISON_PRECEDENCE
            if op.kind == "^":  # right-associative; `2 ^ -1` allowed as in Python
                self.enter()
                try:
                    right = self.parse_binary(_UNARY_PRECEDENCE)
                finally:
                    self.depth -= 1
            else:
                right = self.parse_binary(prec + 1)
            left = ast.Binary(op.loc, op.kind, left, right)

    def parse_unary(self, min_prec: int) -> ast.Expr:
        """Prefix `-` (binds tighter than `*`, looser than `^`) and `not`."""
        kind = self.kind
        if kind != "-" and kind != "not":
            return self.parse_postfix()
        op = self.advance()
        if kind == "not" and min_prec > _NOT_PRECEDENCE:
            self.fail("'not' must be parenthesized here", op.loc)
        self.enter()
        try:
            operand = self.parse_binary(_UNARY_PRECEDENCE if kind == "-" else _NOT_PRECEDENCE)
        finally:
            self.depth -= 1
        return ast.Unary(op.loc, kind, operand)

    def parse_postfix(self) -> ast.Expr:
        """An atom followed by calls `(..)`, indexing `[..]` and attributes `.name`."""
        expr = self.parse_primary()
        while True:
            kind = self.kind
            if kind == "(":
                opener = self.advance()
                if not isinstance(expr, (ast.Name, ast.Attribute)):
                    self.report("only a function or method name can be called", opener.loc)
                mode = "builtin" if isinstance(expr, ast.Name) and expr.id == "reduce" else None
                args, kwargs = self.parse_arguments(opener, reduce_mode=mode)
                expr = ast.Call(expr.loc, expr, args, kwargs)
            elif kind == "[":
                opener = self.advance()
                expr = ast.Index(opener.loc, expr, self.parse_indices(opener))
            elif kind == ".":
                self.advance()
                name = self.expect("NAME", "expected an attribute name after '.'")
                expr = ast.Attribute(name.loc, expr, name.text)
            else:
                return expr

    def parse_primary(self) -> ast.Expr:
        tok = self.tok
        kind = tok.kind
        if kind == "NAME":
            self.advance()
            return ast.Name(tok.loc, tok.text)
        if kind == "INT":
            self.advance()
            return ast.IntLit(tok.loc, tok.value)
        if kind == "FLOAT":
            self.advance()
            return ast.FloatLit(tok.loc, tok.value)
        if kind == "UNIT":
            self.advance()
            return ast.UnitLit(tok.loc, tok.value[0], tok.value[1])
        if kind == "STRING":
            self.advance()
            return ast.StringLit(tok.loc, tok.value)
        if kind == "true" or kind == "false":
            self.advance()
            return ast.BoolLit(tok.loc, kind == "true")
        if kind == "(":
            return self.parse_parenthesized()
        if kind == "[":
            opener = self.advance()
            elts = self.parse_expr_list("]", "expected a list element", allow_empty=True)
            self.expect_closer("]", opener)
            return ast.ListExpr(opener.loc, elts)
        if kind == "compute":
            return self.parse_compute()
        if kind == "await":
            self.fail("'await' must be parenthesized inside an expression")
        self.fail(f"expected an expression, found {tok.describe()}")

    def parse_parenthesized(self) -> ast.Expr:
        """`(e)` is e itself; `(a, b)` and `(a,)` are tuples."""
        opener = self.advance()
        if self.at_list_end(")"):
            self.expect_closer(")", opener)
        first = self.parse_expr()
        if self.kind != ",":
            self.expect_closer(")", opener)
            return first
        elts = [first]
        while self.accept(",") and self.kind != ")":
            elts.append(self.parse_expr())
        self.expect_closer(")", opener)
        return ast.TupleExpr(opener.loc, elts)

    def parse_expr_list(self, closer: str, what: str, allow_empty: bool = False) -> list[ast.Expr]:
        """Comma-separated expressions up to (not including) `closer`; trailing comma ok."""
        elts: list[ast.Expr] = []
        if self.kind == closer and not allow_empty:
            self.fail(f"{what}, found {self.tok.describe()}")
        while not self.at_list_end(closer):
            elts.append(self.parse_expr())
            if not self.accept(","):
                break
        return elts

    def parse_indices(self, opener: Token) -> list:
        """`i, j, a:b, :` inside `[ ]` (opener consumed); each is an Expr or a Slice."""
        indices: list = []
        if self.kind == "]":
            self.fail("expected an index, found ']'")
        while not self.at_list_end("]"):
            lo = None if self.kind == ":" else self.parse_expr()
            if self.kind == ":":
                colon = self.advance()
                hi = None if self.kind in (",", "]") else self.parse_expr()
                indices.append(ast.Slice(lo.loc if lo else colon.loc, lo, hi))
            else:
                indices.append(lo)
            if not self.accept(","):
                break
        self.expect_closer("]", opener)
        return indices

    def parse_arguments(self, opener: Token, reduce_mode: Optional[str] = None,
                        mutable: Optional[list[bool]] = None
                        ) -> tuple[list[ast.Expr], list[ast.Keyword]]:
        """`a, b, name=value` up to the `)` matching `opener` (consumed). With
        `reduce_mode`, a bare operator first argument (`+`, `max`) is a ReduceOpName.
        With `mutable` (compute inputs), `mut a` is an argument too; `mutable` gets one
        bool per positional argument (whether it was marked `mut`)."""
        args: list[ast.Expr] = []
        kwargs: list[ast.Keyword] = []
        if reduce_mode and self.at_reduce_operator(reduce_mode):
            tok = self.advance()
            args.append(ast.ReduceOpName(tok.loc, tok.text))
            if not self.accept(","):
                self.expect_closer(")", opener)
                return args, kwargs
        while not self.at_list_end(")"):
            if self.kind == "NAME" and self.peek().kind == "=":
                name = self.advance()
                self.advance()
                kwargs.append(ast.Keyword(name.loc, name.text, self.parse_expr()))
            else:
                if kwargs:
                    self.report("positional argument after a keyword argument", self.tok.loc)
                marked = mutable is not None and self.kind == "NAME" and \
                    self.tok.text == "mut" and self.peek().kind == "NAME"
                if marked:
                    self.advance()
                    mutable.append(True)
                elif mutable is not None:
                    mutable.append(False)
                args.append(self.parse_expr())
            if not self.accept(","):
                break
        self.expect_closer(")", opener)
        return args, kwargs

    def at_list_end(self, closer: str) -> bool:
        """End of a bracketed list: its closer, or a line/block boundary (unclosed)."""
        return self.kind == closer or self.kind in _LAYOUT

    def at_reduce_operator(self, mode: str) -> bool:
        if self.peek().kind not in (",", ")"):
            return False
        if self.kind in _REDUCE_OPERATOR_TOKENS:
            return True
        if self.kind != "NAME":
            return False
        return mode == "kernel" or self.tok.text in _REDUCE_OPERATOR_NAMES

    def expect_closer(self, closer: str, opener: Token) -> Token:
        """Consume the bracket closing `opener`. A bracket still open at the end of the
        line (or file) is reported at the opener, where the fix belongs."""
        if self.kind == closer:
            return self.advance()
        where = f"{opener.loc.line}:{opener.loc.col}"
        if self.kind in ("NEWLINE", "EOF") or (self.kind == "DEDENT" and closer != "}"):
            self.fail(f"'{opener.text}' was never closed", opener.loc)
        self.fail(f"expected '{closer}' to close the '{opener.text}' at {where}, "
                  f"found {self.tok.describe()}")


class _ComputeBody:
    """Accumulates a compute body: its @kernel, other annotations, then statements."""

    def __init__(self, parser: Parser):
        self.parser = parser
        self.kernel: Optional[ast.KernelSpec] = None
        self.inner: list[ast.Annotation] = []
        self.stmts: list[ast.Stmt] = []
        self.misplaced_reported = False

    def add(self, ann: ast.Annotation | ast.KernelSpec) -> None:
        if isinstance(ann, ast.Annotation):
            self.inner.append(ann)
        elif self.kernel is None:
            self.kernel = ann
        else:
            first = self.kernel.loc
            self.parser.report(f"a second '@kernel' (the first is at {first.line}:{first.col})",
                               ann.loc)

    def parse_line(self) -> None:
        """One line of a multi-line body: annotations (before any statement) or a
        statement."""
        p = self.parser
        if p.kind != "@":
            self.stmts.append(p.parse_statement())
            return
        if self.stmts and not self.misplaced_reported:  # once: the rest follow from it
            self.misplaced_reported = True
            p.report("annotations must come before the statements of a compute body", p.tok.loc)
        while p.kind == "@":
            self.add(p.parse_annotation())
        p.end_statement()
