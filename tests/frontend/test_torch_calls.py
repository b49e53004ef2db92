"""frontend.variables.torch_calls: torch functions the frontend handles itself."""
import torch
from torch.export import Dim

import unbroken


class TensorOfSize(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return (x * torch.tensor(n), torch.tensor(n / 2), torch.tensor(n > 3),
                torch.tensor(n, dtype=torch.float64).sqrt(), torch.as_tensor(n * 2))


def test_tensor_of_a_dynamic_size_stays_dynamic():
    """torch.tensor(x.shape[0]) specialized the size (UB003) where torch.export computes it in
    the graph; the dtypes are torch.tensor's for int, float and bool."""
    model = TensorOfSize()
    ep = unbroken.export(model, (torch.randn(5, 4),),
                         dynamic_shapes=({0: Dim("n", min=2, max=12)},))
    for n in (2, 7, 12):
        x = torch.randn(n, 4)
        got, want = ep.module()(x), model(x)
        assert [t.dtype for t in got] == [t.dtype for t in want]
        torch.testing.assert_close(got, want)
