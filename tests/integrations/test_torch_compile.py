"""``torch.compile(model, backend="polyc")``: registration, numerics, fallbacks."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch
from torch import nn

import polyc
from polyc.errors import ArgumentError, ConfigError, VerificationError
from polyc.frontends.torch.models import MLP, TransformerBlock, randomize_batch_norms
from polyc.integrations.torch_compile import backend as torch_compile
from polyc.integrations.torch_compile.backend import EagerFallbackWarning
from tests.support.torchcheck import assert_close


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
        "polyc.integrations.torch_compile.backend polyc_backend",
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


def with_i0(x):
    return torch.special.i0(torch.relu(x)) + 1


def test_unsupported_op_alone_runs_eagerly_and_the_rest_in_polyc():
    compiled = torch.compile(with_i0, backend="polyc")
    x = torch.randn(6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _same(compiled, with_i0, x)
    fallbacks = [w for w in caught if issubclass(w.category, EagerFallbackWarning)]
    assert len(fallbacks) == 1
    text = str(fallbacks[0].message)
    assert text.startswith(
        "polyc: graph 0 runs aten.i0.default (node i0 at test_torch_compile.py:"
    )
    assert "in eager PyTorch and the rest in 2 polyc kernel(s) because" in text
    assert "aten.i0.default is not supported" in text
    (rec,) = torch_compile.records()
    assert rec.status == "partial" and len(rec.kernels) == 2
    report = torch_compile.report()
    assert "1 graph(s), 0 compiled, 1 partly eager, 0 eager" in report
    assert "2 polyc kernel(s) of 2 statements; eager: aten.i0.default" in report


def only_i0(x):
    return torch.special.i0(x)


def test_graph_with_nothing_to_lower_runs_eagerly_and_is_reported():
    compiled = torch.compile(only_i0, backend="polyc")
    x = torch.randn(6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _same(compiled, only_i0, x)
    fallbacks = [w for w in caught if issubclass(w.category, EagerFallbackWarning)]
    assert "graph 0 runs in eager PyTorch because" in str(fallbacks[0].message)
    (rec,) = torch_compile.records()
    assert rec.status == "eager"
    assert "1 graph(s), 0 compiled, 0 partly eager, 1 eager" in torch_compile.report()


class SpecialI0(nn.Module):
    def forward(self, x):
        return torch.special.i0(x)


def test_partly_eager_model_with_weights():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), SpecialI0(), nn.Linear(8, 3))
    model = model.eval()
    compiled = torch.compile(model, backend="polyc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerFallbackWarning)
        _same(compiled, model, torch.randn(2, 4))
    (rec,) = torch_compile.records()
    assert rec.status == "partial" and len(rec.kernels) == 2
    assert sorted(len(k.statements) for k in rec.kernels) == [2, 3]


def test_accelerator_target_keeps_the_compiled_kernel_for_its_report():
    from polyc.studies.model_report import model_report

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


# --- options: a mistake raises the polyc error at the first call, never runs eager


def _no_fallback(compiled, *args, error, match):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(error, match=match):
            compiled(*args)
    assert not [w for w in caught if issubclass(w.category, EagerFallbackWarning)]
    assert torch_compile.records() == []  # nothing compiled, nothing ran eagerly


def test_unknown_config_raises_at_the_first_call():
    compiled = torch.compile(MLP(), backend="polyc", options={"config": "nosuch"})
    _no_fallback(
        compiled,
        torch.randn(2, 64),
        error=ConfigError,
        match=r"load_config: no hardware description 'nosuch' because it is neither "
        r"a shipped config \(datacenter, edge-npu, hw-a, tiny\)",
    )


def test_bad_options_are_not_swallowed_by_suppress_errors():
    # with suppress_errors Dynamo turns a backend's exception into an eager run
    compiled = torch.compile(MLP(), backend="polyc", options={"config": "nosuch"})
    with torch._dynamo.config.patch(suppress_errors=True):
        _no_fallback(compiled, torch.randn(2, 64), error=ConfigError, match="nosuch")


@pytest.mark.parametrize(
    "options, match",
    [
        ({"tiles": 4}, r"unknown option\(s\) \['tiles'\] because the backend takes "),
        ({"target": "gpu"}, r"target='gpu' is unknown because the targets are host"),
        (
            {"target": "host", "config": "tiny"},
            r"config='tiny' has no effect because target='host' does not run the "
            r"accelerator\. Drop config, or pass target='accelerator'\.",
        ),
        ({"verify": "yes"}, r"verify='yes' is not a bool because it is a str"),
        ("tiny", r"options is a str because it was passed as is\. Pass a dict"),
    ],
)
def test_bad_options_raise(options, match):
    compiled = torch.compile(MLP(), backend="polyc", options=options)
    _no_fallback(compiled, torch.randn(2, 64), error=ArgumentError, match=match)


# --- parameters and buffers are constants: batch norms fold as in from_torch


def conv_bn_relu():
    torch.manual_seed(5)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU()
    )
    return randomize_batch_norms(model).eval()


def test_batch_norm_folds_as_in_from_torch_with_the_same_cycles():
    model = conv_bn_relu()
    x = torch.randn(1, 3, 12, 12)
    compiled = torch.compile(model, backend="polyc", options={"config": "tiny"})
    _same(compiled, model, x)
    (rec,) = torch_compile.records()
    (kernel,) = rec.kernels
    direct = polyc.from_torch(model, (x,))
    # the weights are bound inside the kernel; no batch-norm statement is left
    assert [a.name for a in kernel.free_inputs] == ["arg0"]
    assert len(kernel.statements) == len(direct.statements) == 3
    _, report = polyc.compile(direct, config="tiny").run(arg0=x.numpy())
    assert rec.compiled[0].last_report.cycles == report.cycles


def test_changed_weights_are_recompiled_not_stale():
    torch.manual_seed(6)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    compiled = torch.compile(model, backend="polyc")
    x = torch.randn(3, 4)
    _same(compiled, model, x)
    with torch.no_grad():
        model[0].weight.data.mul_(2)  # through .data: no version bump, no guard
        model[2].bias.add_(1)
    _same(compiled, model, x)
    (rec,) = torch_compile.records()
    assert len(rec.kernels) == 2  # compiled again with the new values


def test_partly_eager_regions_fold_their_batch_norms():
    model = randomize_batch_norms(
        nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), SpecialI0()
        )
    ).eval()
    compiled = torch.compile(model, backend="polyc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerFallbackWarning)
        _same(compiled, model, torch.randn(1, 3, 6, 6))
    (rec,) = torch_compile.records()
    (kernel,) = rec.kernels
    assert [a.name for a in kernel.free_inputs] == ["arg0"]
    assert len(kernel.statements) == 3  # conv init, conv update, relu


# --- verify


def test_verify_option_checks_every_run(monkeypatch):
    from codegen.accel.direct import SimModule

    model = conv_bn_relu()
    x = torch.randn(1, 3, 8, 8)
    options = {"config": "tiny", "verify": True}
    compiled = torch.compile(model, backend="polyc", options=options)
    _same(compiled, model, x)
    assert torch_compile.records()[0].compiled[0].verify
    run = SimModule.run

    def corrupted(self, spec, inputs, trace_limit=None, functional=True):
        outputs, report = run(self, spec, inputs, trace_limit, functional)
        outputs["out"] = outputs["out"].copy()
        outputs["out"][0, 5, 1, 2] += 0.5
        return outputs, report

    monkeypatch.setattr(SimModule, "run", corrupted)
    with (
        pytest.raises(
            VerificationError,
            match=r"verify: output out of graph0 differs from the interpreter because "
            r"out\[0, 5, 1, 2\] = \S+ on tiny and \S+ in the interpreter \(1 of 128 "
            r"elements differ",
        ),
        torch.no_grad(),
    ):
        compiled(x)


def test_verify_option_on_the_host(monkeypatch):
    from codegen.host import HostModule

    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh()).eval()
    compiled = torch.compile(model, backend="polyc", options={"verify": True})
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    call = HostModule.__call__

    def corrupted(self, *args, **kwargs):
        outputs = call(self, *args, **kwargs)
        outputs["out"][1, 2] = float("nan")
        return outputs

    monkeypatch.setattr(HostModule, "__call__", corrupted)
    with pytest.raises(VerificationError, match=r"out\[1, 2\] = nan on the host"):
        compiled(x)


# --- acceptance: a MobileNet-v1-style network equals eager torch on the accelerator


def mobilenet_v1(blocks):
    """A 3x3 stride-2 stem, then depthwise-separable blocks ``(channels in, out,
    depthwise stride)``: depthwise 3x3 + BN + ReLU, pointwise 1x1 + BN + ReLU."""
    torch.manual_seed(7)
    layers = [nn.Conv2d(3, blocks[0][0], 3, 2, 1, bias=False)]
    layers += [nn.BatchNorm2d(blocks[0][0]), nn.ReLU()]
    for cin, cout, stride in blocks:
        layers += [
            nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
            nn.BatchNorm2d(cin),
            nn.ReLU(),
            nn.Conv2d(cin, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        ]
    return randomize_batch_norms(nn.Sequential(*layers)).eval()


def _mobilenet_on(model, x, config):
    compiled = torch.compile(model, backend="polyc", options={"config": config})
    _same(compiled, model, x)
    (rec,) = torch_compile.records()
    assert rec.status == "compiled" and len(rec.compiled) == 1


def test_small_mobilenet_equals_eager_on_edge_npu():
    model = mobilenet_v1([(8, 16, 2), (16, 16, 1)])
    _mobilenet_on(model, torch.randn(1, 3, 16, 16), "edge-npu")


@pytest.mark.slow
@pytest.mark.parametrize("config", ["tiny", "edge-npu", "datacenter"])
def test_mobilenet_v1_equals_eager_on_every_config(config):
    model = mobilenet_v1([(8, 16, 1), (16, 32, 2), (32, 32, 1), (32, 32, 2)])
    _mobilenet_on(model, torch.randn(1, 3, 32, 32), config)


def test_stock_transformer_layer_fast_path_runs_in_polyc():
    """In eval mode under torch.compile, nn.TransformerEncoderLayer calls its fused
    fast path aten._transformer_encoder_layer_fwd: polyc decomposes it."""
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    model, x = model.eval(), torch.randn(2, 5, 8)
    compiled = torch.compile(model, backend="polyc")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", EagerFallbackWarning)
        got = compiled(x)
        ref = model(x)
    assert_close(got.numpy(), ref.numpy(), "torch.compile vs eager")
    assert "1 compiled, 0 partly eager, 0 eager" in torch_compile.report()
    assert "aten._transformer_encoder_layer_fwd" not in torch_compile.report()


def _relu(x):
    return torch.relu(x) + 1


def test_report_is_cleared_by_dynamo_reset_and_by_reset():
    """report() kept the graphs of before torch._dynamo.reset(), whose compiled
    code Dynamo had dropped; now either reset empties it."""
    x = torch.randn(5)
    torch.compile(_relu, backend="polyc")(x)
    assert "1 graph(s), 1 compiled" in torch_compile.report()
    torch._dynamo.reset()
    assert torch_compile.records() == []
    assert "0 graph(s)" in torch_compile.report()
    torch.compile(_relu, backend="polyc")(x)  # recorded again after the reset
    assert len(torch_compile.records()) == 1
    torch_compile.reset()
    assert "0 graph(s)" in torch_compile.report()
    torch.compile(_relu, backend="polyc")(x)  # Dynamo's cache: no new graph
    assert torch_compile.records() == []
    torch._dynamo.reset()
    torch.compile(_relu, backend="polyc")(x)
    (rec,) = torch_compile.records()
    assert rec.index == 0 and rec.status == "compiled"
