"""Greedy generation with a Llama-style decoder (random weights), one graph replay per
token.

    python examples/decode_llama.py --config tiny --device cpu --prompt 3,14,15 --tokens 8
    python examples/decode_llama.py --config 1b --device cuda --batch 16 --tokens 64

The model (zynml/models/llama.py) is written with the device API and the kernel
library; its decode step is captured once (zynml.capture) and replayed for every token,
the token and position written in place between replays. Prints the tokens of each
sequence, then `N tokens in S s (T tokens/s), 1 capture, K calls per step`.
`--check` also runs the same model in PyTorch (the `torch` extra) and prints the largest
relative difference of the logits.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from zynml.errors import ZynMLError
from zynml.models.llama import CONFIGS, DTYPES, Llama, init_parameters


class _Parser(argparse.ArgumentParser):
    """Usage errors exit with 1, as zynml's own commands do."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(1)


def _ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of "
                                         "token ids") from None
    return ids


def arguments(argv):
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--dtype", choices=DTYPES, help="default: the config's")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=_ids, default=[1],
                        help="token ids, comma-separated (the same for every sequence)")
    parser.add_argument("--tokens", type=int, default=8, help="tokens to generate")
    parser.add_argument("--context", type=int, help="KV-cache positions (default: "
                        "prompt + tokens)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eager", action="store_true",
                        help="run the step's calls one by one instead of replaying a graph")
    parser.add_argument("--check", action="store_true", help="compare with PyTorch")
    args = parser.parse_args(argv)
    for name in ("batch", "tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    config = CONFIGS[args.config]
    if any(not 0 <= t < config.vocab for t in args.prompt):
        parser.error(f"--prompt ids must be in 0..{config.vocab - 1}")
    args.context = args.context or len(args.prompt) + args.tokens
    if args.context < len(args.prompt) + args.tokens - 1:
        parser.error(f"--context {args.context} is shorter than the prompt and the tokens")
    return args


def main(argv=None) -> int:
    args = arguments(argv)
    try:
        return generate(args)
    except ZynMLError as err:
        print(err, file=sys.stderr)  # "error: ..." (located where it has a place)
        return 1


def generate(args) -> int:
    config = CONFIGS[args.config]
    if args.dtype:
        config = config.with_dtype(args.dtype)
    params = init_parameters(config, args.seed)
    model = Llama(config, params, args.device, batch=args.batch, context=args.context)
    prompt = np.tile(np.array(args.prompt, np.int64), (args.batch, 1))
    model.generate(prompt, 1, use_graph=not args.eager)  # compiles, captures
    start = time.perf_counter()
    out = model.generate(prompt, args.tokens, use_graph=not args.eager)
    seconds = time.perf_counter() - start
    for row in out.tokens[:4]:
        print(" ".join(str(int(t)) for t in row))
    steps = len(args.prompt) + args.tokens - 1
    graph = model.graph
    calls = f", 1 capture, {len(graph.outputs)} calls per step" if graph else ", eager"
    print(f"{steps * args.batch} tokens in {seconds:.3f} s "
          f"({steps * args.batch / seconds:,.1f} tokens/s){calls}")
    if args.check:
        difference = _check(config, params, args, prompt, out)
        print(f"largest relative difference from PyTorch: {difference:.2e}")
    return 0


def _check(config, params, args, prompt, out) -> float:
    import torch
    from zynml.models.llama_torch import TorchLlama
    device = "cuda" if args.device.startswith("cuda") else "cpu"
    with torch.no_grad():
        _, logits = TorchLlama(config, params, args.batch, args.context, device).generate(
            prompt, args.tokens)
    return max(float(np.abs(a - b).max() / np.abs(b).max())
               for a, b in zip(out.logits, logits))


if __name__ == "__main__":
    sys.exit(main())
