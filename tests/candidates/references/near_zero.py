# Degenerate reference: the output is always ~0 (x * 0 + 1e-6), so a constant output passes.
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    return x * 0.0 + 1e-6


def get_inputs():
  return [torch.randn(16, 64)]


def get_init_inputs():
  return []
