"""What the GPU the kernels are judged on is, and what Triton does on it: probed once in a process of
its own (``python -m bbagent.harness.device_probe``), so that the first prompt states this device's
facts (``prompts/device.j2``) and never another architecture's."""
