"""ZynML's MLIR dialects (installed as `zynml.dialects`)."""
from .cir import load_cir_dialect, new_context

__all__ = ["load_cir_dialect", "new_context"]
