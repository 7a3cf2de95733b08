# Degenerate reference: active dropout (training mode), so the reference does not reproduce itself.
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self):
    super().__init__()
    self.dropout = nn.Dropout(p=0.5)

  def forward(self, x):
    return self.dropout(x) + 1.0


def get_inputs():
  return [torch.randn(16, 64)]


def get_init_inputs():
  return []
