"""Fault: raises an exception whose message holds a secret of the parent's configuration (carried
XOR-masked, as in prints_secret_and_crashes.py), split across two lines."""

MASKED = [41, 49, 119, 56, 56, 59, 61, 63, 52, 46, 119, 42, 54, 59, 52, 46, 63, 62, 119, 109, 60, 105, 59, 99,
          57, 104, 63, 111, 56, 107, 62, 110, 106, 108, 98]


def kernel(self):
    secret = "".join(chr(c ^ 0x5A) for c in MASKED)
    raise RuntimeError(f"first half {secret[:18]}\nsecond half {secret[18:]}")
