"""The references by rows (how the judge checks a large timed output,
gpulab.judge.batches.SAMPLE_ROWS) agree with the whole references."""

from __future__ import annotations

import pytest
import torch

from gpulab.judge.graders import flash_attention, matmul
from gpulab.judge.kernel_spec import Case


@pytest.mark.parametrize(
    "B,H,Sq,Sk,D,causal",
    [(2, 3, 37, 37, 16, True), (1, 2, 64, 80, 32, False), (1, 1, 300, 300, 16, True)],
)
def test_attention_rows_match_the_whole_reference(B, H, Sq, Sk, D, causal):
    g = torch.Generator().manual_seed(Sq)
    q, k, v = (torch.randn(B, H, S, D, generator=g) for S in (Sq, Sk, Sk))
    case = Case(
        name="x", args=(q, k, v), kwargs={"causal": True} if causal else {}, dtype=torch.float32
    )
    rows = torch.randperm(Sq, generator=g)[:20].sort().values
    whole = flash_attention.reference(case)
    assert torch.allclose(flash_attention.reference_rows(case, rows), whole[:, :, rows])
    assert flash_attention.make_spec().row_axis == 2


def test_matmul_rows_match_the_whole_reference():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(300, 40, generator=g), torch.randn(40, 50, generator=g)
    case = Case(name="m", args=(a, b), dtype=torch.float32)
    rows = torch.tensor([0, 5, 299])
    assert torch.equal(matmul.reference_rows(case, rows), matmul.reference(case)[rows])
    assert matmul.make_spec(interpreter=True).row_axis == 0
