"""A prompt may not teach code that fails: the worked example of every prompt family, taken from
a rendered prompt of that family, passes every test of its operator. Here on the CPU under the
Triton interpreter; the GPU twin (marked gpu) runs the full suites, every trace and bfloat16.

The example is extracted from the prompt of another operator of the family where there is one,
so that what is checked is what a model reads."""
import ast
import json
import re
from pathlib import Path

import pytest

from bbagent.harness.problem import operator_problem
from bbagent.agent.generate.extract import extract_code
from bbagent.agent.generate.prompting import PROMPTS_DIR, family_of, render_prompt
from bbagent.harness.coverage import list_ops
from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel

EXAMPLES = json.loads((PROMPTS_DIR / "families.json").read_text())["examples"]
HEADING = re.compile(r"^## Worked example: `(?P<op>[^`]+)`$", re.MULTILINE)


def _other_member(family: str, op: str) -> str:
    """An operator of ``family`` other than ``op`` (``op`` itself if it is alone)."""
    return next((row["op"] for row in list_ops("all")
                 if not row["why_none"] and row["op"] != op and family_of(row["op"]) == family), op)


def example_from_prompt(family: str, device: str, tmp_path) -> tuple[str, object]:
    """The operator and file of the worked example in a rendered prompt of ``family``."""
    prompt = render_prompt(problem(_other_member(family, EXAMPLES[family])), device=device)
    heading = HEADING.search(prompt)
    assert heading, f"no worked example in the {family} prompt"
    code = extract_code(prompt[heading.end():])
    assert code and "def kernel(" in code
    path = tmp_path / f"{family}_example.py"
    path.write_text(code)
    return heading["op"], path


def check_passes(verdict) -> None:
    assert verdict.passed, (verdict.message, verdict.failure_groups[:2])
    assert verdict.summary.passed > 0
    assert all("budget" in s.reason or "interpreter" in s.reason or "bfloat16" in s.reason
               for s in verdict.skipped), verdict.skipped[:3]


def test_every_family_has_an_example_and_every_example_file_is_used():
    families = {p.stem for p in (PROMPTS_DIR / "families").glob("*.j2")} - {"generic"}
    assert set(EXAMPLES) == families
    assert {p.stem for p in (PROMPTS_DIR / "examples").glob("*.py")} == families
    for family, op in EXAMPLES.items():
        assert family_of(op) == family, (family, op)


def code_lines(source: str) -> int:
    """Lines of code: neither blank, nor a comment, nor part of a docstring."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef)) and ast.get_docstring(node) is not None:
            docstrings.update(range(node.body[0].lineno, node.body[0].end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.lstrip().startswith("#") and number not in docstrings)


def test_code_lines_counts_code_alone():
    source = '"""A\ndocstring."""\nimport torch\n\n# a comment\ndef f(x):\n    """Doc."""\n    return x  # trailing\n'
    assert code_lines(source) == 3


@pytest.mark.parametrize("family", sorted(EXAMPLES))
def test_worked_example_stays_short(family):
    """Issue 49: an example a model can read and adapt, about 100 lines at most; what a pattern needs
    beyond that, the docstring and the family's prompt say in words."""
    assert code_lines((PROMPTS_DIR / "examples" / f"{family}.py").read_text()) <= 105


@pytest.mark.parametrize("family", sorted(EXAMPLES))
def test_worked_example_passes_its_operators_tests(family, tmp_path):
    op, path = example_from_prompt(family, "cpu", tmp_path)
    assert op == EXAMPLES[family]
    check_passes(evaluate_kernel(EvaluationRequest.of(op, device="cpu", seed=11, timeout_s=600), path))


@pytest.mark.gpu
@pytest.mark.timeout(1200)  # every trace of the operator (convolution: 1905 of them)
@pytest.mark.parametrize("family", sorted(EXAMPLES))
def test_worked_example_passes_its_operators_tests_on_gpu(family, tmp_path):
    op, path = example_from_prompt(family, "cuda", tmp_path)
    verdict = evaluate_kernel(EvaluationRequest.of(op, device="cuda", seed=11, timeout_s=900), path)
    check_passes(verdict)
    assert verdict.skipped == []


def test_selfcheck_corpus_of_examples_lists_every_example():
    """`python -m bbagent.harness.selfcheck` checks the worked examples with its corpus: the
    examples' corpus names each family's example file and operator, expected to pass."""
    from bbagent.harness.selfcheck import EXAMPLES as EXAMPLES_CORPUS, load_corpus
    entries = load_corpus(EXAMPLES_CORPUS)
    listed = {(EXAMPLES_CORPUS.parent / e["kernel"]).resolve(): e["op"] for e in entries}
    assert listed == {(PROMPTS_DIR / "examples" / f"{family}.py").resolve(): op for family, op in EXAMPLES.items()}
    assert {e["expect"] for e in entries} == {"pass"}


def test_selfcheck_runs_an_example_and_names_a_missing_corpus(tmp_path, capsys):
    from bbagent.harness.selfcheck import EXAMPLES as EXAMPLES_CORPUS, main
    rows = tmp_path / "rows.json"
    assert main(["--corpus", str(EXAMPLES_CORPUS), "--only", "backward", "--json", str(rows)]) == 0
    [row] = json.loads(rows.read_text())["rows"]
    assert row["ok"] and row["id"] == f"backward@{EXAMPLES['backward']}" and row["passed"] > 0
    assert main(["--corpus", str(tmp_path / "none.json")]) == 2
    assert "no corpus at" in capsys.readouterr().err


def problem(name: str):
    """The problem of ``name`` alone (as ``generate --exact-overload`` asks for it)."""
    return operator_problem(name, exact_overload=True)


REGION_KINDS = {"attention": "causal_attention", "gated MLP": "linear_silu", "norm + matmul": "linear_silu",
                "matmul + pointwise + matmul": "linear_silu"}


def region_example_from_prompt(kind: str, tmp_path) -> tuple[Path, Path]:
    """The problem and the answer of the worked example in a rendered region prompt of ``kind``."""
    from bbagent.agent.generate.program_prompting import render_program_prompt
    from bbagent.harness.interface import describe_program, program_problem
    region = tmp_path / "region.py"
    region.write_text((Path(__file__).parent / "problems" / "level1" / "1_ReLU.py").read_text()
                      + f'\nREGION_KIND = "{kind}"\n')
    prompt = render_program_prompt(program_problem(region), describe_program(program_problem(region)), device="cpu")
    shown = prompt.split("### Worked example: the technique on another problem", 1)[1]
    problem_code, answer_code = re.findall(r"```python\n(.*?)```", shown, re.DOTALL)[:2]
    problem, answer = tmp_path / "example_problem.py", tmp_path / "example_answer.py"
    problem.write_text(problem_code)
    answer.write_text(answer_code)
    return problem, answer


@pytest.mark.parametrize("kind", sorted(REGION_KINDS))
def test_a_region_kinds_worked_example_is_right_on_its_own_problem(kind, tmp_path):
    """A region across matrix products shows a worked example of its technique (a matrix product
    with its epilogue fused, autotuned for bf16 and fp16; the online softmax), with the problem it
    answers (in bf16): taken from the rendered prompt, the answer passes every test of that
    problem on the CPU (its float32 path, as the interpreter needs), and each example file is
    some kind's."""
    import bbagent
    problem, answer = region_example_from_prompt(kind, tmp_path)
    folder = PROMPTS_DIR / "regions" / "examples"
    assert answer.read_text().strip() == (folder / f"{REGION_KINDS[kind]}.py").read_text().strip()
    assert code_lines(answer.read_text()) <= 105
    result = bbagent.bench(problem=problem, kernel=answer, root=tmp_path / "root", device="cpu", seed=5)
    assert result.verdict.passed, result.verdict.message
    assert {p.stem for p in folder.glob("*.py") if not p.stem.endswith("_problem")} == set(REGION_KINDS.values())


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["attention", "gated MLP"])
def test_a_region_kinds_worked_example_is_right_on_its_own_problem_on_gpu(kind, tmp_path):
    """The GPU twin: the examples' bf16 paths (tensor cores, the autotuned tiles) pass and are timed."""
    import bbagent
    problem, answer = region_example_from_prompt(kind, tmp_path)
    result = bbagent.bench(problem=problem, kernel=answer, root=tmp_path / "root", device="cuda", seed=5)
    assert result.verdict.passed and result.verdict.performance.measured, result.verdict.message
