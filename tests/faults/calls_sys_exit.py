"""Fault: ends the process with sys.exit(3) instead of returning."""
import sys


def kernel(self):
    sys.exit(3)
