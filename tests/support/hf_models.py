"""``transformers`` model classes from tiny configs, random weights (seeded;
nothing is downloaded): the real model definitions people import, small enough
for the test suite. Each builder returns ``(module in eval mode, inputs)``;
a model's output is its ``last_hidden_state`` (one tensor).

The model suite's own (larger) configs are in :mod:`bench.zoo`.
"""

from __future__ import annotations

import pytest
import torch

from bench import zoo

TOKENS = 8
VOCAB = 64
IMAGE = 32


#: a ``transformers`` model with its ``last_hidden_state`` as its output
Hidden = zoo.hidden(torch)


def _t():
    t = pytest.importorskip("transformers")
    t.logging.set_verbosity_error()
    return t


def _ids():
    return (torch.randint(0, VOCAB, (1, TOKENS)),)


def _image(side: int = IMAGE):
    return (torch.randn(1, 3, side, side),)


def bert():
    t = _t()
    cfg = t.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
    )
    return Hidden(t.BertModel(cfg, add_pooling_layer=False)), _ids()


def gpt2():
    t = _t()
    cfg = t.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=1,
        n_head=2,
        n_positions=16,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    return Hidden(t.GPT2Model(cfg)), _ids()


def llama():
    t = _t()
    cfg = t.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention: 2 query heads per kv head
        intermediate_size=64,
        max_position_embeddings=16,
        use_cache=False,
    )
    return Hidden(t.LlamaModel(cfg)), _ids()


def vit():
    t = _t()
    cfg = t.ViTConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=16,
        patch_size=8,
    )
    return Hidden(t.ViTModel(cfg, add_pooling_layer=False)), _image(16)


def resnet():
    t = _t()
    cfg = t.ResNetConfig(
        embedding_size=8,
        hidden_sizes=[8, 16],
        depths=[1, 1],
        layer_type="basic",
    )
    return Hidden(t.ResNetModel(cfg)), _image()


def mobilenetv2():
    t = _t()
    cfg = t.MobileNetV2Config(depth_multiplier=0.35, image_size=IMAGE)
    return Hidden(t.MobileNetV2Model(cfg, add_pooling_layer=False)), _image()


def convnext():
    t = _t()
    cfg = t.ConvNextConfig(num_stages=2, hidden_sizes=[8, 16], depths=[1, 1])
    return Hidden(t.ConvNextModel(cfg)), _image()


#: name -> builder; ``build(name)`` seeds torch and sets eval mode
BUILDERS = {
    "bert": bert,
    "gpt2": gpt2,
    "llama": llama,
    "vit": vit,
    "resnet": resnet,
    "mobilenetv2": mobilenetv2,
    "convnext": convnext,
}


def params(slow: set[str]) -> list:
    """The builders' names as pytest parameters, those in ``slow`` marked slow."""
    return [
        pytest.param(n, marks=pytest.mark.slow) if n in slow else n for n in BUILDERS
    ]


def build(name: str):
    """``(module in eval mode with random batch-norm statistics, inputs)``."""
    from polyc.frontends.torch.models import randomize_batch_norms

    torch.manual_seed(0)
    module, inputs = BUILDERS[name]()
    return randomize_batch_norms(module).eval(), inputs
