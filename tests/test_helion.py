"""Helion kernels (issue 81's first step): a Helion kernel compiles to Triton launches, so the same
verdict judges it. On the CPU under Triton's interpreter (Helion's generated Triton runs there), on
the GPU as itself: a right one passes every overload it serves; one that hides torch's relu meets
the guard; one wrong on NaN fails the comparison."""
import json

import pytest

from bbagent.cli import main
from conftest import KERNELS

RELU = "aten.relu.default"


def _verdict(capsys, kernel: str, *extra: str) -> tuple[int, dict]:
    code = main(["eval", "--op", RELU, "--kernel", str(KERNELS / kernel), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_a_right_helion_relu_passes_as_every_overload_it_serves(capsys):
    code, verdict = _verdict(capsys, "relu_helion.py", "--variants")
    assert code == 0, (verdict["error_kind"], verdict["message"], verdict["failure_groups"][:1])
    assert {v["op"] for v in verdict["variants"]} == {RELU, "aten.relu_.default", "aten.relu.out"}
    assert all(v["ok"] and v["passed"] > 0 and not v["failed"] for v in verdict["variants"]), verdict["variants"]


@pytest.mark.parametrize("kernel, kind", [("relu_helion_calls_torch.py", "guard"),
                                          ("relu_helion_drops_nan.py", "nan_mismatch")])
def test_a_wrong_helion_relu_fails_as_a_triton_one_would(capsys, kernel, kind):
    code, verdict = _verdict(capsys, kernel)
    assert code == 1 and verdict["failure_groups"][0]["error_kind"] == kind, verdict["failure_groups"][:1]


@pytest.mark.gpu
def test_helion_kernels_on_the_gpu_judged_and_timed(capsys):
    try:  # here, not at collection: importing Helion (and what it imports) in every test worker grows it
        import helion  # noqa: F401
    except ImportError as exc:  # Helion 1.5.1 on torch 2.11: no IntelGPUError in inductor
        pytest.xfail(f"issue 81: the installed Helion does not import with this torch ({exc}); the sandbox reads "
                     "that failed import as tampering (an audit hook), not import_error")
    code, verdict = _verdict(capsys, "relu_helion.py")
    assert code == 0, (verdict["error_kind"], verdict["message"], verdict["failure_groups"][:1])
    assert verdict["environment"]["device"] == "cuda" and not verdict["environment"]["interpreter"]
    assert any(t["dtype"] == "bfloat16" for t in verdict["tests"]) and verdict["performance"]["measured"]
    code, verdict = _verdict(capsys, "relu_helion_calls_torch.py")
    assert code == 1 and verdict["failure_groups"][0]["error_kind"] == "guard"
