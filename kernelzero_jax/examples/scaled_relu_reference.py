"""A small KernelBench-format reference bundled with the package: y = relu(x) * scale + bias."""
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self, features: int, scale: float):
    super().__init__()
    self.scale = scale
    self.bias = nn.Parameter(torch.randn(features))

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * self.scale + self.bias


batch_size = 64
features = 256
scale = 1.5


def get_inputs():
  return [torch.randn(batch_size, features)]


def get_init_inputs():
  return [features, scale]
