"""Hangs on purpose: never returns."""
import time


def kernel(self):
    while True:
        time.sleep(1)
