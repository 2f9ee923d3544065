"""Fault: raises while the module is imported."""
raise RuntimeError("deliberate failure at import time")


def kernel(self):
    return self
