import torch
import unbroken

from zoo.nets import Classifier

unbroken.case(Classifier().eval(), (torch.randn(5, 4),), name="classifier")
