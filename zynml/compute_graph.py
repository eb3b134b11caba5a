"""`zynml.ComputeGraph`: a decode step as a list of tensor operations, built once and
replayed every step (../shared/spec/compute-graph.md, after ggml's compute graph).

    g = zynml.ComputeGraph("cuda:0")
    x = g.add_leaf(hidden)                                    # an input, updated in place
    h = g.add_op(TensorOp.RMS_NORM, [x], OpParams(gamma=w_norm, scalar=1e-6))
    q = g.add_op(TensorOp.MUL_MAT, [h], OpParams(weight=w_q))
    g.replay()                                                # every op, in order
    g.output(q)                                               # a node's array

Each operation node runs one library kernel or device-API operation on its inputs' arrays
(`OP_KINDS` below says which). On native CUDA the first `replay()` captures the nodes'
calls into a CUDA graph (zynml.capture) and launches it; each later `replay()` is that one
graph launch. Between replays the caller writes new values into the leaves in place, and
into 0-d integer arrays given as `int_param` (a position, a cache row): the kernels read
them at every replay, so nothing is captured again. On other devices (the CPU through
IREE, the interpreter) `replay()` runs the same calls in order, with the same results.

A node's array is its output as of the last replay: on CUDA the graph's own buffer, the
same at every replay. `Copy` is the one node that writes an array it does not own: it adds
its input into `target`'s rows `int_param`.. (a KV cache's next rows, which must hold
zeros), once per replay.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Sequence

from .device_api import BUILTINS, Device
from .errors import ZynMLError

__all__ = ["ComputeGraph", "TensorOp", "OpParams", "TensorNode", "OP_KINDS"]


class TensorOp(enum.Enum):
    """The spec's tensor operations, each one kernel dispatch."""
    MUL_MAT = "MulMat"    # inputs[0] [rows, k] @ params.weight [k, n]
    ADD = "Add"           # inputs[0] + inputs[1] (a residual connection)
    RMS_NORM = "RmsNorm"  # rows of inputs[0] normalized, times params.gamma; eps scalar
    ROPE = "Rope"         # rotate-half RoPE of each head of rows [rows, heads * d]
    SOFT_MAX = "SoftMax"  # softmax of each row
    MUL = "Mul"           # inputs[0] * inputs[1] (SwiGLU's gate times up)
    SILU = "Silu"         # x * sigmoid(x)
    COPY = "Copy"         # inputs[0] added into params.target's rows int_param..
    NONE = "None"         # a leaf: an input array, no operation


@dataclass
class OpParams:
    """What an operation takes besides its input nodes (spec: OpParams)."""
    weight: Any = None   # MulMat: the weight [k, n]
    gamma: Any = None    # RmsNorm: the scale [dim]
    scalar: float = 1e-5  # RmsNorm: epsilon
    int_param: Any = 0   # Rope: the position; Copy: the first row (int or 0-d int array)
    cos: Any = None      # Rope: the tables [positions, d], each pair's angle twice
    sin: Any = None
    target: Any = None   # Copy: the array written into


@dataclass
class TensorNode:
    op: TensorOp
    inputs: list[int]
    params: OpParams = field(default_factory=OpParams)
    data: Any = None  # the leaf's array, or the op's output as of the last replay


# op -> (number of input nodes, the params it needs)
OP_KINDS: dict[TensorOp, tuple[int, tuple[str, ...]]] = {
    TensorOp.MUL_MAT: (1, ("weight",)), TensorOp.ADD: (2, ()),
    TensorOp.RMS_NORM: (1, ("gamma",)), TensorOp.ROPE: (1, ("cos", "sin")),
    TensorOp.SOFT_MAX: (1, ()), TensorOp.MUL: (2, ()), TensorOp.SILU: (1, ()),
    TensorOp.COPY: (1, ("target",)),
}


class ComputeGraph:
    """Tensor operations in topological order (leaves first), replayed as one unit
    (module docstring)."""

    def __init__(self, device: str = "auto"):
        self.device = device if isinstance(device, Device) else Device(device)
        self.nodes: list[TensorNode] = []
        self.n_leafs = 0
        self._graph = None  # the captured zynml.Graph (native CUDA)

    @property
    def n_ops(self) -> int:
        """Operation nodes (leaves excluded)."""
        return len(self.nodes) - self.n_leafs

    def add_leaf(self, data: Any) -> int:
        """An input array (on the graph's device); its index."""
        self._check_open("add_leaf")
        self.nodes.append(TensorNode(TensorOp.NONE, [], OpParams(), data))
        self.n_leafs += 1
        return len(self.nodes) - 1

    def add_op(self, op: TensorOp, inputs: Sequence[int],
               params: OpParams | None = None) -> int:
        """An operation on earlier nodes (by index); its index."""
        self._check_open("add_op")
        if not isinstance(op, TensorOp) or op is TensorOp.NONE:
            raise ZynMLError(f"ComputeGraph.add_op: op must be a TensorOp other than NONE "
                             f"(add_leaf makes leaves), not {op!r}")
        params = params if params is not None else OpParams()
        arity, needed = OP_KINDS[op]
        inputs = list(inputs)
        if len(inputs) != arity:
            raise ZynMLError(f"ComputeGraph.add_op: {op.value} takes {arity} input "
                             f"node{'s' if arity > 1 else ''}, got {len(inputs)}")
        for index in inputs:
            if isinstance(index, bool) or not isinstance(index, int) or \
                    not 0 <= index < len(self.nodes):
                raise ZynMLError(f"ComputeGraph.add_op: input {index!r} of {op.value} is "
                                 f"not an earlier node (0..{len(self.nodes) - 1})")
        missing = [name for name in needed if getattr(params, name) is None]
        if missing:
            raise ZynMLError(f"ComputeGraph.add_op: {op.value} needs OpParams("
                             + ", ".join(f"{name}=..." for name in missing) + ")")
        self.nodes.append(TensorNode(op, inputs, params))
        return len(self.nodes) - 1

    def replay(self) -> Any:
        """Run every operation once, in order (on CUDA: one graph launch, captured at the
        first replay, not waited for); returns the last node's array."""
        if not self.n_ops:
            raise ZynMLError("ComputeGraph.replay: the graph has no operation node")
        if self.device.kind != "cuda":
            self._run_nodes()
        elif self._graph is None:
            from .graphs import capture
            with capture(self.device.name) as graph:
                self._run_nodes()
            self._graph = graph
            graph.replay()
        else:
            self._graph.replay()
        return self.nodes[-1].data

    def output(self, index: int = -1) -> Any:
        """Node `index`'s array (default: the last node's)."""
        return self.nodes[index].data

    def _check_open(self, what: str) -> None:
        if self._graph is not None:
            raise ZynMLError(f"ComputeGraph.{what}: the graph was captured at its first "
                             f"replay; build a new ComputeGraph to change it")

    def _run_nodes(self) -> None:
        for position, node in enumerate(self.nodes):
            if node.op is not TensorOp.NONE:
                try:
                    node.data = _run(self.device, node,
                                     [self.nodes[i].data for i in node.inputs])
                except ZynMLError as err:
                    raise ZynMLError(f"ComputeGraph node {position} ({node.op.value}): "
                                     f"{err.message}", err.loc) from None

    def __repr__(self) -> str:
        return (f"<zynml.ComputeGraph {self.device.name}: {self.n_leafs} leaves, "
                f"{self.n_ops} ops{', captured' if self._graph is not None else ''}>")


def _run(dev: Device, node: TensorNode, args: list[Any]) -> Any:
    """One node's kernel on its input arrays."""
    from . import kernels
    op, p = node.op, node.params
    if op is TensorOp.MUL_MAT:
        return dev.matmul(args[0], p.weight)
    if op is TensorOp.ADD:
        return dev.elementwise(args, lambda a, b: a + b)
    if op is TensorOp.MUL:
        return dev.elementwise(args, lambda a, b: a * b)
    if op is TensorOp.SILU:
        return dev.elementwise(args, BUILTINS["silu"])
    if op is TensorOp.SOFT_MAX:
        return dev.softmax(args[0])
    if op is TensorOp.RMS_NORM:
        return dev.rms_norm(args[0], p.gamma, eps=float(p.scalar))
    if op is TensorOp.ROPE:  # each row's heads: d = the tables' width
        rows, width = (int(n) for n in args[0].shape)
        d = int(p.cos.shape[1])
        if width % d:
            raise ZynMLError(f"Rope: the row length {width} is not a multiple of the "
                             f"tables' head dim {d}")
        heads = kernels.basic.reshaped(args[0], (rows * width // d, d))
        rotated = kernels.rope(heads, p.cos, p.sin, p.int_param, device=dev.name)
        return kernels.basic.reshaped(rotated, (rows, width))
    return kernels.copy_rows(p.target, args[0], p.int_param, device=dev.name)
