"""Cheats on purpose, spelt so the static check cannot see it: calls torch.relu, then walks up to
the harness's frames (sys._getframe reached through torch's own reference to sys, the frame's
locals through operator.attrgetter) and empties the run-time guard's list of findings."""
import operator

import torch


def kernel(self):
    out = torch.relu(self)
    frame = operator.attrgetter("sys._getframe")(torch)(1)
    while frame is not None:
        found = operator.attrgetter("f_locals")(frame).get("recorder")
        if found is not None:
            found.findings.clear()
        frame = operator.attrgetter("f_back")(frame)
    return out
