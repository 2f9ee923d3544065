import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_collection_modifyitems(config, items):
    import torch
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine; the CPU twin runs here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def demo_answers() -> list[str]:
    """The shipped replay: a wrong first answer (float32 output) and a right second one."""
    data = json.loads((ROOT / "agent" / "replays" / "aten.relu.default.json").read_text())
    return [e["response"] for e in data["exchanges"]]


@pytest.fixture
def no_keys(monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
