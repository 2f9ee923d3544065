import re

import pytest

from bbagent.harness.problem import operator_problem
from bbagent.agent.generate.extract import extract_code
from conftest import make_verdict
from bbagent.agent.generate.prompting import elide, render_feedback, render_prompt, template_name


def test_relu_prompt_carries_schema_semantics_dtypes_shapes_and_contract():
    prompt = render_prompt(problem("aten.relu.default"))
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
    assert words in render_prompt(problem(op))


def test_feedback_lists_failures_with_numbers():
    fields = dict(
        environment={"device": "cuda", "interpreter": False}, summary={"passed": 1, "total": 3, "failed": 2},
        failure_groups=[{"error_kind": "mismatch", "count": 2, "tests": ["trace-0", "trace-1"], "example": {
            "id": "trace-0", "passed": False, "error_kind": "mismatch", "input": "(T([4], f16),)", "dtype": "float16",
            "message": "output: values differ at 2 of 4 elements", "max_abs_error": 1.5, "max_rel_error": 2.0,
            "mismatch_count": 2, "numel": 4, "mismatches": [{"index": [1], "expected": 0.0, "actual": -1.5}]}}])
    text = render_feedback(make_verdict(**fields))
    for needle in ("1 of 3 tests passed", "mismatch in 2 tests", "(T([4], f16),)", "max abs error 1.5",
                   "[1]: 0.0 / -1.5"):
        assert needle in text, needle
    assert "interpreter" not in text
    on_cpu = render_feedback(make_verdict(**{**fields, "environment": {"device": "cpu", "interpreter": True}}))
    assert "does not check `tl.dot` block sizes" in on_cpu and "skips the bfloat16 tests" in on_cpu


def test_feedback_for_a_timeout_shows_the_cause():
    verdict = make_verdict(error_kind="timeout", message="the kernel timed out after 10 s",
                           summary={"passed": 0, "total": 1, "not_run": 4, "failed": 1}, stderr_tail="last words")
    text = render_feedback(verdict)
    assert "Problem (timeout): the kernel timed out after 10 s" in text and "4 not run" in text
    assert "last words" in text


KERNEL = "import triton\n\ndef kernel(self):\n    return self"
JIT = "@triton.jit\ndef _body(x_ptr):\n    pass"
WRAPPER = "import torch\nimport triton\n\ndef kernel(self):\n    _body[(1,)](self)\n    return self"

EXTRACTION_TABLE = [
    # (what the answer looks like, the answer, the code expected or None)
    ("one python fence", f"```python\n{KERNEL}\n```", KERNEL),
    ("prose, a plan block, then the kernel block", f"Plan:\n```python\nx = 1\n```\nCode:\n```python\n{KERNEL}\n```\n", KERNEL),
    ("no code", "no code here", None),
    ("only a shell block", "```bash\nls\n```", None),
    ("cut off by the token limit", "```py\ndef kernel(x):\n    pass", "def kernel(x):\n    pass"),
    ("tilde fence", f"~~~python\n{KERNEL}\n~~~\n", KERNEL),
    ("untagged fence", f"```\n{KERNEL}\n```", KERNEL),
    ("capitalised tag with extra info", f"```Python title=kernel.py\n{KERNEL}\n```", KERNEL),
    ("four-backtick fence holding a triple-backtick docstring",
     f'````python\n{KERNEL}\n\nDOC = """```"""\n````', f'{KERNEL}\n\nDOC = """```"""'),
    ("prose that mentions a fence before the real block",
     f"I will answer in a ```python block as asked.\n\n```python\n{KERNEL}\n```", KERNEL),
    ("fence indented in a list item", "1. The module:\n\n   ```python\n   import triton\n\n   def kernel(self):\n"
     "       return self\n   ```\n2. Done.", KERNEL),
    ("unfenced module", KERNEL + "\n", KERNEL),
    ("unfenced module after a line of prose", "Here is the module:\n\n" + KERNEL, KERNEL),
    ("prose without fences that is not Python", "def kernel is what you asked for, here it is: nothing", None),
    ("module split over two blocks, jit first", f"```python\n{JIT}\n```\nand\n```python\n{WRAPPER}\n```",
     f"{JIT}\n\n{WRAPPER}"),
    ("module split over two blocks, wrapper first", f"```python\n{WRAPPER}\n```\n```python\n{JIT}\n```",
     f"{WRAPPER}\n\n{JIT}"),
    ("an unrelated block is not joined", f"```python\nprint(1)\n```\n```python\n{KERNEL}\n```", KERNEL),
    ("a revised kernel: the last one wins", f"```python\n{WRAPPER}\n```\nBetter:\n```python\n{KERNEL}\n```", KERNEL),
]


@pytest.mark.parametrize("shape, answer, expected", EXTRACTION_TABLE, ids=[row[0] for row in EXTRACTION_TABLE])
def test_extraction_table(shape, answer, expected):
    assert extract_code(answer) == (None if expected is None else expected + "\n")


def test_elide_keeps_head_and_tail():
    text = "a" * 50 + "b" * 50
    short = elide(text, 20)
    assert short.startswith("a" * 10) and short.endswith("b" * 10) and "80 characters elided" in short


def test_every_listed_operator_has_a_family_and_a_prompt():
    """Every overload `bbagent ops` lists maps to a family (never the generic fallback) and
    renders: the prompt carries the schema and, where the traces have calls, a real shape."""
    import json

    import torch

    from bbagent.agent.generate.prompting import PROMPTS_DIR, family_of
    from bbagent.harness.coverage import list_ops
    from bbagent.harness.ops import UnknownOpError, describe, resolve_op
    from bbagent.harness.traces import load_calls
    families = set(json.loads((PROMPTS_DIR / "families.json").read_text())["ops"])
    rendered = 0
    for row in list_ops("all"):
        family = family_of(row["op"])
        assert family != "generic", row["op"]
        assert (PROMPTS_DIR / "families" / f"{family}.j2").is_file(), family
        families.discard(family)
        try:
            resolve_op(row["op"])
        except UnknownOpError:  # listed for its missing tests (gone from this torch): no prompt
            continue
        prompt = render_prompt(problem(row["op"]))
        assert describe(resolve_op(row["op"])).schema in prompt, row["op"]
        calls = load_calls(row["op"])
        if calls:
            assert any(f"`{c.describe()}`" in prompt for c in calls), row["op"]
        rendered += 1
    assert rendered > 1000 and not families  # and every family in the map is used
    assert torch.Tag.pointwise  # the rules read tags: this torch has them
    assert not [p for p in (PROMPTS_DIR / "families").glob("*.j2") if p.stem not in
                {family_of(r["op"]) for r in list_ops("all")} | {"generic"}]


@pytest.mark.parametrize("op, family, words", [
    ("aten.add.Tensor", "elementwise_binary", "torch.broadcast_shapes"),
    ("aten.add.out", "elementwise_binary", "## This is the `out=` overload"),
    ("aten._softmax.default", "softmax", "subtract the row maximum"),
    ("aten.mm.default", "matmul", "tl.dot"),
    ("aten.native_layer_norm.default", "normalization", "rstd"),
    ("aten.sum.dim_IntList", "reduction", "identity"),
    ("aten.convolution.default", "convolution", "implicit GEMM"),
    ("aten.max_pool2d_with_indices.default", "pooling", "ceil_mode"),
    ("aten.gather.default", "indexing", "int64 before multiplying"),
    ("aten.cat.default", "copy_layout", "slices of one output"),
    ("aten.gelu_backward.default", "backward", "grad_output"),
    ("aten.cumsum.default", "scan_sort", "tl.cumsum"),
    ("aten.bernoulli_.float", "random", "## This is the in-place overload"),
    ("aten.nll_loss_forward.default", "loss", "ignore_index"),
    ("aten.linalg_qr.default", "linalg", "batch"),
])
def test_family_templates_carry_their_guidance(op, family, words):
    from bbagent.agent.generate.prompting import family_of
    assert family_of(op) == family
    assert words in render_prompt(problem(op))


def test_prompt_command_prints_without_calling_a_model(capsys, tmp_path):
    import json

    from bbagent.cli import main
    assert main(["prompt", "--op", "aten.mm.default"]) == 0
    assert "aten::mm(Tensor self, Tensor mat2) -> Tensor" in capsys.readouterr().out
    assert main(["prompt", "--op", "aten.mm.default", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["family"] == "matmul" and data["template"] == "families/matmul.j2"
    verdict = make_verdict(op="aten.mm.default", summary={"total": 2, "failed": 2}, error_kind="exception",
                           message="boom")
    (tmp_path / "verdict.json").write_text(verdict.model_dump_json())
    assert main(["prompt", "--op", "aten.mm.default", "--round-feedback", str(tmp_path / "verdict.json")]) == 0
    assert "Problem (exception): boom" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{}")
    assert main(["prompt", "--op", "aten.mm.default", "--round-feedback", str(tmp_path / "bad.json")]) == 2
    assert "is not a Verdict" in capsys.readouterr().err
    assert main(["prompt", "--op", "aten.mmm.default"]) == 2


NAME = re.compile(r"(?<![\w.])(tl|triton|torch|libdevice)\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)")


def _resolves(root: str, path: str) -> bool:
    """Whether ``root.path`` names something on the installed stack (modules imported on the way)."""
    import importlib

    import torch  # noqa: F401
    import triton  # noqa: F401
    module_name = {"tl": "triton.language", "libdevice": "triton.language.extra.libdevice"}.get(root, root)
    obj = importlib.import_module(module_name)
    prefix = module_name
    for part in path.split("."):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            try:
                obj = importlib.import_module(f"{prefix}.{part}")
            except ImportError:
                return False
        prefix = f"{prefix}.{part}"
    return True


def test_every_triton_and_torch_name_in_the_prompts_exists():
    """Every `tl.X`, `triton.X`, `torch.X` and `libdevice.X` the templates (and the examples they
    include) mention, and those in a rendered prompt of each family, exists on this stack. The
    GPU test run runs this on the GPU machine's stack too."""
    from bbagent.agent.generate.prompting import PROMPTS_DIR, family_of
    from bbagent.harness.coverage import list_ops
    texts = {str(p): p.read_text() for p in PROMPTS_DIR.rglob("*") if p.suffix in (".j2", ".py")}
    by_family = {}
    for row in list_ops("all"):
        if not row["why_none"]:
            by_family.setdefault(family_of(row["op"]), row["op"])
    for family, op in by_family.items():
        texts[f"rendered {op}"] = render_prompt(problem(op), device="cpu") + render_prompt(problem(op), device="cuda")
    missing = set()
    for where, text in texts.items():
        for root, path in NAME.findall(text):
            path = path.rstrip(".")
            if "{{" in text[text.find(f"{root}.{path}"):][len(root) + len(path) + 1:][:2]:
                continue  # a name completed by a template variable: checked in the rendered prompts
            if path in {"X", "Y"} or not _resolves(root, path):
                missing.add(f"{where}: {root}.{path}")
    assert len(by_family) >= 15
    assert not missing, sorted(missing)


def test_feedback_says_when_compilation_and_autotuning_made_the_evaluation_slow():
    from bbagent.agent.generate.prompting import render_feedback
    from conftest import make_verdict
    slow = make_verdict(timings={"wall_s": 200.0, "compiles": 518, "compile_s": 2.0, "autotune_runs": 725,
                                 "autotune_s": 120.0}, error_kind="timeout", message="timed out")
    text = render_feedback(slow)
    assert "Compilation and autotuning took 122 s of this 200 s evaluation" in text and "725 autotuning runs" in text
    quick = make_verdict(timings={"wall_s": 20.0, "compiles": 3, "compile_s": 4.0}, error_kind="timeout", message="x")
    assert "autotuning took" not in render_feedback(quick)


def problem(name: str):
    """The problem of ``name`` alone (as ``generate --exact-overload`` asks for it)."""
    return operator_problem(name, exact_overload=True)
