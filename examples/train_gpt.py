"""Train a GPT-2-style model on Shakespeare with ZynML, then sample from it.

    python examples/train_gpt.py --config toy --steps 50 --device cpu
    torchrun --standalone --nproc-per-node=4 examples/train_gpt.py --config gpt2 --device cuda

Ends with `final loss: F (first: L)`; writes a checkpoint (--checkpoint, atomic; --resume
continues from it with the same next loss) and the loss curve as a PNG (--plot). Under
PyTorch's launcher (torchrun) it trains data-parallel, one process per GPU (or CPU
process): --batch is the global batch, split over the processes, so the losses are those
of one process with that batch (zynml/models/distributed.py); process 0 alone logs and
writes files.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from zynml.errors import ZynMLError
from zynml.models import data, distributed
from zynml.models.gpt import CONFIGS, GPT, init_parameters, on_device
from zynml.models.sample import sample
from zynml.models.train import PRECISIONS, AdamW, Schedule, Trainer


class _Parser(argparse.ArgumentParser):
    """Usage errors exit with 1, as zynml's own commands do."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(1)


def arguments(argv):
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="toy")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=8,
                        help="sequences per step, over all processes under torchrun")
    parser.add_argument("--seq", type=int, help="tokens per sequence (default: the context)")
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--precision", choices=PRECISIONS,
                        help="bf16: mixed precision (bf16 weights and activations, f32 "
                             "master weights); default: bf16 on a GPU, f32 on the CPU")
    parser.add_argument("--no-overlap", dest="overlap", action="store_false",
                        help="under torchrun: sum the gradients over the processes "
                             "after the backward pass, not each block's during it")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--tokenizer", choices=("byte", "bpe"), default="byte")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stop-at", type=int,
                        help="stop after this step, as an interrupted run would (the "
                             "schedule still spans --steps); resume with --resume")
    parser.add_argument("--checkpoint", type=Path, help="save here at the end")
    parser.add_argument("--resume", type=Path, help="continue from this checkpoint")
    parser.add_argument("--plot", type=Path, help="write the loss curve here (PNG)")
    parser.add_argument("--sample", type=int, default=0, help="tokens to sample at the end")
    parser.add_argument("--top-k", type=int, default=0, help="0: greedy")
    args = parser.parse_args(argv)
    for name in ("steps", "batch", "accumulation"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    return args


def main(argv=None) -> int:
    args = arguments(argv)
    try:
        return train(args)
    except ZynMLError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


def train(args) -> int:
    from tqdm import tqdm
    config = CONFIGS[args.config]
    world = distributed.world_from_env()  # None: one process, not under torchrun
    rank, size = (world.rank, world.size) if world else (0, 1)
    main_process = rank == 0
    device = distributed.device_for(world, args.device)
    if args.batch % size:
        raise distributed.DistributedError(
            f"--batch {args.batch} does not split evenly over {size} processes: make it "
            f"a multiple of {size}")
    text = data.corpus_text()
    tokenizer = data.tokenizer_for(args.tokenizer, config.vocab, text)
    if tokenizer.vocab_size > config.vocab:
        raise ZynMLError(f"the tokenizer has {tokenizer.vocab_size} ids, more than the "
                         f"model's vocabulary ({config.vocab})")
    train_ids, _ = data.split(tokenizer.encode(text))
    seq = args.seq or config.context
    batches = data.Batches(train_ids, args.batch, seq, args.seed, rank, size)
    # the same seed everywhere: every process starts from the same parameters
    model = GPT(config, on_device(init_parameters(config, args.seed), device), device)
    schedule = Schedule(max_lr=args.lr, min_lr=args.lr / 10, warmup=args.warmup,
                        steps=args.steps)
    all_reduce = distributed.GradientAllReduce(world, device) \
        if size > 1 else None
    precision = args.precision or ("bf16" if device.startswith("cuda") else "f32")
    trainer = Trainer(model, schedule, AdamW(), args.accumulation, all_reduce, precision,
                      overlap=args.overlap)
    if args.resume:
        trainer.load(args.resume, batches)
    losses = []
    tokens_per_step = args.batch * seq * args.accumulation
    last = min(args.steps, args.stop_at or args.steps)
    bar = tqdm(range(trainer.step_count, last), desc="train", unit="step",
               disable=not main_process)
    # each step is queued before the last one's loss is read (which waits for that
    # step only), so the GPU has the next step's work while the host reads and logs
    queued, start = None, time.perf_counter()
    for _ in bar:
        step = trainer.queue_step(batches)
        if queued is not None:
            report(bar, losses, queued, tokens_per_step, start)
            start = time.perf_counter()
        queued = step
    if queued is not None:
        report(bar, losses, queued, tokens_per_step, start)
    if all_reduce is not None:
        all_reduce.close()
    if not main_process:
        return 0
    if args.checkpoint:
        trainer.save(args.checkpoint, batches)
    if args.plot and losses:
        plot(losses, trainer.step_count - len(losses), args.plot)
    if args.sample:
        prompt = tokenizer.encode("ROMEO.\n")
        out = sample(model, prompt, args.sample, top_k=args.top_k, seed=args.seed)
        print(tokenizer.decode(out))
    if losses:
        print(f"final loss: {losses[-1]:.4f} (first: {losses[0]:.4f})")
    return 0


def report(bar, losses: list, queued, tokens: int, start: float) -> None:
    """Read a step's loss (waiting for it) and show it with the tokens per second since
    the last report."""
    losses.append(float(queued))
    rate = tokens / (time.perf_counter() - start)
    bar.set_postfix(loss=f"{losses[-1]:.4f}", tok_s=f"{rate:,.0f}")


def plot(losses, first_step: int, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(range(first_step, first_step + len(losses)), losses)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats per token)")
    ax.set_title("ZynML GPT training loss")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
