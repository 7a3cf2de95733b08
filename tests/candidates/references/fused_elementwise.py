# Reference: several elementwise ops on two 16x64 inputs: (x * y + 2) * sigmoid(x) - 0.5 * y.
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x, y):
    return (x * y + 2.0) * torch.sigmoid(x) - 0.5 * y


def get_inputs():
  return [torch.randn(16, 64), torch.randn(16, 64)]


def get_init_inputs():
  return []
