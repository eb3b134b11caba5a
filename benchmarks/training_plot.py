"""GPT-2 small's training step with ZynML, as one PNG: against torch.compile, over GPUs,
and by operation.

    python benchmarks/training_plot.py [-o docs/training.png]

No GPU: the figures are the measurements recorded in docs/performance.md (each names
its session there; H200s), typed in below. Left: tokens per second and peak memory of
one step (16 x 1024 tokens, bf16 mixed precision), ZynML against torch.compile in the
same call (`benchmarks/train_gpt.py`). Middle: the speed-up of data-parallel training
over one GPU, the same batch per GPU (`benchmarks/scaling.py`), with the ideal line.
Right: where ZynML's step goes, by library operation (train_gpt.py's `--split`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from plots import save  # benchmarks/

# (side, tokens per second, peak GB), Session 41's first call (the gradients written into
# the flat buffer; its second call, on another machine: 503k against 443k)
ONE_GPU = [("ZynML", 516_000, 7.99), ("torch.compile", 451_000, 9.01)]
ONE_GPU_SESSION = 41

# (GPUs, speed-up over one GPU, session): two GPUs the median of Session 39's four runs
# with the overlapped sums (1.89-1.91x); four GPUs Session 27's
SCALING = [(1, 1.0, 39), (2, 1.90, 39), (4, 3.69, 27)]

# (operation, ms a step), Session 41's split; the step took 31.7 ms
BY_OPERATION = [
    ("linear_backward (48 calls)", 9.65),
    ("fused_linear_cross_entropy", 7.42),
    ("attention backward", 3.51),
    ("linear", 3.19),
    ("linear_residual", 1.50),
    ("layer_norm_backward", 1.41),
    ("attention", 1.40),
    ("gelu_backward", 1.15),
]
STEP_MS = 31.7


def plot(out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(17, 5.5))

    sides = [side for side, _, _ in ONE_GPU]
    left.bar(sides, [rate / 1e3 for _, rate, _ in ONE_GPU], color=["tab:blue", "tab:gray"])
    for number, (_, rate, peak) in enumerate(ONE_GPU):
        left.annotate(f"{rate / 1e3:.0f}k tokens/s\n{peak:.2f} GB peak",
                      (number, rate / 1e3), ha="center", va="bottom")
    left.set_ylabel("thousand tokens per second")
    left.set_ylim(0, max(rate for _, rate, _ in ONE_GPU) / 1e3 * 1.25)
    left.set_title(f"One H200, bf16 (session {ONE_GPU_SESSION})")

    gpus = [n for n, _, _ in SCALING]
    middle.plot(gpus, gpus, color="black", linestyle="--", label="ideal")
    middle.plot(gpus, [s for _, s, _ in SCALING], marker="o", color="tab:blue",
                label="ZynML + NCCL")
    for n, speedup, session in SCALING[1:]:
        middle.annotate(f"{speedup:.2f}x (s{session})", (n, speedup),
                        textcoords="offset points", xytext=(-10, -16))
    middle.set_xticks(gpus)
    middle.set_xlabel("H200s (16 x 1024 tokens each)")
    middle.set_ylabel("speed-up over one GPU")
    middle.set_title("Data-parallel training")
    middle.legend(loc="upper left")

    names = [name for name, _ in BY_OPERATION]
    right.barh(names, [ms for _, ms in BY_OPERATION], color="tab:blue")
    right.invert_yaxis()
    right.set_xlabel(f"ms of a {STEP_MS} ms step")
    right.set_title(f"ZynML's step by operation (session {ONE_GPU_SESSION})")

    figure.suptitle("GPT-2 small training with ZynML (docs/performance.md; s = session)")
    save(figure, out, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="docs/training.png")
    plot(Path(parser.parse_args().output))


if __name__ == "__main__":
    main()
