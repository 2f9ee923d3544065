"""GPU twins of the CPU evaluation and demo tests. Run on a CUDA machine: pytest -m gpu."""
import json

import pytest

from agent.cli import main
from conftest import KERNELS

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("kernel", ["relu_triton.py", "relu_autotuned.py"])
def test_eval_on_gpu_runs_every_trace_and_bf16(capsys, kernel):
    code = main(["eval", "--op", "aten.relu.default", "--kernel", str(KERNELS / kernel), "--json"])
    verdict = json.loads(capsys.readouterr().out)
    assert code == 0, verdict["failure_groups"]
    assert verdict["environment"]["device"] == "cuda" and not verdict["environment"]["interpreter"]
    assert verdict["skipped"] == []
    assert any(t["dtype"] == "bfloat16" for t in verdict["tests"])
    assert sum(t["source"].startswith("trace") for t in verdict["tests"]) > 50


@pytest.mark.parametrize("kernel, kind", [("relu_identity.py", "mismatch"), ("relu_torch.py", "guard")])
def test_wrong_kernels_fail_on_gpu(capsys, kernel, kind):
    code = main(["eval", "--op", "aten.relu.default", "--kernel", str(KERNELS / kernel), "--json"])
    verdict = json.loads(capsys.readouterr().out)
    assert code == 1 and verdict["failure_groups"][0]["error_kind"] == kind


def test_replay_demo_on_gpu(tmp_path, capsys):
    code = main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (tmp_path / "generated_kernels" / "aten.relu.default" / "kernel.py").is_file()
