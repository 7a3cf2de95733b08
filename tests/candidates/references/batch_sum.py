# Reference: sum over the leading dimension of a 4x16x64 input after a transpose (output 64x16).
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    return x.transpose(1, 2).sum(dim=0)


def get_inputs():
  return [torch.randn(4, 16, 64)]


def get_init_inputs():
  return []
