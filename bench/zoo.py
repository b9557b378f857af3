"""The model suite's models: ``transformers`` model classes built from small
configs, and the repository's own example networks, with random weights (seeded;
nothing is downloaded).

Each :class:`Model` builds ``(module, example_inputs)`` for a dtype: ``float16``
(or ``bfloat16``)
converts the module's parameters and its floating-point inputs (token ids stay
integers). A ``transformers`` model returns a ``ModelOutput``; :class:`Hidden`
keeps its ``last_hidden_state`` so that every model has one tensor out. Not a
benchmark (no ``main``): ``bench.models`` runs these.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

#: the image side and the sequence length of the suite's inputs (the issue's)
IMAGE = 64
TOKENS = 16
VOCAB = 256


@dataclass(frozen=True)
class Model:
    """One model of the suite.

    ``make(torch, transformers)`` returns ``(module, inputs)`` in float32 with
    random weights; ``quick`` puts it in ``--quick``'s subset; ``family`` is
    ``cnn`` or ``transformer`` (for the tables); ``source`` says where the
    definition comes from.
    """

    name: str
    family: str
    source: str
    make: Callable
    quick: bool = False
    #: the dtypes it is built in (``int8``: quantized with PT2E, see :func:`int8`)
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")

    def build(self, dtype: str = "float32"):
        """``(module in eval mode, example inputs)`` in ``dtype``; for ``int8``
        the module is quantized with PT2E (:func:`int8`) and takes float inputs.

        Raises:
            ValueError: for a dtype not in the model's ``dtypes``.
        """
        import torch

        if dtype not in self.dtypes:
            raise ValueError(
                f"zoo: {self.name} is not built in {dtype!r}; it is built in "
                f"{', '.join(self.dtypes)}"
            )
        transformers = transformers_module() if self.source == "transformers" else None
        torch.manual_seed(0)
        module, inputs = self.make(torch, transformers)
        module = module.eval()
        if dtype in ("float16", "bfloat16"):
            module = module.to(getattr(torch, dtype))
            inputs = tuple(
                x.to(getattr(torch, dtype)) if x.is_floating_point() else x
                for x in inputs
            )
        elif dtype == "int8":
            module = int8(module, inputs)
        return module, inputs


def transformers_module():
    """``transformers``, imported, its logging down to errors (it warns about the
    token ids of the small configs)."""
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


def int8(module, inputs, calibration: int = 8):
    """``module`` quantized with PyTorch 2 export quantization: torchao's
    ``prepare_pt2e`` with the XNNPACK quantizer's symmetric int8 configuration
    (per-tensor activations, per-channel weights), calibrated on ``calibration``
    seeded random batches shaped like ``inputs``, then ``convert_pt2e``. Needs
    ``torchao`` (the ``test`` extra)."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XNNPACKQuantizer's deprecation
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.testing.pt2e._xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        config = get_symmetric_quantization_config(is_per_channel=True)
        quantizer = XNNPACKQuantizer().set_global(config)
        graph = torch.export.export(module.eval(), tuple(inputs)).module()
        prepared = prepare_pt2e(graph, quantizer)
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for _ in range(calibration):
                prepared(*(torch.randn(x.shape, generator=gen) for x in inputs))
        return convert_pt2e(prepared)


def hidden(torch):
    class Hidden(torch.nn.Module):
        """A ``transformers`` model with its ``last_hidden_state`` as its output."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x):
            return self.model(x).last_hidden_state

    return Hidden


def _image(torch, side: int = IMAGE):
    return (torch.randn(1, 3, side, side),)


def _ids(torch):
    return (torch.randint(0, VOCAB, (1, TOKENS)),)


# transformers models ---------------------------------------------------------------


def _hf_resnet(torch, t):
    cfg = t.ResNetConfig(
        embedding_size=32,
        hidden_sizes=[32, 64, 128, 256],
        depths=[1, 1, 1, 1],
        layer_type="basic",
    )
    return hidden(torch)(t.ResNetModel(cfg)), _image(torch)


def _hf_mobilenetv2(torch, t):
    cfg = t.MobileNetV2Config(depth_multiplier=0.35, image_size=IMAGE)
    return hidden(torch)(t.MobileNetV2Model(cfg, add_pooling_layer=False)), _image(
        torch
    )


def _hf_convnext(torch, t):
    cfg = t.ConvNextConfig(hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 2, 1])
    return hidden(torch)(t.ConvNextModel(cfg)), _image(torch)


def _hf_efficientnet(torch, t):
    from transformers.models.efficientnet.modeling_efficientnet import round_filters

    cfg = t.EfficientNetConfig(
        width_coefficient=0.25, depth_coefficient=0.25, image_size=IMAGE
    )
    # the top batch norm has hidden_dim channels, the top conv round_filters(1280):
    # the default hidden_dim (2560) matches only width_coefficient=2
    cfg.hidden_dim = round_filters(cfg, 1280)
    return hidden(torch)(t.EfficientNetModel(cfg)), _image(torch)


def _hf_vit(torch, t):
    cfg = t.ViTConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        image_size=32,
        patch_size=8,
    )
    return hidden(torch)(t.ViTModel(cfg, add_pooling_layer=False)), _image(torch, 32)


def _hf_bert(torch, t):
    cfg = t.BertConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
        max_position_embeddings=64,
    )
    return hidden(torch)(t.BertModel(cfg, add_pooling_layer=False)), _ids(torch)


def _hf_gpt2(torch, t):
    cfg = t.GPT2Config(
        vocab_size=VOCAB,
        n_embd=128,
        n_layer=2,
        n_head=4,
        n_positions=64,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    return hidden(torch)(t.GPT2Model(cfg)), _ids(torch)


def _hf_llama(torch, t):
    cfg = t.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention: 2 query heads per kv head
        intermediate_size=256,
        max_position_embeddings=64,
        use_cache=False,
    )
    return hidden(torch)(t.LlamaModel(cfg)), _ids(torch)


# the repository's own examples (polyc.frontends.torch.models) -----------------------


def _mlp(torch, _):
    from polyc.frontends.torch.models import MLP

    return MLP(64, 128, 10), (torch.randn(4, 64),)


def _resnet18(torch, _):
    from polyc.frontends.torch.models import ResNet18, randomize_batch_norms

    return randomize_batch_norms(ResNet18(num_classes=10, width=64)), _image(torch)


def _inverted_residual(torch, _):
    from polyc.frontends.torch.models import InvertedResidual, randomize_batch_norms

    block = randomize_batch_norms(InvertedResidual(32, 32))
    return block, (torch.randn(1, 32, 16, 16),)


def _transformer_block(torch, _):
    from polyc.frontends.torch.models import TransformerBlock

    return TransformerBlock(128, 4, 512), (torch.randn(1, TOKENS, 128),)


def res_blocks(torch, width: int = 16, blocks: int = 2, side: int = 16):
    """A ResNet-style block stack: a conv-bn-relu stem, ``blocks`` basic blocks
    (conv-bn-relu, conv-bn, the residual add, relu), a linear head."""
    nn = torch.nn

    def conv_bn(c_in, c_out):
        return nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out)
        )

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = conv_bn(width, width), conv_bn(width, width)

        def forward(self, x):
            return torch.relu(self.b(torch.relu(self.a(x))) + x)

    class ResBlocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(3, width)
            self.blocks = nn.Sequential(*(Block() for _ in range(blocks)))
            self.head = nn.Linear(width * side * side, 10)

        def forward(self, x):
            y = self.blocks(torch.relu(self.stem(x)))
            return self.head(torch.flatten(y, 1))

    from polyc.frontends.torch.models import randomize_batch_norms

    return randomize_batch_norms(ResBlocks()), (torch.randn(1, 3, side, side),)


def linear_stack(torch, sizes=(256, 256, 256, 64), batch: int = 16):
    """Linear-ReLU layers of ``sizes`` (the last without ReLU)."""
    layers = []
    for n, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(torch.nn.Linear(a, b))
        if n < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers), (torch.randn(batch, sizes[0]),)


QUANT = ("float32", "float16", "bfloat16", "int8")

MODELS: tuple[Model, ...] = (
    # smallest first: a suite stopped midway has measured the most models
    Model("mlp", "mlp", "polyc", _mlp, quick=True),
    Model("inverted-residual", "cnn", "polyc", _inverted_residual, quick=True),
    Model("linear-stack", "mlp", "polyc", lambda t, _: linear_stack(t), dtypes=QUANT),
    Model("res-blocks", "cnn", "polyc", lambda t, _: res_blocks(t), dtypes=QUANT),
    Model("transformer-block", "transformer", "polyc", _transformer_block),
    Model("hf-bert", "transformer", "transformers", _hf_bert, quick=True),
    Model("hf-gpt2", "transformer", "transformers", _hf_gpt2),
    Model("hf-llama", "transformer", "transformers", _hf_llama),
    Model("hf-vit", "transformer", "transformers", _hf_vit),
    Model("hf-resnet", "cnn", "transformers", _hf_resnet),
    Model("resnet18", "cnn", "polyc", _resnet18),
    Model("hf-convnext", "cnn", "transformers", _hf_convnext),
    Model("hf-mobilenetv2", "cnn", "transformers", _hf_mobilenetv2),
    Model("hf-efficientnet", "cnn", "transformers", _hf_efficientnet),
)


def model(name: str) -> Model:
    """The suite's model called ``name``.

    Raises:
        KeyError: naming the models there are.
    """
    for m in MODELS:
        if m.name == name:
            return m
    raise KeyError(f"no model {name!r}; the suite has {', '.join(names())}")


def names() -> list[str]:
    return [m.name for m in MODELS]
