"""The parser's token cursor: reading tokens, reporting syntax errors, and resuming after
one at the next statement of the same block.

An error inside a statement is reported (through the lexer's Reporter: one error per
line) and ParseError unwinds to the statement boundary, where `synchronize` skips the rest
of the broken statement; so one run reports independent mistakes without cascades.
Nesting deeper than MAX_NESTING raises FatalParseError, which stops the whole parse.
"""
from __future__ import annotations

from typing import Callable, NoReturn, Optional

from ..errors import SourceFile, SourceLocation
from .lexer import Reporter, Token

__all__ = ["MAX_NESTING", "ParseError", "FatalParseError", "TokenCursor"]

# Nested brackets + nested blocks + chained prefix operators one parse may hold. Like
# CPython's limit of 200 nested parentheses; far above anything a real program writes.
MAX_NESTING = 200

_STATEMENT_END = frozenset({"NEWLINE", "EOF"})
_LAYOUT = frozenset({"NEWLINE", "INDENT", "DEDENT", "EOF"})


class ParseError(Exception):
    """Unwinds to the nearest statement boundary (already reported)."""


class FatalParseError(Exception):
    """Stops the whole parse (nesting too deep, too many errors)."""


class TokenCursor:
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
            raise FatalParseError

    def fail(self, message: str, loc: Optional[SourceLocation] = None) -> NoReturn:
        """Report an error at the current token (or `loc`) and abandon the statement."""
        self.report(message, loc or self.tok.loc)
        raise ParseError

    def enter(self) -> None:
        """Count one level of nesting; paired with `self.depth -= 1` in a finally."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.reporter.error(f"nesting too deep (more than {MAX_NESTING} levels)",
                                self.tok.loc)
            raise FatalParseError

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
            except ParseError:
                self.synchronize()
        self.accept("DEDENT")

    # ================================================================== ends of lists, statements

    def at_list_end(self, closer: str) -> bool:
        """End of a bracketed list: its closer, or a line/block boundary (unclosed)."""
        return self.kind == closer or self.kind in _LAYOUT

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

