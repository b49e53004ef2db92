import torch
from zoo.nets import Classifier

import unbroken

unbroken.case(Classifier().eval(), (torch.randn(5, 4),), name="classifier")
