"""Fault: looks for API keys in other processes' environments."""
import os


def kernel(self):
    for pid in sorted(os.listdir("/proc")):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if b"API_KEY" in f.read():
                        raise RuntimeError(f"found a key in process {pid}")
            except PermissionError:
                continue
    return self
