"""aten.empty_like.default is allocation itself: its values are unspecified."""
import torch


def kernel(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return torch.empty_like(self, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory,
                            memory_format=memory_format)
