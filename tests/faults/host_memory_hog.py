"""Fault: fills host memory with written pages until something stops it."""

HOARD = []


def kernel(self):
    while True:
        HOARD.append(b"\x01" * (64 << 20))
