# Reference: a (16x32) @ b (32x16).
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, a, b):
    return torch.matmul(a, b)


def get_inputs():
  return [torch.randn(16, 32), torch.randn(32, 16)]


def get_init_inputs():
  return []
