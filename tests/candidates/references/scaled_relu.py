# Reference: y = relu(x) * scale + bias on a 16x64 input (the target of most cheat candidates).
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self, features, scale):
    super().__init__()
    self.scale = scale
    self.bias = nn.Parameter(torch.randn(features))

  def forward(self, x):
    return torch.relu(x) * self.scale + self.bias


def get_inputs():
  return [torch.randn(16, 64)]


def get_init_inputs():
  return [64, 1.5]
