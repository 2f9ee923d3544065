import pytest

from agent.extract import extract_code
from agent.prompting import elide, render_feedback, render_prompt, template_name


def test_relu_prompt_carries_schema_semantics_dtypes_shapes_and_contract():
    prompt = render_prompt("aten.relu.default")
    assert template_name("aten.relu.default") == "ops/aten.relu.default.j2"
    for needle in ("aten::relu(Tensor self) -> Tensor", "max(x, 0)", "float16", "bfloat16",
                   "97x `(T([16, 128, 512], f16),)`", "kernel(self)", "@triton.jit", "```python"):
        assert needle in prompt, needle


@pytest.mark.parametrize("op, words", [
    ("aten.relu_.default", "write the result into `self` and return `self` itself"),
    ("aten.relu.out", "write the result into `out` and return `out` itself"),
    ("aten.add.Tensor", "kernel(self, other, *, alpha=1)"),
])
def test_prompts_for_other_overloads_state_their_calling_convention(op, words):
    assert words in render_prompt(op)


def test_feedback_lists_failures_with_numbers():
    verdict = {
        "environment": {"device": "cuda", "interpreter": False}, "error_kind": None, "message": "",
        "summary": {"passed": 1, "total": 3, "not_run": 0}, "stderr_tail": "",
        "failure_groups": [{"error_kind": "mismatch", "count": 2, "example": {
            "input": "(T([4], f16),)", "dtype": "float16", "message": "output: values differ at 2 of 4 elements",
            "max_abs_error": 1.5, "max_rel_error": 2.0, "mismatch_count": 2, "numel": 4,
            "mismatches": [{"index": [1], "expected": 0.0, "actual": -1.5}]}}],
    }
    text = render_feedback(verdict)
    for needle in ("1 of 3 tests passed", "mismatch in 2 tests", "(T([4], f16),)", "max abs error 1.5",
                   "[1]: 0.0 / -1.5"):
        assert needle in text, needle


def test_feedback_for_a_timeout_shows_the_cause():
    verdict = {"environment": {}, "error_kind": "timeout", "message": "the kernel timed out after 10 s",
               "summary": {"passed": 0, "total": 1, "not_run": 4}, "failure_groups": [],
               "stderr_tail": "last words"}
    text = render_feedback(verdict)
    assert "Problem (timeout): the kernel timed out after 10 s" in text and "4 not run" in text
    assert "last words" in text


def test_extract_prefers_the_block_defining_kernel():
    answer = "Plan:\n```python\nx = 1\n```\nCode:\n```python\nimport triton\n\ndef kernel(self):\n    return self\n```\n"
    assert extract_code(answer).startswith("import triton")
    assert extract_code("no code here") is None
    assert extract_code("```py\ndef kernel(x):\n    pass") == "def kernel(x):\n    pass\n"  # cut-off answer
    assert extract_code("```bash\nls\n```") is None


def test_elide_keeps_head_and_tail():
    text = "a" * 50 + "b" * 50
    short = elide(text, 20)
    assert short.startswith("a" * 10) and short.endswith("b" * 10) and "80 characters elided" in short
