"""Raises on purpose inside kernel()."""


def kernel(self):
    raise ValueError("deliberate failure in the wrapper")
