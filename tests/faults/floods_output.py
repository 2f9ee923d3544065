"""Fault: prints without end."""


def kernel(self):
    line = "x" * 4096
    while True:
        print(line)
