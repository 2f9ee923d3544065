"""Kills its own process with SIGSEGV while running."""
import os
import signal


def kernel(self):
    os.kill(os.getpid(), signal.SIGSEGV)
