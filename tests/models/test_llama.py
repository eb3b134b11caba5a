"""The Llama decoder of zynml.models (zynml/models/llama.py) on the CPU: every decode
step's logits against the same model in PyTorch (f32 to 1e-4, bf16 to 1e-2), greedy
tokens equal, graph replay equal to the step's calls one by one bit for bit, and the
token and position written between replays without a new capture; Hugging Face's
LlamaForCausalLM where transformers is installed."""
from __future__ import annotations

import math

import numpy as np
import pytest

from zynml.errors import ZynMLError
from zynml.models.llama import CONFIGS, Llama, LlamaConfig, init_parameters, parameter_shapes

from conftest import assert_close

TINY = CONFIGS["tiny"]
BATCH, CONTEXT, STEPS = 3, 13, 5


@pytest.fixture(scope="module")
def run():
    """One model, a prompt, and its generation by graph replay."""
    seed = np.random.SeedSequence().entropy % 2 ** 32
    print(f"seed {seed}")
    params = init_parameters(TINY, seed=seed)
    prompt = np.random.default_rng(seed).integers(0, TINY.vocab, (BATCH, 4))
    model = Llama(TINY, params, "cpu", batch=BATCH, context=CONTEXT)
    return params, prompt, model, model.generate(prompt, STEPS)


def test_every_step_matches_pytorch(run):
    torch = pytest.importorskip("torch")
    from zynml.models.llama_torch import TorchLlama
    params, prompt, _, ours = run
    with torch.no_grad():
        tokens, logits = TorchLlama(TINY, params, BATCH, CONTEXT).generate(prompt, STEPS)
    assert len(ours.logits) == len(logits) == STEPS
    for got, want in zip(ours.logits, logits):
        assert_close(got, want, rtol=1e-4)
    np.testing.assert_array_equal(ours.tokens, tokens)
    assert ours.tokens.shape == (BATCH, STEPS)


def test_replay_equals_the_calls_one_by_one_bit_for_bit(run):
    params, prompt, model, ours = run
    direct = Llama(TINY, params, "cpu", batch=BATCH, context=CONTEXT).generate(
        prompt, STEPS, use_graph=False)
    np.testing.assert_array_equal(direct.tokens, ours.tokens)
    for got, want in zip(ours.logits, direct.logits):
        np.testing.assert_array_equal(got, want)
    assert model.graph.captures == 1
    # norm, qkv, rope, attention, o (+ x); norm, gate and up (one product), swiglu, down
    # (+ x): the heads of one query row merge without a call, the residual adds within
    # the products
    calls_per_layer = 9
    # the embedding and its copy into the residual stream; the final norm, head, argmax
    assert f"{2 + TINY.layers * calls_per_layer + 3} calls" in repr(model.graph)


def test_a_new_prompt_replays_the_same_graph(run):
    params, prompt, model, _ = run
    other = (prompt[:, :2] + 7) % TINY.vocab
    again = model.generate(other, 3)  # new tokens and positions: written, not captured
    fresh = Llama(TINY, params, "cpu", batch=BATCH, context=CONTEXT).generate(
        other, 3, use_graph=False)
    assert model.graph.captures == 1
    np.testing.assert_array_equal(again.tokens, fresh.tokens)
    for got, want in zip(again.logits, fresh.logits):
        np.testing.assert_array_equal(got, want)


def test_bf16_steps_match_pytorch_in_bf16():
    torch = pytest.importorskip("torch")
    from zynml.models.llama_torch import TorchLlama
    config = TINY.with_dtype("bfloat16")
    params = init_parameters(config, seed=5)
    prompt = np.random.default_rng(5).integers(0, config.vocab, (2, 3))
    ours = Llama(config, params, "cpu", batch=2, context=7).generate(prompt, 3)
    with torch.no_grad():
        _, logits = TorchLlama(config, params, 2, 7).generate(prompt, 3)
    for got, want in zip(ours.logits, logits):
        assert_close(got, want, rtol=1e-2)


def test_hugging_face_llama_gives_the_same_logits(run):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from zynml.models.llama_torch import hugging_face_model
    params, prompt, _, ours = run
    model = hugging_face_model(TINY, params)
    sequence = np.concatenate([prompt, ours.tokens[:, :-1]], axis=1)
    with torch.no_grad():
        logits = model(torch.tensor(sequence, dtype=torch.long)).logits.numpy()
    for step, got in enumerate(ours.logits):
        assert_close(got, logits[:, prompt.shape[1] - 1 + step], rtol=1e-4)


def test_the_issue_model_has_its_shape():
    config = CONFIGS["1b"]
    count = sum(math.prod(s) for s in parameter_shapes(config).values())
    assert count == 1_104_218_112  # 262 M of them in the embedding and the head
    assert (config.layers, config.hidden, config.heads, config.kv_heads, config.head_dim,
            config.vocab, config.dtype) == (16, 2048, 32, 8, 64, 32000, "bfloat16")


def test_mistakes_are_errors(run):
    _, _, model, _ = run
    with pytest.raises(ZynMLError, match="the prompt must be"):
        model.generate(np.zeros((BATCH + 1, 2), np.int64), 1)
    with pytest.raises(ZynMLError, match="do not fit the context of 13"):
        model.generate(np.zeros((BATCH, 10), np.int64), 5)
    with pytest.raises(ZynMLError, match="tokens must be 3 ids in 0..66"):
        model.set_inputs(np.array([0, 1, 67]), 0)
    with pytest.raises(ZynMLError, match="not a multiple of 3 KV heads"):
        LlamaConfig(layers=1, hidden=8, heads=4, kv_heads=3, head_dim=2, ffn=8, vocab=5,
                    context=4)
    with pytest.raises(ZynMLError, match="parameters missing: norm"):
        params = init_parameters(TINY)
        del params["norm"]
        Llama(TINY, params, "cpu")
