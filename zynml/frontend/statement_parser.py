"""Statements, blocks and compute bodies (with their annotations): tokens -> ast.Stmt.
The grammar they follow is sketched in parser.py."""
from __future__ import annotations

from typing import Optional

from . import ast
from .expression_parser import ExpressionParser
from .lexer import Token

__all__ = ["StatementParser"]

_ASSIGN_OPS = {"=": None, "+=": "+", "-=": "-", "*=": "*", "/=": "/"}


class StatementParser(ExpressionParser):
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
        """`var name = value` or `var name: TYPE = value` (a scalar type)."""
        kw = self.advance()
        name = self.advance()
        declared = None
        if self.accept(":"):
            word = self.expect("NAME", f"expected a scalar type after 'var {name.text}:' "
                                       "(f32, bf16, i64, ...)")
            declared = ast.TypeExpr(word.loc, word.text)
        self.expect("=", f"expected '=' after 'var {name.text}"
                         f"{': ' + declared.name if declared else ''}'")
        return ast.Var(kw.loc, name.text, self.parse_expr(), declared)

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

class _ComputeBody:
    """Accumulates a compute body: its @kernel, other annotations, then statements."""

    def __init__(self, parser: StatementParser):
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
