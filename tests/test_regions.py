"""Regions of real models (``bbagent regions``, ``agent.regions``) on the CPU: found in the graphs
inductor receives, hashed by operators and shapes, counted, and written as program problems that
compute what the model computes and that eval takes as they are."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bbagent.agent.regions.extract import inductor_graphs
from bbagent.agent.regions.spanning import find_regions
from bbagent.agent.regions.program import region_program
from conftest import PYTHONPATH

ANSWERS = Path(__file__).parent / "problems" / "answers"
GELU_EPILOGUE = ["aten.addmm.default", "aten.mul.Tensor", "aten.mul.Tensor", "aten.erf.default", "aten.add.Tensor",
                 "aten.mul.Tensor"]


class Blocks(torch.nn.Module):
    """Two identical Linear + GELU blocks, then a LayerNorm + ReLU and a softmax."""

    def __init__(self, width: int):
        super().__init__()
        self.first, self.second = torch.nn.Linear(width, width), torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.first(x))
        x = torch.nn.functional.gelu(self.second(x))
        return torch.relu(self.norm(x)).softmax(dim=-1)


def regions_of(width: int, batch: int = 8):
    torch.manual_seed(0)
    return find_regions(inductor_graphs(Blocks(width).eval(), (torch.randn(batch, width),)))


@pytest.mark.slow
def test_regions_are_found_hashed_by_operators_and_shapes_and_counted():
    found = regions_of(16)
    by_ops = {tuple(r.ops): r for r in found}
    gelu = by_ops[tuple(GELU_EPILOGUE)]
    assert gelu.kind == "matmul + epilogue" and gelu.count == 2  # the two blocks: one region, counted twice
    assert [s.shape for s in gelu.inputs] == [[16], [8, 16], [16, 16]] and [s.shape for s in gelu.outputs] == [[8, 16]]
    norm = next(r for r in found if r.kind == "reduction + pointwise")
    assert norm.ops[0] == "aten.var_mean.correction" and "aten.relu.default" in norm.ops
    assert found[0].count == 2  # the most frequent first
    again = regions_of(16)
    assert [r.hash for r in again] == [r.hash for r in found]  # the same model: the same hashes
    other = {r.hash for r in regions_of(24)}
    assert gelu.hash not in other and len(other) == len(found)  # other shapes: other hashes


@pytest.mark.slow
def test_a_region_is_a_program_problem_computing_what_the_model_computes(tmp_path):
    from bbagent.harness.problem import program_problem
    gelu = next(r for r in regions_of(16) if r.ops == GELU_EPILOGUE)
    path = tmp_path / "1_matmul_epilogue.py"
    path.write_text(region_program(gelu, "Blocks"))
    program_problem(path)  # KernelBench's format
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the file just written
    bias, x, weight = namespace["get_inputs"]()
    got = namespace["Model"](*namespace["get_init_inputs"]())(bias, x, weight)
    assert torch.allclose(got, torch.nn.functional.gelu(torch.addmm(bias, x, weight)), atol=1e-6)


@pytest.mark.slow
def test_regions_of_a_real_model_from_the_command_line_and_one_answered(tmp_path):
    def bbagent(*argv):
        return subprocess.run([sys.executable, "-m", "bbagent", *argv], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, env={"PYTHONPATH": PYTHONPATH, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                "TRITON_INTERPRET": "1"})
    small = ["--set", "batch=2", "--set", "seq=16", "--set", "vocab=50", "--set", "d_model=32", "--set", "heads=2",
             "--set", "layers=2", "--set", "d_ff=64"]
    done = bbagent("regions", "--model", "transformer", *small, "--device", "cpu", "--json", "--out", "found")
    assert done.returncode == 0, done.stderr[-2000:]
    survey = json.loads(done.stdout)
    kinds = {tuple(r["ops"]): r for r in survey["regions"]}
    gelu = kinds[tuple(GELU_EPILOGUE)]
    assert gelu["count"] == 2 and survey["graphs"] == 1  # one per layer
    softmax = ["aten.amax.default", "aten.sub.Tensor", "aten.exp.default", "aten.sum.dim_IntList", "aten.div.Tensor"]
    assert kinds[tuple(softmax)]["count"] == 2 and kinds[tuple(softmax)]["kind"] == "reduction + pointwise"
    layer_norms = [r for r in survey["regions"] if r["ops"][0] == "aten.var_mean.correction"]
    assert [r["count"] for r in layer_norms if r["kind"] == "reduction + pointwise"] == [5]  # two per layer, the last
    # across the matrix products: each layer's norms with the projections after them, and the attention
    assert {r["kind"] for r in layer_norms} == {"reduction + pointwise", "norm + matmul"}
    assert [r["count"] for r in survey["regions"] if r["kind"] == "attention"] == [2]
    problem = survey["files"][survey["regions"].index(gelu)]
    assert problem.startswith(str(tmp_path / "found")) and problem.endswith(f"_matmul_epilogue_{gelu['hash']}.py")
    judged = bbagent("eval", "--problem", problem, "--kernel", str(ANSWERS / "region_addmm_gelu_right.py"),
                     "--device", "cpu", "--json")
    assert judged.returncode == 0, judged.stdout[-3000:] + judged.stderr[-2000:]
    assert json.loads(judged.stdout)["verdict"] == "pass"
    for argv, said in ((["--set", "width=3"], "transformer has no setting width"),
                       (["--set", "layers=x"], "setting layers takes a positive whole number"),
                       ([*small, "--set", "heads=3"], "transformer does not run with the settings"),
                       ([*small, "--out", "/proc/nowhere"], "the problems cannot be written there")):
        refused = bbagent("regions", "--model", "transformer", *argv, "--device", "cpu")
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr[-2000:]
        assert "Traceback" not in refused.stderr and "internal error" not in refused.stderr


SMALL = {"batch": 2, "seq": 16, "vocab": 50, "d_model": 32, "heads": 2, "layers": 2, "d_ff": 64}


@pytest.mark.slow
def test_an_approved_region_answer_is_what_the_compiled_model_runs(tmp_path, monkeypatch, no_keys, capsys):
    """The loop closed on the CPU: a region of the small transformer found, answered through the
    real SDK against the fake server, accepted and approved; then, enabled, the compiled model
    calls the answer once per layer where the region stands and computes what eager computes; the
    problem file edited, the answer is left to inductor, saying why."""
    import bbagent
    survey = bbagent.regions("transformer", config=SMALL, device="cpu", out=tmp_path / "found")
    gelu = next(r for r in survey.regions if r.ops == GELU_EPILOGUE)
    problem = survey.files[survey.regions.index(gelu)]
    key = answered_and_approved(tmp_path, problem, "region_addmm_gelu_right.py", monkeypatch, capsys)
    built = (f"config = {{**{SMALL!r}, 'activation': 'gelu'}}\n"
             "model, tokens = build_model('transformer', config, 'cpu', torch.float32)\n")

    def run() -> dict:
        return compiled_beside_eager(tmp_path, built)
    served = run()
    assert served["regions"] == {key: "served"} and served["calls"][key] == 2 and served["close"], served
    kept = tmp_path / "generated_kernels" / key / "problem.py"
    assert kept.read_text() == Path(problem).read_text()
    Path(problem).unlink()  # the regions' folder cleaned away, or the root moved to another machine
    assert run() == served
    kept.unlink()  # an answer kept without its problem's copy (accepted before copies were kept)
    left = run()
    assert "is not at hand" in left["regions"][key] and "problem.py" in left["regions"][key], left
    assert key not in left["calls"], left


MLP_SCRIPT = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up, self.down, self.norm = nn.Linear(width, 4 * width), nn.Linear(4 * width, width), nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16]
'''


@pytest.mark.slow
def test_a_users_own_model_as_a_script_has_its_regions_found(tmp_path):
    """``regions --script FILE.py``: a model written in KernelBench's format is searched as a
    built-in one is; on the CPU no time share is measured (and none is made up); a script that is
    not a program, or that does not run, is a usage error saying so."""
    from rich.console import Console

    import bbagent
    from bbagent.agent.errors import UsageError
    from bbagent.agent.reports.console import print_regions
    script = tmp_path / "my_mlp.py"
    script.write_text(MLP_SCRIPT)
    survey = bbagent.regions(script=script, device="cpu", out=tmp_path / "found")
    assert survey.model == "my_mlp" and survey.script == str(script) and survey.gpu_us is None
    gelu = next(r for r in survey.regions if r.ops == GELU_EPILOGUE)
    assert [s.shape for s in gelu.inputs] == [[64], [8, 16], [16, 64]] and gelu.count == 1
    assert any(r.ops[0] == "aten.var_mean.correction" for r in survey.regions)
    assert all(r.share is None and r.gpu_us is None for r in survey.regions)
    printed = Console(record=True, width=400)
    print_regions(printed, survey)
    assert "time shares are measured on a GPU only" in printed.export_text() and "floor" not in printed.export_text()
    for region in survey.regions:  # as a GPU's survey sets them
        region.gpu_us, region.floor_us, region.share = 12.5, 2.25, 0.125
    print_regions(printed, survey.model_copy(update={"gpu_us": 100.0}))
    timed = printed.export_text().split("the compiled model: 100.0 us")[1]
    assert "┃   us ┃ floor us ┃ share ┃" in timed and timed.count("│ 12.5 │      2.2 │ 12.5% │") == len(survey.regions)
    broken = tmp_path / "broken.py"
    broken.write_text(MLP_SCRIPT.replace("[torch.randn(8, 16)]", "[torch.randn(8, 15)]"))
    with pytest.raises(UsageError, match="broken does not run with its own get_inputs"):
        bbagent.regions(script=broken, device="cpu", out=tmp_path / "f2")
    with pytest.raises(UsageError, match="not a problem in KernelBench's format"):
        bbagent.regions(script=_written(tmp_path, "x = 1\n"),
                        device="cpu", out=tmp_path / "f3")
    with pytest.raises(UsageError, match="a model .* or a program file .*, one of them"):
        bbagent.regions("transformer", script=script, device="cpu")


def _written(folder: Path, text: str) -> Path:
    path = folder / "not_a_program.py"
    path.write_text(text)
    return path


class ConvBatchNormReLU(torch.nn.Module):
    """resnet's unit: a 3x3 convolution without bias, a batch norm in inference, a ReLU."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm = torch.nn.Conv2d(4, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


@pytest.mark.slow
def test_a_convolutions_batch_norm_epilogue_is_one_region_drawn_in_its_domain_and_answered(tmp_path):
    """Inductor computes the batch norm's scale from the running variance after the convolution:
    those operators join the region (the problem takes the parameters themselves), the variance is
    drawn positive, and a hand-written answer passes the program verdict."""
    found = find_regions(inductor_graphs(ConvBatchNormReLU().eval(), (torch.randn(2, 4, 10, 10),)))
    region = next(r for r in found if r.ops[0] == "aten.convolution.default")
    assert region.kind == "matmul + epilogue" and region.ops[-1] == "aten.relu.default"
    assert "aten.sqrt.default" in region.ops or "aten.rsqrt.default" in region.ops
    assert [s.shape for s in region.inputs] == [[2, 4, 10, 10], [8, 4, 3, 3], [8], [8], [8], [8]]
    assert [s.positive for s in region.inputs] == [False, False, False, True, False, False]  # the variance
    problem = tmp_path / "conv_bn_relu.py"
    problem.write_text(region_program(region, "ConvBatchNormReLU"))
    judged = subprocess.run([sys.executable, "-m", "bbagent", "eval", "--problem", str(problem), "--kernel",
                             str(ANSWERS / "region_conv_bn_relu_right.py"), "--device", "cpu", "--json"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600,
                            env={"PYTHONPATH": PYTHONPATH, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                 "TRITON_INTERPRET": "1"})
    assert judged.returncode == 0 and json.loads(judged.stdout)["verdict"] == "pass", judged.stdout[-3000:]


EXTRACT_KINDS = ("matmul + epilogue", "reduction + pointwise")


def _answered(model, inputs: tuple, folder: Path, answer=None) -> tuple:
    """Every region of ``model`` that ``extract`` finds (those across matrix products overlap
    them) answered by ``answer(module)`` (default: the problem's own ``Model``), swapped into the
    graph inductor receives: the compiled output and the calls."""
    from bbagent.agent.serving.compiled import CompiledServing, RegionAnswer
    from bbagent.harness.interface import ProgramProblem, program_module
    regions = [r for r in find_regions(inductor_graphs(model, inputs)) if r.kind in EXTRACT_KINDS]
    answers = {}
    for number, region in enumerate(regions):
        path = folder / f"region_{number}.py"
        path.write_text(region_program(region, type(model).__name__))
        module = program_module(ProgramProblem(path=str(path), text=path.read_text()))
        answers[region.hash] = RegionAnswer(key=path.stem, hash=region.hash, problem=module,
                                            model_new=answer(module) if answer else module.Model)
    serving = CompiledServing({}, answers)
    serving.install()
    try:
        torch._dynamo.reset()
        with torch.no_grad():
            compiled = torch.compile(model)(*inputs)
    finally:
        serving.uninstall()
        torch._dynamo.reset()
    return regions, compiled, dict(serving.calls)


@pytest.mark.slow
def test_regions_that_feed_each_other_are_all_swapped_and_compute_what_eager_computes(tmp_path):
    """The first block's GELU region feeds the second's matrix product, whose region feeds the
    norm's: each is swapped in turn, the graph stays whole, and the output is eager's."""
    torch.manual_seed(0)
    model, x = Blocks(16).eval(), torch.randn(8, 16)
    regions, compiled, calls = _answered(model, (x,), tmp_path)
    assert calls == {f"region_{n}": r.count for n, r in enumerate(regions)} and sum(calls.values()) >= 3
    assert torch.allclose(compiled, model(x), atol=1e-5)
    from bbagent.agent.serving.compiled import CompiledServing, RegionAnswer, SwapPass
    from bbagent.harness.interface import ProgramProblem, program_module
    graph = inductor_graphs(model, (x,))[0]
    answers = {}
    for path in sorted(tmp_path.glob("region_*.py")):
        module = program_module(ProgramProblem(path=str(path), text=path.read_text()))
        answers[module.REGION_HASH] = RegionAnswer(
            key=path.stem, hash=module.REGION_HASH, problem=module, model_new=module.Model)
    serving = CompiledServing({}, answers)
    try:
        SwapPass({}, None, serving.region_twins)(graph)
        graph.lint()  # every argument a node of the graph, in order
        swapped = [n for n in graph.nodes if n.op == "call_function" and "bbagent_served" in str(n.target)]
        assert len(swapped) == sum(r.count for r in regions) and all(n.users for n in swapped)
    finally:
        serving.uninstall()


@pytest.mark.slow
def test_a_region_answer_may_lay_out_its_output_unlike_inductor(tmp_path):
    """After a convolution on channels-last input inductor keeps the region's output channels
    last; an answer returning it contiguous (as most do) is served all the same."""
    def contiguous(module):
        class Answer(module.Model):
            def forward(self, *args):
                return super().forward(*args).contiguous()
        return Answer
    torch.manual_seed(0)
    model, x = ConvBatchNormReLU().eval(), torch.randn(2, 4, 10, 10).to(memory_format=torch.channels_last)
    regions, compiled, calls = _answered(model, (x,), tmp_path, contiguous)
    assert calls == {"region_0": 1}
    assert torch.allclose(compiled, model(x), atol=1e-5)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from bbagent.agent.serving.compiled import CompiledServing, RegionAnswer
    from bbagent.harness.interface import ProgramProblem, program_module
    path = tmp_path / "region_0.py"
    module = program_module(ProgramProblem(path=str(path), text=path.read_text()))
    serving = CompiledServing({}, {"h": RegionAnswer(key="r", hash=module.REGION_HASH, problem=module,
                                                     model_new=module.Model)})  # the reference keeps channels last
    try:
        twin = serving.region_twins[module.REGION_HASH]
        inputs = [t.to(memory_format=torch.channels_last) if t.dim() == 4 else t for t in module.get_inputs()]
        with FakeTensorMode() as fake:
            shapes = twin(*[fake.from_tensor(t) for t in inputs])
        assert shapes.is_contiguous() and twin(*inputs).is_contiguous()  # what inductor is told is what it gets
    finally:
        serving.uninstall()


@pytest.mark.slow
def test_the_training_graphs_backward_included_are_searched_when_asked(tmp_path):
    """``--backward``: the forward and backward graphs of a training step; the GELU's derivative
    (erf and exp) after the backward's matrix product is a region, and its problem runs."""
    import bbagent
    from bbagent.harness.interface import ProgramProblem, program_module
    script = tmp_path / "my_mlp.py"
    script.write_text(MLP_SCRIPT)
    inference = bbagent.regions(script=script, device="cpu", out=tmp_path / "inference")
    training = bbagent.regions(script=script, device="cpu", out=tmp_path / "training", backward=True)
    assert training.backward and training.graphs == 2 and inference.graphs == 1
    derivative = next(r for r in training.regions if r.ops[0] == "aten.mm.default" and "aten.exp.default" in r.ops)
    assert derivative.hash not in {r.hash for r in inference.regions}
    path = Path(training.files[training.regions.index(derivative)])
    module = program_module(ProgramProblem(path=str(path), text=path.read_text()))
    outputs = module.Model()(*module.get_inputs())
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert [list(o.shape) for o in outputs] == [s.shape for s in derivative.outputs]


@pytest.mark.slow
def test_an_answer_to_a_backward_region_is_served_in_the_training_step(tmp_path):
    """Issue 76, 3: the GELU derivative's region of the backward graph, answered (by its own
    ``Model``, a right answer), is what the compiled training step runs there: its twin is called
    once per backward, and the gradients are eager's."""
    import bbagent
    from bbagent.agent.serving.compiled import CompiledServing, RegionAnswer
    from bbagent.harness.interface import ProgramProblem, program_module
    script = tmp_path / "my_mlp.py"
    script.write_text(MLP_SCRIPT)
    training = bbagent.regions(script=script, device="cpu", out=tmp_path / "training", backward=True)
    derivative = next(r for r in training.regions if r.ops[0] == "aten.mm.default" and "aten.exp.default" in r.ops)
    path = Path(training.files[training.regions.index(derivative)])
    module = program_module(ProgramProblem(path=str(path), text=path.read_text()))
    answers = {derivative.hash: RegionAnswer(key="derivative", hash=derivative.hash, problem=module,
                                             model_new=module.Model)}
    namespace = {}
    exec(compile(MLP_SCRIPT, str(script), "exec"), namespace)  # noqa: S102 - the script just written
    torch.manual_seed(0)
    model, x = namespace["Model"](16), torch.randn(8, 16)
    eager = _gradients(model, model, x)
    serving = CompiledServing({}, answers)
    serving.install()
    try:
        torch._dynamo.reset()
        compiled = _gradients(model, torch.compile(model), x)
    finally:
        serving.uninstall()
        torch._dynamo.reset()
    assert serving.calls["derivative"] == 1
    assert all(torch.allclose(e, c, atol=1e-5) for e, c in zip(eager, compiled))


def _gradients(model, run, x) -> list:
    """The gradients of ``model``'s parameters after one backward of ``run(x)``'s mean square."""
    model.zero_grad(set_to_none=True)
    run(x).square().mean().backward()
    return [p.grad.clone() for p in model.parameters()]


MODELS = Path(__file__).parent / "models"


@pytest.mark.slow
def test_regions_across_matrix_products_are_found_in_llama_and_gpt2(tmp_path):
    """transformers' Llama (RMSNorm, SwiGLU, eager attention with grouped KV heads) and GPT-2
    (layer norm, Conv1D projections, eager attention, a GELU MLP), tiny: a normalization with the
    projections reading it, Llama's gated MLP, GPT-2's MLP and the attention are found in the
    inference graph, in bf16 and in the training graphs (--backward; there also the MLPs' backward,
    a product, the activation's derivative and the products after it), one hash per layer's
    region, each a program problem that ``generate --problem`` takes; the attention of both models
    is one problem at one size."""
    import bbagent
    from bbagent.harness.interface import describe_program, program_module, program_problem
    found = {}
    llama, gpt2, chain = {"norm + matmul", "gated MLP", "attention"}, {"norm + matmul", "attention"}, \
        {"matmul + pointwise + matmul"}
    for name, backward, dtype, kinds in (("tiny_llama", False, "float32", llama),
                                         ("tiny_llama", True, "float32", llama | chain),
                                         ("tiny_llama", False, "bfloat16", llama),
                                         ("tiny_gpt2", False, "float32", gpt2 | chain),
                                         ("tiny_gpt2", True, "float32", gpt2 | chain)):
        survey = bbagent.regions(script=MODELS / f"{name}.py", device="cpu", dtype=dtype,
                                 out=tmp_path / f"{name}-{backward}-{dtype}", backward=backward)
        spanning = {}
        for region, file in zip(survey.regions, survey.files):
            spanning.setdefault(region.kind, (region, file))  # the most frequent of each kind
        assert kinds <= set(spanning), (name, backward, sorted(spanning))
        for kind in kinds:
            region, file = spanning[kind]
            assert region.count == 2, (name, backward, dtype, kind, region.count)  # once per layer: one hash
            assert sum(op.split(".")[1] in ("mm", "addmm", "bmm") for op in region.ops) >= 2 or kind == "norm + matmul"
            module = program_module(program_problem(file))  # runs as written (a bf16 graph's casts are prims')
            assert describe_program(program_problem(file)).trace_error is None
            module.Model()(*module.get_inputs())
        found[(name, backward, dtype)] = spanning
    assert found[("tiny_llama", False, "float32")]["attention"][0].hash == \
        found[("tiny_gpt2", False, "float32")]["attention"][0].hash
    attention = found[("tiny_llama", False, "bfloat16")]["attention"][0]
    assert {spec.dtype for spec in attention.inputs + attention.outputs} == {"bfloat16"}
    gated = found[("tiny_llama", False, "float32")]["gated MLP"][0]
    assert [op.split(".")[1] for op in gated.ops].count("mm") == 3  # gate, up and the down projection
    assert "matmul + pointwise + matmul" not in found[("tiny_llama", False, "float32")]  # the gated MLP is not one
    mlp = found[("tiny_gpt2", False, "float32")]["matmul + pointwise + matmul"][0]
    assert [op.split(".")[1] for op in mlp.ops] == ["addmm", "mul", "pow", "mul", "add", "mul", "tanh", "add", "mul",
                                                    "addmm"]  # c_fc, GELU (tanh), c_proj
    backward = found[("tiny_llama", True, "float32")]["matmul + pointwise + matmul"][0]
    assert [op.split(".")[1] for op in backward.ops].count("mm") == 5  # down's input gradient, then gate's and up's
    # input and weight gradients


@pytest.mark.slow
@pytest.mark.parametrize("model, kind, products, answer", [
    ("tiny_llama", "attention", 2, "region_attention_right.py"),
    ("tiny_llama", "gated MLP", 3, "region_gated_mlp_right.py"),
    ("tiny_llama", "norm + matmul", 2, "region_norm_gate_up_right.py"),
    ("tiny_gpt2", "matmul + pointwise + matmul", 2, "region_mlp_gelu_right.py")])
def test_an_answer_across_matrix_products_is_served_in_the_compiled_model(tmp_path, monkeypatch, no_keys, capsys,
                                                                          model, kind, products, answer):
    """A hand-written Triton answer to a region of the tiny Llama or GPT-2 across matrix products
    (the attention, its scores never written to memory; the gated MLP, gate and up computed
    together and SiLU-and-multiplied before one store; the MLP's RMSNorm applied to each input tile
    as the gate and up products load it; GPT-2's MLP, its GELU applied to the up projection's
    accumulator), judged through the real SDK against the fake server and approved, is what the
    compiled model runs in each layer, and the logits are eager's."""
    import bbagent
    survey = bbagent.regions(script=MODELS / f"{model}.py", device="cpu", out=tmp_path / "found")
    region = next(r for r in survey.regions
                  if r.kind == kind and sum(op.split(".")[1] in ("mm", "addmm", "bmm") for op in r.ops) == products)
    problem = survey.files[survey.regions.index(region)]
    key = answered_and_approved(tmp_path, problem, answer, monkeypatch, capsys)
    served = compiled_beside_eager(tmp_path, f"model, (tokens,) = build_program({str(MODELS / f'{model}.py')!r}, "
                                              "'cpu', torch.float32)\n")
    assert served["regions"][key] == "served" and served["calls"][key] == 2 and served["close"], served


def answered_and_approved(root: Path, problem: str, answer: str, monkeypatch, capsys) -> str:
    """``problem`` answered with the file ``answer`` of tests/problems/answers through the real
    OpenAI SDK against the fake server, judged on the CPU, accepted and approved; its key."""
    from bbagent.agent.review import lifecycle
    from bbagent.cli import main
    from fake_llm import FakeLLMServer
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer().answer(f"```python\n{(ANSWERS / answer).read_text()}```\n") as server:
        code = main(["generate", "--problem", problem, "--rounds", "1", "--provider", "openai", "--model", "gpt-test",
                     "--base-url", server.url + "/v1", "--root", str(root), "--device", "cpu", "--seed", "3",
                     "--timeout", "120"])
    assert code == 0, capsys.readouterr().err[-3000:]
    key = f"kernelbench/other/{Path(problem).stem}"
    lifecycle.set_status(root / "generated_kernels" / key, "approved")
    return key


def compiled_beside_eager(root: Path, built: str) -> dict:
    """In a fresh process (enabling is process-wide): the model that the lines ``built`` make
    (``model`` and ``tokens``; ``build_model`` and ``build_program`` at hand) run eagerly, then
    compiled with bbagent enabled on ``root``'s kernels on the CPU; the compiled calls, each region
    answer's state and whether the outputs are eager's."""
    script = ("import json, sys, torch, bbagent\n"
              "from bbagent.agent.models import build_model, build_program\n" + built +
              "with torch.no_grad():\n"
              "    eager = model(tokens)\n"
              "    enabled = bbagent.enable(sys.argv[1], device='cpu')\n"
              "    compiled = torch.compile(model)(tokens)\n"
              "print(json.dumps({'calls': enabled.compiled_calls(), 'regions': enabled.regions(),\n"
              "                  'close': bool(torch.allclose(compiled, eager, atol=1e-4, rtol=1e-4))}))\n")
    done = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": PYTHONPATH, "PATH": "/usr/bin:/bin", "HOME": str(root),
                               "TRITON_INTERPRET": "1"})  # transformers imports triton before bbagent is enabled
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_regions_floor_is_its_bytes_or_its_flops_whichever_is_longer():
    """``floor_us``: a gated MLP's three products (2 x M x N x K each, plus its SiLU and multiply
    per element) over the matmul throughput; without one for its dtype, its inputs and output
    moved once over the copy bandwidth."""
    from bbagent.harness.timing.program_floor import floor_us

    class GatedMLP(torch.nn.Module):
        def forward(self, x, gate, up, down):
            return (torch.nn.functional.silu(x @ gate) * (x @ up)) @ down
    inputs = torch.randn(64, 32), torch.randn(32, 48), torch.randn(32, 48), torch.randn(48, 32)
    flops = 3 * 2 * 64 * 32 * 48 + 64 * 48 * (4 + 1)  # silu, then the multiply
    assert floor_us(GatedMLP(), inputs, 1000.0, {"float32": 1.0}) == pytest.approx(flops / 1e6)
    moved = 4 * (64 * 32 + 2 * 32 * 48 + 48 * 32 + 64 * 32)
    assert floor_us(GatedMLP(), inputs, 1000.0, {"bfloat16": 1.0}) == pytest.approx(moved / 1e6)
