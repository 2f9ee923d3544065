"""Reports, by raising, which environment variables that look like secrets it can see."""
import os


def kernel(self):
    visible = sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k)
    raise RuntimeError(f"secret-looking variables visible: {visible}")
