"""Fault: prints a secret of the parent's configuration to stdout and stderr, then crashes.

How a kernel could learn one is beside the point here (a file it should not have seen, the
model's own text): the value is carried XOR-masked, so that this file does not hold it, and the
corpus runner gives the parent the same value as a configured secret."""
import os
import sys

MASKED = [41, 49, 119, 56, 56, 59, 61, 63, 52, 46, 119, 42, 54, 59, 52, 46, 63, 62, 119, 109, 60, 105, 59, 99,
          57, 104, 63, 111, 56, 107, 62, 110, 106, 108, 98]


def kernel(self):
    secret = "".join(chr(c ^ 0x5A) for c in MASKED)
    print("the key is", secret)
    print("the key is", secret, "and reversed", secret[::-1], file=sys.stderr, flush=True)
    os.abort()
