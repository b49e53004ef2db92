import os

import torch
import torch.utils._pytree as pytree
import unbroken


class Box:
    def __init__(self, tensor):
        self.tensor = tensor


def flatten(box):
    os._exit(7)  # the process ends here, as a segfault in a C extension would end it


pytree.register_pytree_node(Box, flatten, lambda children, context: Box(children[0]))


def unbox(box):
    return box.tensor * 2


unbroken.case(unbox, (Box(torch.randn(2)),), name="crasher")
