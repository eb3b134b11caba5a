"""One warp's tensor-core products (the attention ukernels', mma_block_gemm's): mma.sync
m16n8k16 with f16 or bf16 operands and f32 accumulators, operands from shared memory by
ldmatrix, and an accumulator tile reused as the A operand of the next product
(FlashAttention-2's P V).

The product is inline PTX (nvgpu.mma.sync lowers f16 only, not bf16); ldmatrix is
nvgpu's. Per warp, lane = 4 g + t, the PTX ISA's fragment layouts:

    accumulator tile, 16 x 8 f32: [c0, c1, c2, c3] at (g, 2t), (g, 2t + 1), (g + 8, 2t),
                                  (g + 8, 2t + 1)
    A fragment, 16 x 16:          four i32 of two elements each, at (g, 2t..),
                                  (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..)
    B fragment, 16 x 8 (k x n):   two i32, at (k 2t.., n g) and (k 2t + 8.., n g)

Shared tiles are row-major memrefs of the element type; their rows are padded by 16
bytes (PAD) so that ldmatrix's eight row reads of a matrix fall in different banks.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, llvm, nvgpu, vector

from .flash_skeleton import WARP, add, mul
from .kernel_builder import index_const

MMA_M, MMA_N, MMA_K = 16, 8, 16
PAD = 8  # elements after each shared row (16 bytes)


def shared_tile(rows: int, columns: int, element: ir.Type) -> ir.MemRefType:
    """A [rows, columns + PAD] tile in shared memory."""
    return ir.MemRefType.get([rows, columns + PAD], element,
                             memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>"))


def f32_zero() -> ir.Value:
    return arith.ConstantOp(ir.F32Type.get(), 0.0).result


@dataclass
class Warp:
    """The lane's coordinates in a warp of `element` products (f16 or bf16)."""
    element: ir.Type
    lane: ir.Value

    def __post_init__(self) -> None:
        self.g = arith.DivUIOp(self.lane, index_const(4)).result   # row of an 8
        self.t = arith.RemUIOp(self.lane, index_const(4)).result   # lane of a quad
        self.two_t = mul(self.t, 2)
        # ldmatrix x4: lanes 8m .. 8m + 7 give the eight row addresses of matrix m
        self._row = arith.RemUIOp(self.lane, index_const(8)).result
        matrix = arith.DivUIOp(self.lane, index_const(8)).result
        self._low = mul(arith.RemUIOp(matrix, index_const(2)).result, 8)   # 8 (m % 2)
        self._high = mul(arith.DivUIOp(matrix, index_const(2)).result, 8)  # 8 (m // 2)
        self._dtype = "bf16" if isinstance(self.element, ir.BF16Type) else "f16"

    # ------------------------------------------------------------ fragments

    def _ldmatrix(self, tile: ir.Value, row: ir.Value, col: ir.Value,
                  transpose: bool) -> list:
        frag = nvgpu.LdMatrixOp(ir.VectorType.get([4, 2], self.element), tile, [row, col],
                                transpose, 4).result
        return [self._word(vector.ExtractOp(frag, [], [m]).result) for m in range(4)]

    @staticmethod
    def _word(pair: ir.Value) -> ir.Value:
        """A vector of two 16-bit elements as one i32 (1-D: the LLVM lowering takes no
        bitcast of a 2-D vector)."""
        word = vector.BitCastOp(ir.VectorType.get([1], ir.IntegerType.get_signless(32)),
                                pair).result
        return vector.ExtractOp(word, [], [0]).result

    def a_fragment(self, tile: ir.Value, row0, col0) -> list:
        """A of rows row0.. and columns col0.. of a row-major tile (16 x 16)."""
        return self._ldmatrix(tile, add(add(row0, self._row), self._low),
                              add(col0, self._high), False)

    def b_fragments_nk(self, tile: ir.Value, n0, k0) -> tuple[list, list]:
        """The B fragments of n0.. and n0 + 8.. (k0.. deep) of a tile that holds B
        transposed, one row per n (K's keys for Q K^T)."""
        words = self._ldmatrix(tile, add(add(n0, self._row), self._high),
                               add(k0, self._low), False)
        return words[:2], words[2:]

    def b_fragments_kn(self, tile: ir.Value, k0, n0) -> tuple[list, list]:
        """The B fragments of n0.. and n0 + 8.. (k0.. deep) of a tile that holds B as it
        is, one row per k (V's keys for P V): ldmatrix transposes."""
        words = self._ldmatrix(tile, add(add(k0, self._row), self._low),
                               add(n0, self._high), True)
        return words[:2], words[2:]

    def pack(self, low: ir.Value, high: ir.Value) -> ir.Value:
        """Two f32 rounded to the element type, as one i32 (`low` first in memory)."""
        pair = vector.FromElementsOp(ir.VectorType.get([2], self.element), [
            arith.TruncFOp(self.element, low).result,
            arith.TruncFOp(self.element, high).result]).result
        return self._word(pair)

    def a_from_accumulators(self, left: list, right: list) -> list:
        """The A fragment of a 16 x 16 block whose columns 0..7 are the accumulator
        tile `left` and 8..15 `right` (the C layout of m16n8k16 is its A layout)."""
        return [self.pack(left[0], left[1]), self.pack(left[2], left[3]),
                self.pack(right[0], right[1]), self.pack(right[2], right[3])]

    # ------------------------------------------------------------ the product

    def mma(self, acc: list, a: list, b: list) -> list:
        """acc + A B for one 16 x 8 accumulator tile."""
        f32 = ir.F32Type.get()
        text = (f"mma.sync.aligned.m16n8k16.row.col.f32.{self._dtype}.{self._dtype}.f32 "
                "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
        result = ir.Type.parse("!llvm.struct<(f32, f32, f32, f32)>")
        op = llvm.InlineAsmOp(result, list(a) + list(b) + list(acc), text,
                              "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3")
        return [llvm.ExtractValueOp(f32, op.result, [n]).result for n in range(4)]


def lane_of(tid: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(warp, lane) of a thread."""
    return (arith.DivUIOp(tid, index_const(WARP)).result,
            arith.RemUIOp(tid, index_const(WARP)).result)


def barrier() -> None:
    gpu.BarrierOp()
