"""Helion kernels (issue 81's first step): a Helion kernel compiles to Triton launches, so the same
verdict judges it. On the CPU under Triton's interpreter (Helion's generated Triton runs there), on
the GPU as itself: a right one passes every overload it serves; one that hides torch's relu meets
the guard; one wrong on NaN fails the comparison."""
import json
from pathlib import Path

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


# --dsl helion: per family, the worked example (right) and a wrong answer made from it, asked through the fake
# OpenAI server: round 1 gets the wrong one and fails as expected, round 2 the right one, accepted as Helion.
HELION_EXAMPLES = Path(__file__).parent.parent / "prompts" / "helion" / "examples"
FAMILIES = [  # family, operator, (text in the example, what the wrong answer has instead), the wrong one's failure
    ("elementwise_unary", "aten.sigmoid.default",
     ("_sigmoid(x.view(-1), out.view(-1))\n    return out", "_sigmoid(x.view(-1), out.view(-1))\n    return torch.sigmoid(self)"),
     "guard"),
    ("reduction", "aten.sum.dim_IntList", ("acc = acc + x[tile_r, tile_l].to(acc.dtype).sum(1)",
                                           "acc = acc + x[tile_r, tile_l].to(acc.dtype).amax(1)"), "mismatch"),
    ("normalization", "aten.native_layer_norm.default", (" / length + eps)", " / length)"), "mismatch"),
    ("matmul", "aten.mm.default", ("for tile_k in hl.tile(k):", "for tile_k in hl.tile(min(k, 8)):"), "mismatch"),
]


def _fenced(source: str) -> str:
    return f"Here is the kernel.\n\n```python\n{source}```\n"


@pytest.mark.parametrize("family, op, change, kind", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_a_helion_answer_per_family_wrong_then_right_through_the_model(tmp_path, monkeypatch, no_keys, capsys,
                                                                      family, op, change, kind):
    from fake_llm import FakeLLMServer
    right = (HELION_EXAMPLES / f"{family}.py").read_text()
    assert change[0] in right
    wrong = right.replace(change[0], change[1])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer(_fenced(wrong), _fenced(right)) as server:
        code = main(["generate", "--op", op, "--dsl", "helion", "--rounds", "2", "--provider", "openai", "--model",
                     "gpt-test", "--base-url", server.url + "/v1", "--root", str(tmp_path), "--device", "cpu",
                     "--no-dispatch", "--timeout", "300"])
    captured = capsys.readouterr()
    assert code == 0, captured.out[-3000:] + captured.err[-3000:]
    asked = server.requests[0]["body"]["messages"][0]["content"]
    assert "Write a Helion kernel" in asked and "## Helion guidance for" in asked and "@helion.kernel" in asked
    assert "## Triton traps" not in asked and "Triton guidance" not in asked
    feedback = server.requests[1]["body"]["messages"][-1]["content"]
    assert kind in feedback, feedback[:2000]
    meta = json.loads(next((tmp_path / "generated_kernels").rglob("meta.json")).read_text())
    assert meta["dsl"] == "helion" and meta["round"] == 2


def test_a_triton_answer_to_a_helion_question_is_refused_before_it_runs(capsys):
    code, verdict = _verdict(capsys, "relu_autotuned.py", "--dsl", "helion")
    assert code == 1 and verdict["error_kind"] == "guard" and "@helion.kernel" in verdict["message"], verdict["message"]
    code, verdict = _verdict(capsys, "relu_helion.py", "--dsl", "helion")
    assert code == 0, verdict["message"]


def test_a_helion_answer_to_a_program(tmp_path, capsys):
    """A KernelBench level-2 program answered in Helion (the matrix product left to cuBLAS, its epilogue in
    Helion): right, and wrong (the bias added before the ReLU). Helion's compiler runs the tile code on tensors
    without data the first time a shape comes: that is no PyTorch compute of the answer's."""
    problem = Path(__file__).parent / "problems" / "level2" / "1_Gemm_ReLU_BiasAdd.py"
    answer = Path(__file__).parent / "problems" / "answers" / "gemm_relu_bias_helion.py"
    wrong = tmp_path / "wrong.py"
    wrong.write_text(answer.read_text().replace("torch.where(v < 0, torch.zeros_like(v), v) + bias[tile_n][None, :]",
                                                "torch.relu(v + bias[tile_n][None, :])"))
    for kernel, expected in ((answer, 0), (wrong, 1)):
        code = main(["eval", "--problem", str(problem), "--kernel", str(kernel), "--dsl", "helion", "--json",
                     "--root", str(tmp_path)])
        verdict = json.loads(capsys.readouterr().out)
        assert code == expected, (verdict["error_kind"], verdict["message"])
    assert verdict["failure_groups"][0]["error_kind"] == "mismatch", verdict["failure_groups"][:1]
    import bbagent
    asked = bbagent.program_prompt(problem, device="cpu", dsl="helion")
    assert "with Helion kernels" in asked and "## Helion in bbagent" in asked and "## Triton traps" not in asked
    assert "Reshape on the host (in `ModelNew.forward`)" in asked and "(in `kernel`)" not in asked
    assert "## Helion guidance for matrix products" in asked and "Worked example: a kernel for `aten.mm.default`" in asked


def test_helion_missing_or_a_release_known_to_miscompile_is_said_before_any_work(monkeypatch, capsys):
    """Helion 1.5.0 stores into a dimension of size 1 without its mask (an mm with one row came back zeros
    on the H200): a right answer would fail, so bbagent refuses to judge with it and says why."""
    from importlib import metadata
    real = metadata.version

    def installed(version):
        def answer(name):
            if name != "helion":
                return real(name)
            if version is None:
                raise metadata.PackageNotFoundError(name)
            return version
        return answer
    for version, said in ((None, "pip install 'bbagent[helion]'"), ("1.5.0", "without its mask")):
        monkeypatch.setattr(metadata, "version", installed(version))
        code = main(["eval", "--op", RELU, "--kernel", str(KERNELS / "relu_helion.py"), "--dsl", "helion"])
        assert code == 2 and said in capsys.readouterr().err
    monkeypatch.setattr(metadata, "version", installed("1.4.0"))
    from bbagent.harness.dsl import HELION
    assert HELION.unusable() is None


def test_helion_runs_judged_without_autotuning_or_processes_of_its_own(tmp_path, capsys):
    """The judged child sets Helion's autotuner off and keeps a listed-configs choice in its own process
    (a benchmark subprocess or forked precompiles would be stopped as process starts): the right relu,
    made to read Helion's settings and raise unless they are so, passes."""
    checking = tmp_path / "relu_helion_judged_settings.py"
    checking.write_text((KERNELS / "relu_helion.py").read_text().replace("def kernel(self):\n", """def kernel(self):
    settings = _relu.settings
    if (settings.autotune_effort, settings.autotune_benchmark_subprocess, settings.autotune_precompile) != \\
            ("none", False, None):
        raise RuntimeError(f"judged with {settings.autotune_effort}, {settings.autotune_benchmark_subprocess}, "
                           f"{settings.autotune_precompile}")
"""))
    code, verdict = _verdict(capsys, str(checking), "--dsl", "helion")
    assert code == 0, (verdict["error_kind"], verdict["message"], verdict["failure_groups"][:1])
