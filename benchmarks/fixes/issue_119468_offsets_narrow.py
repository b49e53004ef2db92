"""A list of offsets read with .item() in a loop, used to narrow a tensor.

Source: https://github.com/pytorch/pytorch/issues/119468 (laithsakka's example): `end_offset =
offsets_tensor[i].item(); ... torch.narrow(values, 0, start_offset, end_offset -
start_offset)`, exported there only with torch._check_is_size lines.
"""
import torch

import unbroken


class OffsetsNarrow(torch.nn.Module):
    def forward(self, values, offsets_tensor):
        res_list = []
        start_offset = 0
        for i in range(0, len(offsets_tensor)):
            end_offset = offsets_tensor[i].item()
            sz = end_offset - start_offset
            res_list.append(torch.narrow(values, 0, start_offset, sz))
            start_offset = end_offset
        return res_list[-1]


unbroken.case(OffsetsNarrow(), (torch.rand(100), torch.tensor([3, 5, 9])))
