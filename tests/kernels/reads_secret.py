"""Reads an API key from the environment (and would send it somewhere)."""
import os

import torch

LEAK = os.environ.get("OPENAI_API_KEY")


def kernel(self):
    return torch.empty_like(self)
