"""Program problems in KernelBench's format (tests/problems/, written for these tests): the file's
shape checked without running it, what one shape-only run finds, and `bbagent prompt --problem`,
its errors included, as a user runs it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bbagent.cli import main
from bbagent.agent.families import families
from bbagent.agent.generate.program_prompting import family_guidance, render_program_prompt
from bbagent.harness.interface import ProblemError, ProgramProblem, describe_program, program_problem
from conftest import PYTHONPATH

PROBLEMS = Path(__file__).parent / "problems"
GEMM_RELU_BIAS = PROBLEMS / "level2" / "1_Gemm_ReLU_BiasAdd.py"


@pytest.mark.parametrize("relative, level, inputs, outputs, operators", [
    ("level1/1_ReLU.py", 1, ["float32[16, 512]"], ["float32[16, 512]"], ["aten.relu.default"]),
    ("level1/2_Square_matmul.py", 1, ["float32[64, 64]", "float32[64, 64]"], ["float32[64, 64]"], ["aten.mm.default"]),
    ("level1/3_LayerNorm.py", 1, ["float32[8, 16, 32]"], ["float32[8, 16, 32]"], ["aten.native_layer_norm.default"]),
    ("level2/1_Gemm_ReLU_BiasAdd.py", 2, ["float32[32, 64]"], ["float32[32, 48]"],
     ["aten.t.default", "aten.mm.default", "aten.relu.default", "aten.add.Tensor"]),
    ("level2/2_Gemm_Multiply_LeakyReLU.py", 2, ["float32[16, 32]"], ["float32[16, 64]"],
     ["aten.t.default", "aten.addmm.default", "aten.mul.Tensor", "aten.leaky_relu.default"]),
    ("level2/3_Conv2d_ReLU_BiasAdd.py", 2, ["float32[2, 3, 12, 12]"], ["float32[2, 8, 10, 10]"],
     ["aten.convolution.default", "aten.relu.default", "aten.add.Tensor"]),
    ("level3/1_MLP_Block.py", 3, ["float32[4, 8, 32]"], ["float32[4, 8, 32]"],
     ["aten.native_layer_norm.default", "aten.view.default", "aten.t.default", "aten.addmm.default",
      "aten.gelu.default", "aten.add.Tensor"]),
])
def test_a_problem_is_described_from_one_shape_only_run(relative, level, inputs, outputs, operators):
    problem = program_problem(PROBLEMS / relative)
    assert (problem.name, problem.level, problem.kind) == (Path(relative).stem, level, "program")
    assert ProgramProblem.from_wire(json.loads(json.dumps(problem.to_wire()))) == problem
    facts = describe_program(problem)
    assert [f.text for f in facts.inputs] == inputs and [f.text for f in facts.outputs] == outputs
    assert [use.name for use in facts.aten_ops] == operators and facts.trace_error is None
    assert facts.input_bytes == sum(4 * eval("*".join(text[8:-1].split(", "))) for text in inputs)


def test_weights_and_constructor_arguments_are_what_model_new_must_match():
    facts = describe_program(program_problem(GEMM_RELU_BIAS))
    assert [a.text for a in facts.init_args] == ["64", "48", "(48,)"]
    assert [(p.name, p.shape, p.kind) for p in facts.parameters] == [("bias", [48], "parameter"),
                                                                     ("gemm.weight", [48, 64], "parameter")]
    facts = describe_program(program_problem(PROBLEMS / "level1" / "3_LayerNorm.py"))
    assert [a.text for a in facts.init_args] == ["(16, 32)"]


def test_a_constructor_that_reads_values_is_built_for_real_and_a_forward_that_does_stops_the_trace():
    facts = describe_program(program_problem(PROBLEMS / "level3" / "2_Scheduled_Blocks.py"))
    assert facts.trace_error is None and [p.name for p in facts.parameters][:2] == ["blocks.0.weight", "blocks.0.bias"]
    assert {use.name: use.count for use in facts.aten_ops}["aten.tanh.default"] == 3
    facts = describe_program(program_problem(PROBLEMS / "broken" / "reads_values.py"))
    assert "item()" in facts.trace_error and facts.outputs == []
    assert [use.name for use in facts.aten_ops][:2] == ["aten.exp.default", "aten.max.default"]


@pytest.mark.parametrize("path, words", [
    (PROBLEMS / "broken" / "no_model.py", "it lacks Model (it defines: get_init_inputs, get_inputs)"),
    (PROBLEMS / "broken" / "inputs_fail.py", "get_inputs() failed: NameError: name 'undefined_size'"),
    (PROBLEMS / "missing.py", "missing.py: no such file"),
    (PROBLEMS, "is not a file"),
    (Path(__file__).parent.parent / "README.md", "is not a Python file a problem can be read from"),
])
def test_what_is_not_a_problem_is_said_in_words(path, words):
    with pytest.raises(ProblemError) as caught:
        describe_program(program_problem(path))
    assert words in str(caught.value)


def test_the_problem_is_its_text_as_posed(tmp_path):
    """The problem carries the text read when it was posed: a later change to the file changes nothing."""
    path = tmp_path / "1_ReLU.py"
    path.write_text((PROBLEMS / "level1" / "1_ReLU.py").read_text())
    problem = program_problem(path)
    path.write_text(path.read_text().replace("torch.relu(x)", "x"))
    assert "torch.relu(x)" in problem.text and describe_program(problem).aten_ops[0].name == "aten.relu.default"


def test_every_family_guidance_renders_for_a_program():
    """A family template's guidance, written for operators, renders in a program's prompt with what
    the program's context has (a template asking for more would fail here, not in a user's prompt)."""
    for interpreter in (True, False):
        context = {"stack": {"triton": "3.6.0", "interpreter": interpreter}, "facts": None}
        texts = {family: family_guidance(family, context) for family in families()}
        assert texts["matmul"].startswith("## Triton guidance for matrix products")
        assert sum(bool(text) for text in texts.values()) >= 10


def test_the_prompt_holds_the_program_its_shapes_the_contract_and_its_families_guidance():
    problem = program_problem(GEMM_RELU_BIAS)
    text = render_program_prompt(problem, describe_program(problem), device="cpu")
    assert problem.text.strip() in text and "KernelBench level 2" in text
    assert "`float32[32, 64]` (8 KiB in all)" in text and "`bias` float32[48], `gemm.weight` float32[48, 64]" in text
    assert "`aten.t.default`, `aten.mm.default`, `aten.relu.default`, `aten.add.Tensor`" in text
    assert "class ModelNew(torch.nn.Module)" in text and "load_state_dict" in text
    assert "Matrix products and convolutions may stay in PyTorch" in text
    assert "## Triton guidance for matrix products" in text and "## Worked example: a kernel for `aten.mm.default`" in text
    assert "your tests run on the CPU under the Triton interpreter" in text
    strict = render_program_prompt(problem, describe_program(problem), device="cpu", library="none")
    assert "no PyTorch computation at all" in strict and "may stay in PyTorch" not in strict
    with pytest.raises(ValueError, match="none, gemm, all"):
        render_program_prompt(problem, describe_program(problem), device="cpu", library="some")


def test_prompt_problem_on_the_command_line(capsys):
    assert main(["prompt", "--problem", str(PROBLEMS / "level3" / "1_MLP_Block.py"), "--device", "cpu", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["problem"], shown["level"], shown["template"]) == ("1_MLP_Block", 3, "program.j2")
    assert shown["families"][:2] == ["normalization", "matmul"] and "gelu" in shown["prompt"]
    assert shown["facts"]["outputs"][0]["shape"] == [4, 8, 32]
    assert main(["prompt", "--problem", str(PROBLEMS / "broken" / "reads_values.py"), "--device", "cpu"]) == 0
    said = capsys.readouterr()
    assert "stopped early" in said.err and "the run on tensors without data stopped early" in said.out


def test_prompt_problem_as_a_user_runs_it(tmp_path):
    """From a directory that is not the checkout: the prompt on stdout, a usage error in words with
    exit 2 for a file that is no problem and for --op and --problem together, never a traceback."""
    def run(*argv):
        return subprocess.run([sys.executable, "-m", "bbagent", "prompt", *argv, "--device", "cpu"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, env={"PYTHONPATH": PYTHONPATH,
                                                                                 "PATH": "/usr/bin:/bin"})
    done = run("--problem", str(PROBLEMS / "level1" / "1_ReLU.py"))
    assert done.returncode == 0 and done.stdout.startswith("You are an expert GPU kernel engineer.") and not done.stderr
    for argv, words in [(["--problem", str(PROBLEMS / "broken" / "no_model.py")], "not a problem in KernelBench's format"),
                        (["--problem", "nowhere.py"], "nowhere.py: no such file"),
                        (["--problem", str(GEMM_RELU_BIAS), "--op", "aten.relu.default"], "not allowed with"),
                        (["--problem", str(GEMM_RELU_BIAS), "--round-feedback", "v.json"], "comes with its verdict")]:
        done = run(*argv)
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)


@pytest.mark.parametrize("kind, said", [("attention", "the online softmax"),
                                        ("gated MLP", "two float32 accumulators"),
                                        ("norm + matmul", "fuse the norm into their prologue"),
                                        ("matmul + pointwise + matmul", "first product's float32 accumulator"),
                                        ("matmul + epilogue", None), ("a kind of its own", None)])
def test_a_region_across_matrix_products_is_told_how_to_fuse_it(tmp_path, kind, said):
    """A region problem names its kind (``REGION_KIND``, as ``bbagent regions`` writes it): one
    across matrix products gets that kind's guidance in its prompt; any other problem none."""
    path = tmp_path / "region.py"
    path.write_text((PROBLEMS / "level1" / "1_ReLU.py").read_text() + f"\nREGION_KIND = {kind!r}\n".replace("'", '"'))
    problem = program_problem(path)
    prompt = render_program_prompt(problem, describe_program(problem), device="cpu")
    sections = [line for line in prompt.splitlines() if line.startswith("## This program is")]
    if said is None:
        assert sections == []
    else:
        assert len(sections) == 1 and said in prompt and "## The GPU" not in prompt.split(said)[1].split("##")[0]
    plain = program_problem(PROBLEMS / "level1" / "1_ReLU.py")
    assert "## This program is" not in render_program_prompt(plain, describe_program(plain), device="cpu")
