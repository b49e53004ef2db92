import torch

raise ImportError("this file fails to import on purpose")
