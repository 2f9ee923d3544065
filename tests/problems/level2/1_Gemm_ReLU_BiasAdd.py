import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer without its own bias, a ReLU, then a learned bias added."""

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.gemm(x)
        x = torch.relu(x)
        return x + self.bias


batch_size = 32
in_features = 64
out_features = 48
bias_shape = (out_features,)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
