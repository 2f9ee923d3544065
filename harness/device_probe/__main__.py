"""``python -m bbagent.harness.device_probe [--device cuda|cpu]``: probe, and print the facts as one
JSON line (exit 1 with the reason on stderr where the device cannot be probed)."""
from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bbagent.harness.device_probe", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda: the first visible GPU; cpu: Triton's interpreter (no GPU facts)")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel is decorated
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device is visible to torch", file=sys.stderr)
        return 1
    from bbagent.harness.device_probe.probe import probe
    print(probe(args.device).model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
