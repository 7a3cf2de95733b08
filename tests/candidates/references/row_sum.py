# Reference: sum of each row of a 16x64 input (output shape (16,)).
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    return x.sum(dim=1)


def get_inputs():
  return [torch.randn(16, 64)]


def get_init_inputs():
  return []
