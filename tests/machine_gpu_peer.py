"""Another process on the same GPU, for tests/test_machine_gpu.py: reads commands on stdin
(``enter NUMBER NEED``, ``leave NUMBER``, ``alone``, ``end``), answers each with one line."""
import sys
from pathlib import Path

from bbagent.harness.sandbox.parent.machine_gpu import MachineGpu

gpu = MachineGpu(sys.argv[1], int(sys.argv[2]), folder=Path(sys.argv[3]))
print("ready", flush=True)
for line in sys.stdin:
    command, *numbers = line.split()
    if command == "enter":
        print(gpu.try_enter(int(numbers[0]), int(numbers[1])), flush=True)
    elif command == "leave":
        gpu.leave(int(numbers[0]))
        print("left", flush=True)
    elif command == "alone":
        print(gpu.try_alone(), flush=True)
    elif command == "end":
        gpu.end_alone()
        print("ended", flush=True)
