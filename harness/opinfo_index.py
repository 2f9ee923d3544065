"""Which OpInfo entries reach which aten overloads.

Built by running up to ``SAMPLES_PER_OPINFO`` float32 CPU samples of every OpInfo
(function and in-place variants) under a dispatch recorder, and shipped as
``harness/data/opinfo_index.json`` so that an evaluation knows at once which
OpInfos to sample for its operator (``aten.addmm.default`` is reached through
``nn.functional.linear`` as well as ``addmm``). Rebuild after a torch upgrade:

    python -m harness.opinfo_index build

The index only narrows the search: the suite still captures the real calls, so a
slightly stale index costs coverage, never correctness.
"""
from __future__ import annotations

import json
import sys
import time
import warnings
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

INDEX_PATH = Path(__file__).parent / "data" / "opinfo_index.json"
SAMPLES_PER_OPINFO = 8


def build_index() -> dict:
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.funcs: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.funcs.append(str(func))
            return func(*args, **(kwargs or {}))

    reached: dict[str, dict[str, int]] = defaultdict(dict)
    alone: dict[str, int] = defaultdict(int)
    dtypes: dict[str, set] = defaultdict(set)
    warnings.filterwarnings("ignore")
    for info in op_db:
        try:
            samples = list(info.sample_inputs("cpu", torch.float32, requires_grad=False))[:SAMPLES_PER_OPINFO]
            supported = sorted(str(d).removeprefix("torch.") for d in info.supported_dtypes("cpu"))
        except Exception:  # noqa: BLE001 - an OpInfo whose samples cannot be drawn on the CPU indexes nothing
            continue
        for sample in samples:
            for variant in (info.op, info.inplace_variant):
                if variant is None:
                    continue
                recorder = Recorder()
                try:
                    with recorder:
                        variant(sample.input, *sample.args, **sample.kwargs)
                except Exception:  # noqa: BLE001 - a sample the OpInfo's own call refuses reaches no operator
                    continue
                for name in set(recorder.funcs):
                    reached[name][info.name] = reached[name].get(info.name, 0) + 1
                    dtypes[name].update(supported)
                if len(set(recorder.funcs)) == 1:
                    alone[recorder.funcs[0]] += 1
    return {
        "torch": torch.__version__, "built": time.strftime("%Y-%m-%d"),
        "samples_per_opinfo": SAMPLES_PER_OPINFO,
        "ops": {name: {"opinfos": dict(sorted(infos.items(), key=lambda kv: -kv[1])),
                       "single_call_samples": alone.get(name, 0),
                       "dtypes": sorted(dtypes[name])}
                for name, infos in sorted(reached.items())},
    }


@lru_cache(maxsize=1)
def load() -> dict:
    if not INDEX_PATH.exists():
        return {"ops": {}}
    return json.loads(INDEX_PATH.read_text())


def opinfos_reaching(op_name: str) -> list[str]:
    """OpInfo names whose samples reach ``op_name``, most samples first."""
    return list(load()["ops"].get(op_name, {}).get("opinfos", {}))


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m harness.opinfo_index build", file=sys.stderr)
        return 2
    started = time.perf_counter()
    index = build_index()
    INDEX_PATH.write_text(json.dumps(index, indent=1) + "\n")
    print(f"wrote {INDEX_PATH}: {len(index['ops'])} overloads in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
