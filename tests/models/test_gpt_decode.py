"""Decoding from a GPT with KV caches (zynml/models/gpt_decode.py) and sampling through it
(zynml/models/sample.py), on the CPU: each step's logits equal the full forward's over
the prefix (the model recomputing its context), graph replay equals the step's calls bit
for bit, greedy sampling picks the tokens the full forward picks, and the window slides
past the context."""
from __future__ import annotations

import numpy as np
import pytest

from zynml.errors import ZynMLError
from zynml.models.gpt import GPT, GPTConfig, init_parameters
from zynml.models.gpt_decode import GPTDecoder
from zynml.models.sample import sample

from conftest import assert_close

CONFIG = GPTConfig(layers=2, hidden=36, heads=3, context=11, vocab=37)


@pytest.fixture(scope="module")
def model():
    """Random weights with biases and norms away from their initial 0 and 1."""
    seed = np.random.SeedSequence().entropy % 2 ** 32
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    params = {name: (value + 0.1 * rng.standard_normal(value.shape)).astype(np.float32)
              for name, value in init_parameters(CONFIG, seed=seed).items()}
    return GPT(CONFIG, params, "cpu")


def _full_forward_logits(model, ids):
    return [model.logits(ids[:, :t + 1]) for t in range(ids.shape[1])]


@pytest.mark.parametrize("batch, length", [(1, 1), (3, 7)])
def test_each_step_matches_the_full_forward(model, batch, length):
    ids = np.random.default_rng(length).integers(0, CONFIG.vocab, (batch, length))
    decoder = GPTDecoder(CONFIG, model.params, "cpu", batch=batch)
    decoder.capture()
    for got, want in zip(decoder.logits_of(ids), _full_forward_logits(model, ids)):
        assert_close(got, want)


def test_replay_equals_the_calls_and_serves_a_second_sequence(model):
    ids = np.random.default_rng(1).integers(0, CONFIG.vocab, (2, 6))
    replayed = GPTDecoder(CONFIG, model.params, "cpu", batch=2)
    replayed.capture()
    direct = GPTDecoder(CONFIG, model.params, "cpu", batch=2)
    for a, b in zip(replayed.logits_of(ids), direct.logits_of(ids, use_graph=False)):
        np.testing.assert_array_equal(a, b)
    replayed.reset()
    again = replayed.logits_of(ids[:, ::-1].copy())
    for got, want in zip(again, _full_forward_logits(model, ids[:, ::-1])):
        assert_close(got, want)


def test_greedy_sampling_picks_the_full_forwards_tokens(model):
    prompt = np.array([5, 36, 0])
    expected = list(prompt)
    for _ in range(CONFIG.context - len(prompt)):  # up to a full context
        logits = model.logits(np.asarray([expected]))[0]
        expected.append(int(np.argmax(logits)))
    got = sample(model, prompt, CONFIG.context - len(prompt))
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int32


def test_sampling_slides_past_the_context(model):
    prompt = np.arange(14) % CONFIG.vocab  # longer than the context: its tail is used
    out = sample(model, prompt, 20, top_k=5, temperature=0.8, seed=3)
    assert len(out) == 34 and out.min() >= 0 and out.max() < CONFIG.vocab
    np.testing.assert_array_equal(out[:14], prompt)
    np.testing.assert_array_equal(out, sample(model, prompt, 20, top_k=5, temperature=0.8,
                                              seed=3))
    np.testing.assert_array_equal(sample(model, prompt, 9, top_k=1),
                                  sample(model, prompt, 9))  # top-1 is greedy


def test_bad_inputs_are_errors(model):
    decoder = GPTDecoder(CONFIG, model.params, "cpu", batch=2)
    with pytest.raises(ZynMLError, match="tokens must be 2 ids in 0..36"):
        decoder.set_inputs(np.array([1, 37]), 0)
    with pytest.raises(ZynMLError, match="position 11 is outside the context of 11"):
        decoder.set_inputs(np.array([1, 2]), 11)
    with pytest.raises(ZynMLError, match=r"replay\(\) needs capture\(\) first"):
        decoder.replay()
    with pytest.raises(ZynMLError, match="batch 0 must be positive"):
        GPTDecoder(CONFIG, model.params, "cpu", batch=0)
    with pytest.raises(ZynMLError, match="a 1-d array of at least one token"):
        sample(model, np.zeros((1, 3), np.int64), 2)
