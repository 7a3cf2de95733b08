# Reference: relu(Linear(32 -> 16)(x)) on a 16x32 input; parameters come from nn.Linear's init.
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self, in_features, out_features):
    super().__init__()
    self.linear = nn.Linear(in_features, out_features)

  def forward(self, x):
    return torch.relu(self.linear(x))


def get_inputs():
  return [torch.randn(16, 32)]


def get_init_inputs():
  return [32, 16]
