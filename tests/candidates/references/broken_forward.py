# Broken reference: Model.forward raises, so no candidate can be judged against it.
import torch
import torch.nn as nn


class Model(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    raise ValueError("this reference is broken")


def get_inputs():
  return [torch.randn(16, 64)]


def get_init_inputs():
  return []
