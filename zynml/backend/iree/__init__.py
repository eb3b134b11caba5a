"""IREE as a backend: every target's `iree-compile` flags and runtime driver as data
(target.py), and `iree-compile` run as a subprocess on MLIR text (compile.py): the
`iree.compiler` Python package cannot share a process with `mlir`."""
