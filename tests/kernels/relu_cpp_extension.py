"""Cheats on purpose: builds a C++ extension (torch.utils.cpp_extension) that would keep results
by pointer, out of sight of Python."""
import torch
import torch.utils.cpp_extension

_ext = torch.utils.cpp_extension.load_inline(
    name="relu_cache", cpp_sources="torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }",
    functions=["relu"])


def kernel(self):
    return _ext.relu(self)
