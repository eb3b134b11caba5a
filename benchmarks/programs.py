"""ZynML programs that more than one benchmark runs (each imports them by name)."""
from pathlib import Path

_PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"

# Row softmax as four blocks (two reductions, two maps), as a user would write it first;
# the tests run the same file.
SOFTMAX = (_PROGRAMS / "softmax_pipeline.zyn").read_text()

# BERT's FFN epilogues, each one kernel: layernorm(x + bias + residual) * gamma + beta
# (row_fused) and gelu(x + bias) (pointwise); the GPU tests run the same files.
BIAS_RESIDUAL_LAYERNORM = (_PROGRAMS / "bias_residual_layernorm.zyn").read_text()
BIAS_GELU = (_PROGRAMS / "bias_gelu.zyn").read_text()

# Dropout with rand's mask (the same on every device); tests/test_random.py runs it too.
DROPOUT = (_PROGRAMS / "dropout.zyn").read_text()

# Training steps of issue 18: AdamW updating param, m and v in place (one kernel), and
# embedding backward as a scatter-add into grad_w; tests/test_inplace.py and
# tests/test_scatter.py run the same files.
ADAMW_INPLACE = (_PROGRAMS / "training" / "adamw_inplace.zyn").read_text()
EMBEDDING_BACKWARD = (_PROGRAMS / "training" / "embedding_backward.zyn").read_text()

# Issue 22's rows written as a user would: RMSNorm + RoPE with two stores per pair
# (pipelines `interleaved` and `rotate_half`), and cross-entropy's per-row loss and mean.
RMS_NORM_ROPE = (_PROGRAMS / "rms_norm_rope_pairs.zyn").read_text()
CROSS_ENTROPY = (_PROGRAMS / "cross_entropy_rows.zyn").read_text()
