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
    try:
        return _probe_and_print(args.device)
    except KeyboardInterrupt:
        print("interrupted: nothing probed", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _probe_and_print(device: str) -> int:
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel is decorated
    import torch
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device is visible to torch", file=sys.stderr)
        return 1
    from bbagent.harness.device_probe.probe import probe
    print(probe(device).model_dump_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
