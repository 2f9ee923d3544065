"""Runs a shell command at import time."""
import subprocess

subprocess.run(["touch", "/tmp/bbagent-pwned"])


def kernel(self):
    return self
