"""Fault: writes a file outside its working directory."""


def kernel(self):
    with open("/tmp/bbagent-fault-escaped.txt", "w") as f:
        f.write("escaped")
    return self
