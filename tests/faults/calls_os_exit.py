"""Fault: ends the process with os._exit(0), which no exception handler sees."""
import os


def kernel(self):
    os._exit(0)
