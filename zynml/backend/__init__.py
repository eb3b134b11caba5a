"""Backends: linalg-level MLIR -> an artifact a runtime loads.

    iree/   IREE, for the CPU and every GPU API (facts: target.py; iree-compile: compile.py)
    cuda/   ZynML's own NVIDIA path (chip facts: target.py; strategies/, compile.py,
            launch_plan.py)

Each backend is one package with a module of target facts and a stages table (stages.py)
that drives compilation and `zynml compile --emit`.
"""
