"""``torch.compile(model, backend="polyc")``: registration, numerics, fallbacks."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch
from torch import nn

from polyc.frontend import torch_compile
from polyc.frontend.torch_compile import EagerFallbackWarning
from polyc.frontend.torch_models import MLP, TransformerBlock
from tests.torchcheck import assert_close


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    torch_compile.reset()
    yield
    torch._dynamo.reset()


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_import_polyc_does_not_import_torch():
    assert _python("import sys, polyc; print('torch' in sys.modules)") == "False"


def test_entry_point_loads_without_importing_torch_or_polyc_first():
    out = _python(
        "import sys\n"
        "from importlib.metadata import entry_points\n"
        "(ep,) = entry_points(group='torch_dynamo_backends', name='polyc')\n"
        "print('polyc' in sys.modules, 'torch' in sys.modules)\n"
        "fn = ep.load()\n"
        "print(fn.__module__, fn.__name__)\n"
    )
    assert out.splitlines() == [
        "False False",
        "polyc.frontend.torch_compile polyc_backend",
    ]


def test_torch_resolves_the_name_to_the_backend():
    from torch._dynamo.backends.registry import lookup_backend

    assert lookup_backend("polyc") is torch_compile.polyc_backend


def _same(compiled, model, *inputs):
    with torch.no_grad():
        got = compiled(*inputs)
        ref = model(*inputs)
    assert isinstance(got, torch.Tensor)
    assert_close(got.numpy(), ref.numpy(), "torch.compile(backend='polyc')")


def test_mlp_equals_eager_and_recompiles_per_shape():
    torch.manual_seed(0)
    model = MLP().eval()
    compiled = torch.compile(model, backend="polyc")
    _same(compiled, model, torch.randn(8, 64))
    _same(compiled, model, torch.randn(3, 64))
    recs = torch_compile.records()
    assert recs and all(r.status == "compiled" for r in recs)


def test_transformer_block_equals_eager():
    torch.manual_seed(1)
    model = TransformerBlock(256, 8, 1024).eval()
    compiled = torch.compile(model, backend="polyc")
    _same(compiled, model, torch.randn(1, 64, 256))
    (rec,) = torch_compile.records()
    assert rec.status == "compiled" and len(rec.kernels) == 1


def test_interpret_target():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh()).eval()
    compiled = torch.compile(model, backend="polyc", options={"target": "interpret"})
    _same(compiled, model, torch.randn(2, 4))


def with_break(x):
    y = torch.relu(x) * 2
    print("between graphs")
    return y + 1


def test_graph_break_runs_python_between_two_polyc_graphs(capsys):
    compiled = torch.compile(with_break, backend="polyc")
    x = torch.randn(5)
    _same(compiled, with_break, x)
    assert "between graphs" in capsys.readouterr().out
    recs = torch_compile.records()
    assert [r.status for r in recs] == ["compiled", "compiled"]
    text = torch_compile.report()
    assert "2 graph(s), 2 compiled, 0 partly eager, 0 eager" in text
    assert "graph breaks (run in Python between graphs): 1" in text


def with_cumsum(x):
    return torch.cumsum(torch.relu(x), 0) + 1


def test_unsupported_op_alone_runs_eagerly_and_the_rest_in_polyc():
    compiled = torch.compile(with_cumsum, backend="polyc")
    x = torch.randn(6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _same(compiled, with_cumsum, x)
    fallbacks = [w for w in caught if issubclass(w.category, EagerFallbackWarning)]
    assert len(fallbacks) == 1
    text = str(fallbacks[0].message)
    assert text.startswith(
        "polyc: graph 0 runs aten.cumsum.default (node cumsum at test_torch_compile.py:"
    )
    assert "in eager PyTorch and the rest in 2 polyc kernel(s) because" in text
    assert "aten.cumsum.default is not supported" in text
    (rec,) = torch_compile.records()
    assert rec.status == "partial" and len(rec.kernels) == 2
    report = torch_compile.report()
    assert "1 graph(s), 0 compiled, 1 partly eager, 0 eager" in report
    assert "2 polyc kernel(s) of 2 statements; eager: aten.cumsum.default" in report


def only_cumsum(x):
    return torch.cumsum(x, 0)


def test_graph_with_nothing_to_lower_runs_eagerly_and_is_reported():
    compiled = torch.compile(only_cumsum, backend="polyc")
    x = torch.randn(6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _same(compiled, only_cumsum, x)
    fallbacks = [w for w in caught if issubclass(w.category, EagerFallbackWarning)]
    assert "graph 0 runs in eager PyTorch because" in str(fallbacks[0].message)
    (rec,) = torch_compile.records()
    assert rec.status == "eager"
    assert "1 graph(s), 0 compiled, 0 partly eager, 1 eager" in torch_compile.report()


def test_unknown_option():
    compiled = torch.compile(MLP(), backend="polyc", options={"tiles": 4})
    with pytest.raises(Exception, match=r"unknown option\(s\) \['tiles'\]"):
        compiled(torch.randn(2, 64))


class Cumsum(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 1)


def test_partly_eager_model_with_weights():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), Cumsum(), nn.Linear(8, 3))
    model = model.eval()
    compiled = torch.compile(model, backend="polyc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerFallbackWarning)
        _same(compiled, model, torch.randn(2, 4))
    (rec,) = torch_compile.records()
    assert rec.status == "partial" and len(rec.kernels) == 2
    assert sorted(len(k.statements) for k in rec.kernels) == [2, 3]


def test_accelerator_target_keeps_the_compiled_kernel_for_its_report():
    from polyc.frontend.torch_report import model_report

    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    compiled = torch.compile(model, backend="polyc", options={"config": "tiny"})
    _same(compiled, model, torch.randn(2, 4))
    (rec,) = torch_compile.records()
    (kernel,) = rec.compiled
    report = model_report(kernel)
    # placed by the accelerator scheduler: a row per unit it fused ("0 + 1")
    assert [n for c in report.layers for n in c.name.split(" + ")] == ["0", "1", "2"]
    assert sum(c.cycles for c in report.layers) == report.cycles
