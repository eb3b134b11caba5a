"""`use kernels.NAME`: the pipelines of a library source join the program's.

The library's sources are ZynML files shipped in the package (zynml/kernels/src/NAME.zyn);
a used pipeline is then called like one of the program's own (it is inlined). A library
file may itself `use` others; each file is read once per program.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import SourceFile, ZynMLError
from . import ast

# The one library root today. A path, not an import: the front end reads these sources
# as it reads the user's, and the kernels package (which compiles programs) sits above it.
LIBRARIES = {"kernels": Path(__file__).resolve().parent.parent / "kernels" / "src"}


def library_names(root: str = "kernels") -> list[str]:
    return sorted(path.stem for path in LIBRARIES[root].glob("*.zyn"))


def library_source(root: str, name: str) -> Path:
    return LIBRARIES[root] / f"{name}.zyn"


def resolve_uses(program: ast.Program, parse) -> list[SourceFile]:
    """Append the pipelines of every source `program` uses (transitively) to its own;
    returns those sources. `parse` is the parser (SourceFile -> ast.Program), passed in
    to keep imports one way."""
    own = {p.name: p for p in program.pipelines}
    seen: set[Path] = set()
    sources: list[SourceFile] = []
    pending = list(program.uses)
    while pending:
        use = pending.pop(0)
        path = _path_of(use)
        if path in seen:
            continue
        seen.add(path)
        sources.append(SourceFile(str(path), path.read_text(encoding="utf-8")))
        library = parse(sources[-1])
        for pipeline in library.pipelines:
            if pipeline.name in own:
                raise ZynMLError(f"pipeline '{pipeline.name}' is defined here and in "
                                 f"{'.'.join(use.path)} (used here)", own[pipeline.name].loc)
            own[pipeline.name] = pipeline
            program.pipelines.append(pipeline)
        pending.extend(library.uses)
    return sources


def _path_of(use: ast.Use) -> Path:
    dotted = ".".join(use.path)
    root = use.path[0]
    if root not in LIBRARIES:
        raise ZynMLError(f"unknown library '{root}' in 'use {dotted}'; the library is "
                         f"'kernels' (use kernels.NAME)", use.loc)
    if len(use.path) != 2:
        raise ZynMLError(f"'use {dotted}' names no kernel: write 'use {root}.NAME' "
                         f"(one of: {', '.join(library_names(root))})", use.loc)
    path = library_source(root, use.path[1])
    if not path.is_file():
        raise ZynMLError(f"the library has no kernel '{use.path[1]}'; it has: "
                         f"{', '.join(library_names(root))}", use.loc)
    return path
