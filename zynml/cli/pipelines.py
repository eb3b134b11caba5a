"""`--pipeline NAME`: which part of a .zyn file `zynml run`, `compile` and `tune` work on.

A file holds a script (its top-level `let`s) and pipelines. Without `--pipeline` the
commands take the script; with it, the pipeline of that name, whose parameters (and the
records and sizes its body asks for) are the inputs that `--input`, `--random` and `--set`
give:

    zynml run model.zyn --pipeline softmax --random x=4x8

A file of pipelines and no script has nothing to run without `--pipeline`: that is a
usage error listing its pipelines, as is a name that is none of them.
"""
from __future__ import annotations

from ..frontend import ast
from .common import UsageError

__all__ = ["add_pipeline_argument", "choose", "describe_pipelines"]


def add_pipeline_argument(p) -> None:
    p.add_argument("--pipeline", metavar="NAME", default=None,
                   help="work on this pipeline of the file instead of its script; its "
                        "parameters are inputs (--input, --random, --set; a record "
                        "member as --input 'model.layers[0].w=w.npy')")


def choose(program, args, stage: str | None = None):
    """The Program that `args` names: `program` (the script) or one of its pipelines.
    `stage`: the stage `--emit` shows; the ast is the whole file's, so it needs no choice."""
    names = [p.name for p in program.ast.pipelines]
    if args.pipeline is not None:
        if args.pipeline not in names:
            raise UsageError(f"--pipeline {args.pipeline}: {args.file} has no pipeline "
                             f"'{args.pipeline}'; " + describe_pipelines(program))
        return program.pipeline(args.pipeline)
    if names and not _has_script(program) and stage != "ast":
        raise UsageError(f"{args.file} has no script, only pipelines: name one with "
                         "--pipeline NAME; " + describe_pipelines(program))
    return program


def describe_pipelines(program) -> str:
    """`its pipelines:` then one line per pipeline: its signature as written, and the
    inputs its body adds (records, sizes named only inside)."""
    if not program.ast.pipelines:
        return "it has no pipelines"
    lines = ["its pipelines:"]
    for pipeline in program.ast.pipelines:
        params = ", ".join(f"{p.name}: {_type_text(p.type)}" for p in pipeline.params)
        line = f"  {pipeline.name}({params})"
        extra = _extra_inputs(program.generic.pipelines.get(pipeline.name), pipeline)
        if extra:
            line += "; also takes " + ", ".join(extra)
        lines.append(line)
    return "\n".join(lines)


def _has_script(program) -> bool:
    generic = program.generic
    return bool(generic.steps or generic.outputs or generic.host_values)


def _extra_inputs(checked, pipeline: ast.Pipeline) -> list[str]:
    if checked is None:
        return []
    params = {p.name for p in pipeline.params}
    roots = checked.record_roots
    extra = [name for name in checked.inputs if name not in params
             and not any(name.startswith(root + ".") or name.startswith(root + "[")
                         for root in roots)]
    return extra + [f"{root} (a record)" for root in sorted(roots)]


def _type_text(t: ast.TypeExpr | None) -> str:
    if t is None:
        return "?"
    if t.dims is None:
        return t.name
    return f"{t.name}[{', '.join(ast.extent_text(d) for d in t.dims)}]"
