"""A wrong answer: a kernel, but no ModelNew."""


def kernel(x):
    return x
