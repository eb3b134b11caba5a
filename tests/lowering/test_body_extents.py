"""body_extents.BodyExtents: a cir body's extents as keys that compare, static or not
(what cir-raise-attention checks loops against tensors with)."""
import numpy as np

import zynml
from zynml.lowering.body_extents import BodyExtents, is_size_expression
from zynml.lowering.cir_ops import body_of, compute_ops, func_by_name
from zynml.lowering.cir_terms import Terms

from passes.test_cir_raise_attention import UNMASKED  # Q, K, V over b, h, i / j, d


def extents_of(dynamic):
    prog = zynml.compile(UNMASKED, device="cpu", dynamic=dynamic)
    q, kv = np.ones((1, 2, 3, 4), np.float32), np.ones((1, 2, 5, 4), np.float32)
    module = prog.stage_module(dict(Q=q, K=kv, V=kv), "cir")
    [compute] = compute_ops(module.operation)
    body = body_of(compute, func_by_name(module.operation))
    args = list(body.regions[0].blocks[0].arguments)
    terms = Terms()
    return BodyExtents(compute, body, terms), terms, args, module


def test_run_time_extents_compare_by_the_dimension_they_read():
    extents, terms, (q, k, v, *sizes, out), module = extents_of(True)
    with module.context:
        # the dims the call checks equal are one key: Q's, K's and V's batch, and the
        # head dims `dot` binds (Q's and K's axis 3)
        assert extents.of_tensor(q, 0) == extents.of_tensor(k, 0) == extents.of_tensor(v, 0)
        assert extents.of_tensor(q, 3) == extents.of_tensor(k, 3)
        # queries and keys are different sizes (seq_len and keys): different keys
        assert extents.of_tensor(q, 2) != extents.of_tensor(k, 2)
        # the output's extents are the size operands out_dims names, read the same way
        assert extents.of_out(out, 2) == extents.of_tensor(q, 2)
        assert extents.of_out(out, 3) == extents.of_tensor(v, 3)
        # a loop bound that is a size argument or a tensor.dim of an input
        assert extents.of_tree(terms.of(sizes[0])) == extents.of_tensor(q, 0)
        assert extents.of_tree(("const", 7, "index")) == 7
        assert extents.of_tree(("arith.addi", (), ("const", 1, "index"))) is None


def test_static_extents_are_numbers():
    extents, _, (q, k, v, *_, out), module = extents_of(False)
    with module.context:
        assert [extents.of_tensor(k, a) for a in range(4)] == [1, 2, 5, 4]
        assert [extents.of_out(out, a) for a in range(4)] == [1, 2, 3, 4]


def test_size_expressions():
    extents, terms, (q, k, v, batch, *_), module = extents_of(True)
    with module.context:
        size = terms.of(batch)
        root = ("math.sqrt", (), ("arith.sitofp", (), ("arith.index_cast", (), size)))
        assert is_size_expression(root, extents)
        assert not is_size_expression(("math.sqrt", (), ("iv", 0)), extents)
        assert not is_size_expression(("cir.load", (), ("free", 0)), extents)
