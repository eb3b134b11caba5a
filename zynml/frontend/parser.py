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

The grammar lives in three layers, each a class built on the one before: token_cursor.py
(reading tokens, errors and recovery), expression_parser.py, statement_parser.py (with
compute bodies and annotations); Parser here adds the program level.
"""
from __future__ import annotations

from . import ast
from ..errors import SourceFile, SourceLocation, ZynMLError
from ..limits import recursion_room
from .lexer import Reporter, lex
from .statement_parser import StatementParser
from .token_cursor import MAX_NESTING, FatalParseError, ParseError

__all__ = ["parse", "MAX_NESTING"]

# Python frames one nesting level may use (measured with the deepest paths, e.g.
# `-(-(...))`, plus margin); parse() makes sure this much recursion is available.
_FRAMES_PER_LEVEL = 12


def parse(src: SourceFile) -> ast.Program:
    """Parse a ZynML source file. Raises ZynMLError carrying every syntax error found.

    MAX_NESTING levels of _FRAMES_PER_LEVEL Python frames need more than the default
    recursion limit of 1000 when the caller is itself deep (pytest is); recursion_room
    raises the limit for the duration of the parse.
    """
    reporter = Reporter()
    parser = Parser(src, lex(src, reporter), reporter)
    program = None
    try:
        with recursion_room(MAX_NESTING, frames_per_level=_FRAMES_PER_LEVEL):
            program = parser.parse_program()
    except FatalParseError:
        pass
    except RecursionError:  # a backstop only: MAX_NESTING should always trigger first
        reporter.error("nesting too deep", parser.tok.loc)
    reporter.raise_if_any()
    if program is None:  # fatal without a reported error: cannot happen, but stay safe
        raise ZynMLError("could not parse the program", parser.tok.loc)
    return program


class Parser(StatementParser):
    """The whole grammar: the program level (uses, pipelines, types, configuration) over
    the statements and expressions it inherits."""

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
            except ParseError:
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
