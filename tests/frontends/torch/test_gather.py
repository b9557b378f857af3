"""Embedding models from PyTorch: the lookup is a gather (an indirect DMA on
the accelerator) whose DRAM bytes are the tokens looked up, not the vocabulary."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import polyc
from polyc.errors import FrontendError, IndexRangeError
from tests.support.torchcheck import assert_close, check


class Classifier(nn.Module):
    """Token embedding, mean over the sequence, a linear head."""

    def __init__(self, vocab: int, dim: int = 64, classes: int = 8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.fc = nn.Linear(dim, classes)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(1))


def _dram(report):
    return next(level for level in report.levels if level.name == "dram")


@pytest.mark.parametrize("vocab", [512, 4096])
def test_embedding_classifier_reads_the_tokens_rows_not_the_vocabulary(vocab):
    """On edge-npu: DRAM reads are the indices (int64), the looked-up rows and
    the head's weights, exactly, whatever the vocabulary; outputs equal eager.
    The one-hot contraction read the whole table and ran tokens x vocab x dim
    MACs (148,155 cycles for vocab 4,096 against 1,908 now)."""
    torch.manual_seed(0)
    batch, seq, dim, classes = 2, 16, 64, 8
    model = Classifier(vocab, dim, classes).eval()
    ids = torch.randint(0, vocab, (batch, seq))
    kernel = check(model, (ids,))  # interpreter and host C equal eager
    compiled = polyc.compile(kernel, config="edge-npu", verify=True)
    outputs, report = compiled.run(arg0=ids.numpy())
    want = model(ids).detach().numpy()
    assert_close(outputs["out"], want, "classifier on edge-npu")
    tokens, row_bytes = batch * seq, dim * 4
    head = (classes * dim + classes) * 4
    assert _dram(report).bytes_read == tokens * 8 + tokens * row_bytes + head
    assert _dram(report).bytes_written == batch * classes * 4
    assert report.macs == batch * classes * dim  # the head's only
    assert "indirect DMA: 32 rows of 256 bytes" in str(compiled)


def test_index_select_gather_and_indexing_on_the_accelerator():
    torch.manual_seed(1)

    class Picks(nn.Module):
        def forward(self, x, i, j):
            a = torch.index_select(x, 1, i)
            b = torch.gather(x, 2, j)
            return a.sum(1) + b.sum(1) + x[:, i].sum(1)

    x = torch.randn(3, 6, 4)
    i = torch.tensor([5, 0, 2, 2])
    j = torch.randint(0, 4, (3, 6, 4))
    kernel = check(Picks(), (x, i, j))
    compiled = polyc.compile(kernel, config="tiny", verify=True)
    got, _ = compiled.run(arg0=x.numpy(), arg1=i.numpy(), arg2=j.numpy())
    assert_close(got["out"], Picks()(x, i, j).numpy(), "picks on tiny")


def test_an_out_of_range_token_raises_like_torch():
    model = Classifier(16, 8, 2).eval()
    ids = torch.tensor([[1, 16]])
    with pytest.raises(IndexError):
        model(ids)
    kernel = polyc.from_torch(model, (torch.tensor([[1, 2]]),))
    with pytest.raises(IndexRangeError, match=r"reads index 16 .*, outside 0\.\.15"):
        polyc.interpret(kernel, {"arg0": np.array([[1, 16]])})


@pytest.mark.parametrize(
    ("fn", "inputs", "message"),
    [
        (
            lambda x, i: x[i, i],
            (torch.randn(4, 4), torch.tensor([0, 1])),
            "indexing with several index tensors",
        ),
        (
            lambda x, m: x[m],
            (torch.randn(4), torch.tensor([True, False, True, True])),
            "boolean mask",
        ),
    ],
)
def test_indexing_polyc_cannot_gather_is_refused(fn, inputs, message):
    class F(nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    with pytest.raises(FrontendError, match=message):
        polyc.from_torch(F(), inputs)
