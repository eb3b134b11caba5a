"""Which input sizes a Program compiles dynamic, and the record of every compile.

A call's signature (each input's dtype and shape, integer inputs' values) picks one
executable. A dimension of a *dynamic* size enters the signature as None, which the key
and the IR show as `?`: `tensor[?, 64] of f32` in the key, `tensor<?x64xf32>` through
cir, linalg and IREE, so one artifact serves every value of that size.

    zynml.compile(src)                      automatic: a size seen with a second value is
                                            compiled dynamic from then on (one note says so)
    zynml.compile(src, dynamic=["seq"])     `seq` dynamic from the first call
    zynml.compile(src, static=["n"])        `n` specialized by value, always
    zynml.compile(src, dynamic=True/False)  every size dynamic / none (today's behaviour)

A size is named as the program names it (`n` in `for i in 0..n`, `seq` in a pipeline's
`tensor[?seq, d]`); an input dimension that no size names is `x.shape[0]`. The
dimensions bound to one size form one group and change together.

Every call at a dynamic key first checks the program at the call's concrete shapes (about
0.3 ms, once per new shape), so a size that breaks a relation the program states gets
the same located error as a static compile. A dynamic compile that fails while the same
program compiles static falls back to static with a note (automatic sizes) or is an error
naming the size (sizes declared dynamic). `ZYNML_LOG=recompiles` (or the logger
`zynml.recompiles` at INFO) tells why each compile happened; `Program.stats()` counts.
"""
from __future__ import annotations

import logging
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from . import knobs
from .errors import SourceLocation, ZynMLError, note
from .frontend.symbols import CheckedProgram, is_tensor
from .frontend.types import TensorType

__all__ = ["Stats", "ShapeOnly", "SizePolicy", "Specializations", "LOGGER", "declared_dynamic",
           "check_size_names"]

LOGGER = logging.getLogger("zynml.recompiles")
_DIM_NAME = re.compile(r"^([A-Za-z_][\w.\[\]]*)\.shape\[(\d+)\]$")


@dataclass(frozen=True)
class Stats:
    """What `Program.stats()` returns: calls that reached the compiled-executable table,
    how many found theirs in memory, how many executables were made (`specializations`),
    of those how many read the on-disk cache (`disk_hits`) or ran the compiler
    (`compiles`), and the sizes compiled dynamic now."""

    calls: int = 0
    memory_hits: int = 0
    specializations: int = 0
    disk_hits: int = 0
    compiles: int = 0
    dynamic: tuple[str, ...] = ()


class ShapeOnly:
    """An input given by shape and dtype only (`zynml compile --shape`), for a compile."""

    def __init__(self, shape: tuple[int, ...], dtype):
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)


class _Groups:
    """The input dimensions of a program grouped by the size they bind: (input, dim) ->
    group name (the size's name, or `x.shape[d]` for a dimension no size names)."""

    def __init__(self, generic: CheckedProgram):
        self.of: dict[tuple[str, int], str] = {}
        self.loc: dict[str, SourceLocation] = {}
        for size in generic.sizes.values():
            dims = [(b.tensor, b.dim) for b in size.bindings if b.tensor in generic.inputs]
            if not dims:
                continue
            # a dimension bound by two sizes joins them: the first name found stays
            name = next((self.of[d] for d in dims if d in self.of), size.name)
            for dim in dims:
                old = self.of.get(dim)
                if old is not None and old != name:  # merge old's group into name's
                    for other, group in list(self.of.items()):
                        if group == old:
                            self.of[other] = name
                self.of[dim] = name
            self.loc.setdefault(name, size.loc)
        self.names = set(self.of.values()) | set(generic.sizes)

    def group(self, tensor: str, dim: int) -> str:
        return self.of.get((tensor, dim), f"{tensor}.shape[{dim}]")

    def canonical(self, name: str) -> str:
        """`x.shape[0]` of a dimension that a size binds: that size's group."""
        match = _DIM_NAME.match(name)
        return self.group(match.group(1), int(match.group(2))) if match else name


def declared_dynamic(pipelines) -> dict[str, SourceLocation]:
    """Sizes written `?name` in pipeline parameter types (`tensor[?seq, d]`)."""
    return {name.id: name.loc for pipeline in pipelines for param in pipeline.params
            if param.type is not None for name in param.type.dynamic}


def check_size_names(option: str, names: Any, known: set[str], inputs: set[str],
                     loc: SourceLocation) -> frozenset[str]:
    """`dynamic=`/`static=` names: sizes of the program or `x.shape[d]` of an input."""
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise ZynMLError(f"zynml.compile's {option}= takes a list of size names such as "
                         f"['n'] or ['x.shape[0]'], not {names!r}", loc)
    for name in names:
        match = _DIM_NAME.match(name)
        if name not in known and not (match and match.group(1) in inputs):
            raise ZynMLError(f"zynml.compile's {option}= names '{name}', which is neither a "
                             "size of the program nor `INPUT.shape[DIM]` of an input; its "
                             "sizes: " + (", ".join(sorted(known)) or "(none)"), loc)
    return frozenset(names)


@dataclass
class SizePolicy:
    """Which groups are dynamic. `automatic`: a group's second value makes it dynamic;
    `everything`: all groups dynamic from the first call; `static_only`: why no group
    can be dynamic (a backend of static sizes, tile-level bodies), or ""."""

    declared: dict[str, SourceLocation]  # dynamic by the user: group -> where said
    pinned: frozenset[str]  # static by the user
    automatic: bool = True
    everything: bool = False
    static_only: str = ""  # why every size compiles static (the backend, tiles), if so
    # why a second value does not make a size dynamic, only asking does (declared, or
    # dynamic=True), if so: the native CUDA backend's dynamic kernels are slower for some
    # loop nests (matrix products fall back to a thread per point)
    asked_only: str = ""
    made_dynamic: set[str] = field(default_factory=set)  # by the policy or the cap
    fell_back: dict[str, str] = field(default_factory=dict)  # group -> why it is static
    first: dict[str, int] = field(default_factory=dict)  # group -> first value seen

    def is_dynamic(self, group: str) -> bool:
        if group in self.pinned or group in self.fell_back or self.static_only:
            return False
        return group in self.declared or self.everything or \
            (group in self.made_dynamic and not self.asked_only)

    def observe(self, values: dict[str, int]) -> str:
        """A call's value of each group: a second value makes it dynamic (automatic).
        Returns the sizes that turned dynamic at this call, for one note ("" if none)."""
        changed = []
        for group, value in values.items():
            seen = self.first.setdefault(group, value)
            if seen != value and self.automatic and group not in self.made_dynamic \
                    and not self.is_dynamic(group) and group not in self.pinned \
                    and group not in self.fell_back:
                self.made_dynamic.add(group)
                changed.append(f"'{group}' ({value} after {seen})")
        if changed and (self.static_only or self.asked_only):  # noted once a size
            note(f"note: size{'s' if len(changed) > 1 else ''} {', '.join(changed)} took "
                 f"a second value; {self.static_only or self.asked_only}, so each new "
                 "value compiles again")
            return ""
        return ", ".join(changed)


class Specializations:
    """A Program's executables by signature key, and the policy that makes the key.

    `build(signature, scalars, records, checked)` makes an executable; `check(signature,
    scalars)` checks the program at concrete shapes (raising its located errors)."""

    def __init__(self, generic: CheckedProgram, policy: SizePolicy, build: Callable,
                 check: Callable, cache, enabled: bool = True):
        self.groups = _Groups(generic)
        policy.declared = {self.groups.canonical(n): loc for n, loc in policy.declared.items()}
        policy.pinned = frozenset(self.groups.canonical(n) for n in policy.pinned)
        self.policy = policy
        self.executables: dict[tuple, Any] = {}
        self._build, self._check, self._cache = build, check, cache
        self._enabled = enabled  # False: every size static, silently (the interpreter)
        self._lock = threading.Lock()
        self._validated: set[tuple] = set()
        self._last: dict | None = None  # the concrete signature of the last compile
        self._capped = False
        self._turned = ""  # sizes a second value made dynamic at this call, for the note
        self._counts = dict(calls=0, memory_hits=0, disk_hits=0, compiles=0)

    def stats(self) -> Stats:
        dynamic = sorted(g for g in self.groups.names | self.policy.made_dynamic
                         | set(self.policy.declared) if self.policy.is_dynamic(g))
        return Stats(specializations=len(self.executables), dynamic=tuple(dynamic),
                     **self._counts)

    def count_hit(self) -> None:
        """A call that a fast path (zynml/host_calls.py) ran on an executable of these."""
        with self._lock:
            self._counts["calls"] += 1
            self._counts["memory_hits"] += 1

    # ------------------------------------------------------------------ the key

    def generalize(self, signature: dict, observe: bool = True) -> dict:
        """`signature` with the dimensions of dynamic groups as None; the sizes that a
        second value made dynamic wait in `_turned` for the call's note."""
        if not self._enabled:
            return signature
        values: dict[str, set[int]] = {}
        for name, ty in signature.items():
            if is_tensor(ty) and ty.shape is not None:
                for dim, extent in enumerate(ty.shape):
                    values.setdefault(self.groups.group(name, dim), set()).add(extent)
        if observe:  # dimensions that disagree: the check says so
            self._turned = self.policy.observe({g: next(iter(seen)) for g, seen in
                                                values.items() if len(seen) == 1})
        dynamic = {g for g, seen in values.items()
                   if len(seen) == 1 and self.policy.is_dynamic(g)}
        if not dynamic:
            return signature
        return {name: TensorType(ty.dtype, tuple(
                    None if self.groups.group(name, d) in dynamic else e
                    for d, e in enumerate(ty.shape)))
                if is_tensor(ty) and ty.shape is not None else ty
                for name, ty in signature.items()}

    @staticmethod
    def key(signature: dict, scalars: dict) -> tuple:
        return tuple(sorted((n, str(t)) for n, t in signature.items())) + \
            tuple(sorted(scalars.items()))

    # ------------------------------------------------------------------ a call

    def executable(self, signature: dict, scalars: dict, records=None, checked=None):
        """The executable of a call's concrete `signature`: from memory, else built."""
        with self._lock:
            self._counts["calls"] += 1
            general = signature if records else self.generalize(signature)
            turned, self._turned = self._turned, ""  # for the note, once compiled
            found = self.executables.get(self.key(general, scalars))
            if found is None and self._cap_reached() and not records:
                general = self.generalize(signature, observe=False)
                found = self.executables.get(self.key(general, scalars))
            if found is not None:
                if general is not signature:
                    self._validate(signature, scalars)
                self._counts["memory_hits"] += 1
            else:
                found, general = self._make(signature, general, scalars, records, checked)
                self.executables[self.key(general, scalars)] = found
            if turned and general is not signature:  # (a fall back's note said it)
                note(f"note: size{'s' if ',' in turned else ''} {turned} took a second "
                     "value: compiled dynamic from now on (zynml.compile(..., "
                     "static=[...]) keeps a size static)")
            return found

    def _validate(self, signature: dict, scalars: dict) -> None:
        concrete = self.key(signature, scalars)
        if concrete not in self._validated:
            self._check(signature, scalars)
            if len(self._validated) > 4096:  # a long run of new shapes: bounded
                self._validated.clear()
            self._validated.add(concrete)

    def _cap_reached(self) -> bool:
        limit = knobs.SPECIALIZATION_LIMIT.get()
        # dynamic=False pins every size static: each new shape compiles, as asked (the
        # library's CUDA kernels: a model's matrix products alone take more than 8)
        if len(self.executables) < limit or not self._enabled or not self.policy.automatic:
            return False
        if not self._capped:
            self._capped = True
            then = self.policy.static_only or \
                "every size not pinned static is compiled dynamic from now on"
            note(f"note: this program has {len(self.executables)} specializations "
                 f"(ZYNML_SPECIALIZATION_LIMIT={limit}); {then}")
            self.policy.everything = True
        return True

    def _make(self, signature, general, scalars, records, checked):
        """(executable, the signature it was compiled for)."""
        if general is not signature:
            self._validate(signature, scalars)
            try:
                made = self._counted_build(general, scalars, records, None)
            except ZynMLError as err:
                general = self._fall_back(signature, general, scalars, err)
                made = self._counted_build(general, scalars, records, None)
        else:
            made = self._counted_build(signature, scalars, records, checked)
        self._log(signature, general, scalars)
        return made, general

    def _counted_build(self, signature, scalars, records, checked):
        hits = self._cache.hits
        made = self._build(signature, scalars, records, checked)
        self._counts["disk_hits" if self._cache.hits > hits else "compiles"] += 1
        return made

    def _fall_back(self, signature, general, scalars, err: ZynMLError) -> dict:
        """A dynamic compile failed: if the static one works, the sizes are static
        (automatic) or the error names them (declared); else the static error stands."""
        self._check(signature, scalars)  # a user error at these shapes: it is raised here
        groups = sorted({self.groups.group(n, d) for n, ty in general.items()
                         if is_tensor(ty) and ty.shape is not None
                         for d, e in enumerate(ty.shape) if e is None})
        reason = (err.errors[0].message if err.errors else str(err)).split("\n")[0]
        declared = [g for g in groups if g in self.policy.declared]
        if declared:
            loc = err.errors[0].loc if err.errors and err.errors[0].loc else \
                self.policy.declared[declared[0]]
            raise ZynMLError(f"size{'s' if len(declared) > 1 else ''} "
                             + ", ".join(f"'{g}'" for g in declared)
                             + f" cannot be dynamic here (it is declared dynamic): {reason}",
                             loc) from None
        for group in groups:
            self.policy.fell_back[group] = reason
        note(f"note: size{'s' if len(groups) > 1 else ''} "
             + ", ".join(f"'{g}'" for g in groups)
             + f" compiled static for each value: it cannot be dynamic here ({reason})")
        return signature

    # ------------------------------------------------------------------ the log

    def _log(self, signature: dict, general: dict, scalars: dict) -> None:
        """Why this compile happened, to the `zynml.recompiles` logger."""
        _enable_log()
        last, self._last = self._last, dict(signature, **{f"={n}": v for n, v in
                                                          scalars.items()})
        if not LOGGER.isEnabledFor(logging.INFO):
            return
        if last is None:
            shown = ", ".join(f"{n}: {t}" for n, t in general.items())
            LOGGER.info("compile 1 (first call): %s", shown or "no inputs")
            return
        changes = []
        gone = {n: None for n in last if n.endswith("@device") and n not in self._last}
        for name, ty in {**self._last, **gone}.items():
            before = last.get(name)
            if name.endswith("@device"):  # a scalar given as a 0-d GPU array, or not
                if before != ty:
                    changes.append(f"{name[1:-7]}: " + ("a number -> a 0-d GPU array"
                                                       if ty else "a 0-d GPU array -> a number"))
            elif name.startswith("="):
                if before != ty:
                    changes.append(f"{name[1:]}: {before} -> {ty}, an integer input "
                                   "(a size or an index: compiled by value)")
            elif before is None or not is_tensor(ty) or not is_tensor(before) \
                    or before.dtype != ty.dtype or before.rank != ty.rank:
                if str(before) != str(ty):
                    changes.append(f"{name}: {before} -> {ty}")
            else:
                for dim, (old, new) in enumerate(zip(before.shape, ty.shape)):
                    if old != new:
                        how = "dynamic" if general[name].shape[dim] is None else "static"
                        group = self.groups.group(name, dim)
                        size = f" (size '{group}')" if not group.endswith("]") else ""
                        changes.append(f"{name}.shape[{dim}]{size}: {old} -> {new}, "
                                       f"compiled {how}")
        LOGGER.info("compile %d: %s", len(self.executables) + 1,
                    "; ".join(changes) or "same shapes, another dtype or option")


class _StderrHandler(logging.StreamHandler):
    """Writes to the sys.stderr of the moment (a test's capture, a redirected stream)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _enable_log() -> None:
    """`ZYNML_LOG=recompiles`: the logger prints at INFO to stderr."""
    if "recompiles" not in knobs.LOG.get():
        return
    if not any(isinstance(h, _StderrHandler) for h in LOGGER.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("zynml.recompiles: %(message)s"))
        LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)


def for_program(program, dynamic, static, validate_names: bool) -> Specializations:
    """The Specializations of an api.Program: `dynamic` is None (automatic), True, False
    or a list of names; `static` a list of names; `validate_names` at the top Program
    (a pipeline's Program takes the names that are its own)."""
    generic = program.generic
    loc = SourceLocation(program.source, 1, 1)
    pipelines = [program._pipeline] if program._pipeline is not None else program.ast.pipelines
    declared = declared_dynamic(pipelines)
    if validate_names:
        every = [generic] + list(generic.pipelines.values())
        known = {s for g in every for s in g.sizes}
        inputs = {n for g in every for n in g.inputs}
        check_size_names("static", static, known, inputs, loc)
        if dynamic not in (None, True, False):
            check_size_names("dynamic", dynamic, known, inputs, loc)
    names = dynamic if dynamic not in (None, True, False) else ()
    declared.update({name: loc for name in names})
    tiles = next((s.kernel for s in generic.steps if s.kernel and s.kernel.tile_checks), None)
    static_only = "this backend compiles static sizes only" \
        if program.backend not in ("iree", "native") \
        else "tile-level bodies (docs/language.md §3) need static sizes" if tiles else ""
    asked_only = "the native CUDA backend makes a size dynamic only when asked " \
        "(dynamic=[...] or `?name`)" if program.backend == "native" else ""
    policy = SizePolicy(declared=declared, pinned=frozenset(static),
                        automatic=dynamic is not False, everything=dynamic is True,
                        static_only=static_only, asked_only=asked_only)
    for name, where in declared.items():
        if name in policy.pinned:
            raise ZynMLError(f"size '{name}' is declared both dynamic and static", where)
        if tiles is not None and program.backend in ("iree", "native"):
            raise ZynMLError(f"size '{name}' is declared dynamic, but this block's "
                             "tile-level body needs static sizes", tiles.node.loc)
    return Specializations(generic, policy, program._build, program._validate, program._cache,
                           enabled=program.backend != "interpreter")
