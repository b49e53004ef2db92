"""A small image classifier: convolutions, batch norm (eval), pooling, flatten, linear.

    unbroken check examples/cnn.py
    python examples/cnn.py
"""
import torch
import torch.nn.functional as F
from torch import nn

import unbroken


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        )
        self.classifier = nn.Linear(32, classes)

    def forward(self, images):
        x = self.features(images)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


torch.manual_seed(0)
model = SmallCNN().eval()
example = (torch.randn(4, 3, 32, 32),)

unbroken.case(model, example)

if __name__ == "__main__":
    program = unbroken.export(model, example)
    print(program)
    torch.testing.assert_close(program.module()(*example), model(*example))
    print("module() matches eager")
