"""ir.graph_builder: where run-time assertions go and what they read."""
import pytest
import torch

import unbroken


class MaxOfCounts(torch.nn.Module):
    def forward(self, x, y):
        u = y.item()
        v = x.nonzero().shape[0]
        torch._check(max(u, v) // 2 >= 1)
        return torch.zeros(max(u, v) // 2)


def test_a_runtime_assertion_never_reads_a_value_computed_after_it():
    """The assertion of ``max(u, v) // 2 >= 1`` goes right after ``nonzero`` (where both
    values are known); it reused the ``max(u, v) // 2`` node cached for the later ``zeros``,
    defined after it: graph lint failed (UB999). It computes what it needs before itself."""
    ep = unbroken.export(MaxOfCounts(), (torch.ones(6), torch.tensor(3)))
    ep.graph.lint()
    for x, y in [(torch.ones(6), torch.tensor(3)),
                 (torch.tensor([0.0, 1, 0, 1, 1, 0]), torch.tensor(9))]:
        torch.testing.assert_close(ep.module()(x, y), MaxOfCounts()(x, y))
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(torch.zeros(6), torch.tensor(1))
