"""ir.serialize.check: a saved value its op does not compute is the file's fault
(SerializationError); a bug in unbroken met while checking is not (InternalError)."""
import pytest
import torch
import torch.fx as fx

from unbroken.ir.serialize.check import check_values
from unbroken.symbolic.diagnostics import InternalError, SerializationError

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


def _graph(target, val):
    graph = fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(3, device="meta")
    node = graph.call_function(target, (x,))
    node.meta["val"] = val
    graph.output(node)
    return fx.GraphModule(torch.nn.Module(), graph)


def test_a_value_the_op_does_not_compute_is_the_files_fault():
    lying = _graph(torch.ops.aten.neg.default, torch.empty(4, device="meta"))
    with pytest.raises(SerializationError, match="not what the op computes"):
        check_values(lying, "graph.json")


def test_a_bug_met_while_checking_is_raised_as_ours():
    def buggy(x):
        raise InternalError("a bug planted by the test")

    with pytest.raises(InternalError, match="planted"):
        check_values(_graph(buggy, torch.empty(3, device="meta")), "graph.json")
