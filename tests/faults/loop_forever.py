"""Fault: a Python loop in the wrapper that never ends (timeout)."""


def kernel(self):
    n = 0
    while n >= 0:
        n += 1
