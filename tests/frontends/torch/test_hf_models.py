"""``transformers`` model classes (tiny configs, random weights) through all four
paths, each equal to eager torch at torchcheck's tolerance: ``from_torch``, the
reference interpreter, the host C (``polyc.build``) and the accelerator
(``polyc.compile`` on edge-npu, simulated).

One import per model serves the three runs. MobileNetV2 (17 blocks: ~90 s for
the three) is marked slow; its inverted-residual block runs every path in the
suite (``test_models.py``, ``test_torch_compile.py``). The ShuffleNet-style
channel split runs every path in ``test_ops_families.py``
(``split_shufflenet_unit``).
"""

from __future__ import annotations

import pytest

from polyc.frontends.torch.export import layer_of
from tests.support import hf_models
from tests.support.torchcheck import check

TARGETS = ("interpret", "host", "edge-npu")
#: a module path of each model that must be among the kernel's layers
LAYERS = {
    "bert": "model.encoder.layer.0.attention.self.query",
    "gpt2": "model.h.0.attn.c_attn",
    "llama": "model.layers.0.self_attn.k_proj",
    "vit": "model.embeddings.patch_embeddings.projection",
    "resnet": "model.encoder.stages.1.layers.0.layer.1.convolution",
    "mobilenetv2": "model.conv_1x1.convolution",
    "convnext": "model.encoder.stages.1.layers.0.pwconv2",
}
SLOW = {"mobilenetv2"}


@pytest.mark.parametrize("name", hf_models.params(SLOW))
def test_model_on_every_path_equals_eager(name):
    module, inputs = hf_models.build(name)
    kernel = check(module, inputs, targets=TARGETS)
    assert LAYERS[name] in {layer_of(s.origin) for s in kernel.statements}
