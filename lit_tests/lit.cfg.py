# lit configuration of ZynML's FileCheck tests. Run from the repository root:
#
#     lit -v lit_tests
#
# Tests are `.mlir` (through zynml-opt), `.zyn` (ZynML source through zynml-opt's front
# end) and `.py` files; RUN lines use the substitutions below, e.g.
#     // RUN: zynml-opt %s --pass-pipeline='%cir_to_linalg_pipeline' | filecheck %s
import os
import shutil
import subprocess
import sys
from pathlib import Path

import lit.formats

config.name = "ZynML"
config.test_format = lit.formats.ShTest(execute_external=False)  # lit's own shell: `not`, `diff`
config.suffixes = [".mlir", ".zyn", ".py"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
# %t files and lit's .lit_test_times.txt go under lit_tests/Output/ (git-ignored).
config.test_exec_root = os.path.join(config.test_source_root, "Output")

for name in ("PATH", "HOME", "PYTHONPATH", "PYENV_ROOT", "PYENV_VERSION", "LD_LIBRARY_PATH",
             "TMPDIR"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
config.environment.pop("ZYNML_REPRODUCER_DIR", None)  # tests ask for reproducers themselves


def _tool(script: str, module: str) -> str:
    """The console script beside this Python (not a pyenv shim), else `python -m`."""
    beside = Path(sys.executable).parent / script
    if beside.exists():
        return str(beside)
    found = shutil.which(script)
    return found if found else f"{sys.executable} -m {module}"


def _word(name: str) -> str:
    """A regex matching `name` as a command word, not inside a path or a longer name."""
    return rf"(?<![\w./-]){name}(?![\w.-])"


filecheck = _tool("filecheck", "filecheck")
# The pipeline `zynml` compiles with (zynml.compiler), so pipeline tests follow it.
from zynml.compiler import CIR_TO_LINALG_PIPELINE  # noqa: E402

config.substitutions += [
    ("%cir_to_linalg_pipeline", CIR_TO_LINALG_PIPELINE),
    ("%PYTHON", sys.executable),
    (_word("zynml-opt"), _tool("zynml-opt", "zynml.cli.opt")),
    (_word("zynml"), _tool("zynml", "zynml.cli.main")),
    (_word("filecheck"), filecheck),
    (_word("FileCheck"), filecheck),
]

if shutil.which("ptxas"):
    config.available_features.add("ptxas")
try:
    if subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0:
        config.available_features.add("gpu")
except (OSError, subprocess.TimeoutExpired):
    pass
