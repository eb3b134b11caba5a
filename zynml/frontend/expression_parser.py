"""Expressions, by precedence climbing: tokens -> ast.Expr (the precedence table is
_BINARY_PRECEDENCE; parser.py lists the levels). A `compute(...) { ... }` expression
holds statements, so parse_compute comes from the statement parser built on this class.
"""
from __future__ import annotations

from typing import Optional

from . import ast
from .lexer import Token
from .token_cursor import TokenCursor

__all__ = ["ExpressionParser"]

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

# Operator tokens that stand for themselves as the first argument of `reduce(...)`.
_REDUCE_OPERATOR_TOKENS = frozenset({"+", "-", "*", "/", "%", "^", "@", "and", "or"})
# Names taken as a reduction operator in the builtin `reduce(max, logits)`. In
# `@kernel reduce(...)` any bare name is (the checker reports an unknown one).
_REDUCE_OPERATOR_NAMES = frozenset({"max", "min", "argmax", "argmin"})


class ExpressionParser(TokenCursor):
    def parse_compute(self) -> ast.Compute:
        raise NotImplementedError  # StatementParser's: a compute body holds statements

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

    def at_reduce_operator(self, mode: str) -> bool:
        if self.peek().kind not in (",", ")"):
            return False
        if self.kind in _REDUCE_OPERATOR_TOKENS:
            return True
        if self.kind != "NAME":
            return False
        return mode == "kernel" or self.tok.text in _REDUCE_OPERATOR_NAMES

