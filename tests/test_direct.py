"""Approved kernels that inductor's own code launches (``agent.serving.direct``), on the CPU: the
graphs torch.compile hands inductor (traced as its AOT step traces them, with its decompositions,
on fake tensors) hold the judged file's Triton kernel as torch's Triton kernel node, not an
aten call or a custom-op call; a call the rule cannot take stays aten's and says why; training
graphs keep the kernel in the forward; a region answer made of launches is traced into the
region's place, and one that calls torch's compute keeps its opaque call. Each scenario runs in a
fresh process with compiling Triton (``@triton.jit`` functions are what torch traces; the
interpreter's are not), where the kernels are never launched. ``tests/test_gpu.py`` checks on a GPU
that inductor's generated code launches them and computes what eager computes."""
from pathlib import Path

from test_enable import in_fresh_process

KERNELS = Path(__file__).parent / "kernels"
ANSWERS = Path(__file__).parent / "problems" / "answers"

TRACE = '''
import json, logging, sys, torch
logging.disable(logging.WARNING)  # without a GPU torch cannot read which pointers a kernel writes, and says so
from torch._functorch.aot_autograd import aot_function
from torch._inductor.decomposition import select_decomp_table
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
FAKE = FakeTensorMode(allow_non_fake_inputs=True)

def graphs_of(function, *shapes_and_dtypes, grad=False):
    """The forward (and backward) graphs inductor would receive for one call, on fake tensors (of the
    CPU: a CPU build fakes CUDA tensors for some operators only; the rule is the same on either)."""
    graphs = []
    def capture(gm, _):
        graphs.append(gm)
        return gm
    with FAKE:
        args = [torch.empty(shape, dtype=dtype, requires_grad=grad) for shape, dtype in shapes_and_dtypes]
        out = aot_function(function, fw_compiler=capture, bw_compiler=capture, decompositions=select_decomp_table())(*args)
        if grad:
            out.sum().backward()
    return graphs

def calls(gm):
    """Each call of the graph: an aten overload's name, or the Triton kernel a kernel node launches and its file."""
    out = []
    for node in getattr(gm, "graph", gm).nodes:
        if node.op != "call_function":
            continue
        if "triton_kernel_wrapper" in str(node.target):
            fn = kernel_side_table.get_kernel(node.kwargs["kernel_idx"])
            while not hasattr(fn, "__code__"):  # a JITFunction, under any autotuner torch put around it
                fn = fn.fn
            out.append(f"triton:{fn.__name__}@{fn.__code__.co_filename}")
        else:
            out.append(str(node.target))
    return out
'''


def test_a_served_overload_reaches_inductor_as_its_kernels_launch_and_the_rest_stays_aten(tmp_path):
    """relu and relu_ served direct: each call in the graph is the judged file's ``_relu`` kernel
    node, no aten relu and no ``bbagent_served`` call; float16, which the kernel was not tested on,
    stays aten's (counted, with why); a wrapper that reads a pointer on the host is traced nowhere
    and says why; in training the forward launches the kernel and the backward is autograd's; after
    uninstall the graph is inductor's own again."""
    relu = KERNELS / "relu_triton.py"
    reads_pointer = tmp_path / "relu_reads_pointer.py"
    reads_pointer.write_text(relu.read_text().replace("    x = self.contiguous()\n",
                                                      "    self.data_ptr()\n    x = self.contiguous()\n"))
    result = in_fresh_process(TRACE + f'''
from bbagent.agent.serving.direct import DirectKernel, DirectServing
from bbagent.agent.serving.load import import_kernel
from bbagent.harness.interface import resolve_op, serving
RELU, RELU_ = resolve_op("aten.relu.default"), resolve_op("aten.relu_.default")
def direct(path):
    kernel = import_kernel(path, "k" + str(abs(hash(path))))
    return DirectServing([DirectKernel(name, op, serving(kernel, RELU, op, traced=True), frozenset({{torch.float32}}), "cpu")
                          for name, op in (("aten.relu.default", RELU), ("aten.relu_.default", RELU_))])
# the relus take intermediates: without a GPU torch cannot tell which pointers a kernel writes, takes it
# that it writes every one, and would write a graph input back after the call
model = lambda x, h: (torch.relu(x * 1) * 2).relu_() + torch.relu(h * 1).float()
shapes = (((64, 32), torch.float32), ((64, 32), torch.float16))
served = direct({str(relu)!r})
served.install()
inference = calls(graphs_of(model, *shapes)[0])
said = served.under_compile("aten.relu.default")
training = [calls(g) for g in graphs_of(lambda x: torch.relu(x * 1) * 3, ((16,), torch.float32), grad=True)]
sites = {{k.op: k.sites for k in served.kernels.values()}}
served.uninstall()
after = calls(graphs_of(model, *shapes)[0])
pointer = direct({str(reads_pointer)!r})
pointer.install()
untraced = calls(graphs_of(model, *shapes)[0])
pointer_said = pointer.under_compile("aten.relu.default")
pointer.uninstall()
print(json.dumps({{"inference": inference, "sites": sites, "said": said, "training": training, "after": after,
                  "untraced": untraced, "pointer_said": pointer_said}}))
''', tmp_path, interpret=False)
    launch = f"triton:_relu@{relu}"
    assert result["inference"].count(launch) == 2, result["inference"]  # relu, then relu_ on its result
    assert result["inference"].count("aten.relu.default") == 1, result["inference"]  # the float16 call
    assert not any("bbagent_served" in call for call in result["inference"])
    assert result["sites"] == {"aten.relu.default": 2, "aten.relu_.default": 1}  # the training graph's relu too
    assert result["said"] == "launched by inductor's code; an opaque call where dtype float16 not tested (1x)"
    forward, backward = result["training"]
    assert launch in forward and "aten.relu.default" not in forward
    assert "aten.where.self" in backward and launch not in backward  # threshold_backward, decomposed
    assert launch not in result["after"] and result["after"].count("aten.relu.default") == 3
    assert "aten.relu_.default" not in result["after"]  # functionalized as always
    assert not any(call.startswith("triton:") for call in result["untraced"])
    assert result["pointer_said"].startswith("served as an opaque call: its wrapper cannot be traced (RuntimeError: "
                                             "Cannot access data pointer"), result["pointer_said"]


def test_a_region_answer_of_launches_takes_the_regions_place_and_one_calling_torch_keeps_its_call(tmp_path):
    """The softmax region of a small model: its answer (one Triton kernel per row) is traced into
    the graph in the region's place, the graph stays whole and the region's own nodes are gone; the
    addmm + GELU answer calls ``torch.addmm``, so its region becomes one call of its opaque twin,
    with why."""
    result = in_fresh_process(TRACE + f'''
import importlib.util
from pathlib import Path
from bbagent.agent.regions.extract import inductor_graphs
from bbagent.agent.regions.spanning import find_regions
from bbagent.agent.regions.program import region_program
from bbagent.agent.serving.compiled import CompiledServing, RegionAnswer, SwapPass
from bbagent.harness.interface import ProgramProblem, program_module

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x)).softmax(dim=-1)

def answer(name):
    spec = importlib.util.spec_from_file_location(name, {str(ANSWERS)!r} + "/" + name + ".py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ModelNew

torch.manual_seed(0)
model, x = Model().eval(), torch.randn(8, 16, 16)
graph = inductor_graphs(model, (x,))[0]
answers = {{}}
for region in find_regions([graph]):
    path = Path(sys.argv[1]) / ("region_" + region.hash + ".py")
    path.write_text(region_program(region, "Model"))
    name = "region_softmax_right" if region.kind == "reduction + pointwise" else "region_addmm_gelu_right"
    answers[region.hash] = RegionAnswer(key=name, hash=region.hash, model_new=answer(name),
                                        problem=program_module(ProgramProblem(path=str(path), text=path.read_text())))
serving = CompiledServing({{}}, answers, inline_regions=True)
serving.install()
from torch._inductor import config
fp64_while_served = config._use_fp64_for_unbacked_floats  # region answers' floats reach them as Triton passes them
before = calls(graph)
SwapPass({{}}, None, serving.region_twins, serving)(graph)
graph.lint()
statuses = {{key: serving.region_status(key) for key in serving.region_keys.values()}}
serving.uninstall()
print(json.dumps({{"before": before, "after": calls(graph), "inlined": dict(serving.inlined), "calls": statuses,
                  "fp64": [fp64_while_served, config._use_fp64_for_unbacked_floats]}}))
''', tmp_path, interpret=False)
    softmax = f"triton:softmax_rows@{ANSWERS / 'region_softmax_right.py'}"
    assert "aten.amax.default" in result["before"] and softmax not in result["before"]
    after = result["after"]
    assert after.count(softmax) == 1 and "aten.amax.default" not in after and "aten.exp.default" not in after
    assert result["inlined"] == {"region_softmax_right": 1}
    assert result["fp64"] == [False, True]
    assert result["calls"]["region_softmax_right"] == "launched by inductor's code"
    assert any("bbagent_served.region_" in call for call in after)  # the GELU region: its twin's call
    assert result["calls"]["region_addmm_gelu_right"] == ("served as an opaque call: its forward calls torch's "
                                                          "compute (aten.addmm.default) (1x)")


DEFAULTED = '''
import triton
import triton.language as tl


@triton.jit
def scaled(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FACTOR: tl.constexpr = 3):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=i < n) * FACTOR, mask=i < n)


tuned = triton.autotune([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])(scaled)
'''


def test_a_traced_launch_passes_the_defaults_it_leaves_out(tmp_path):
    """A launch that leaves a ``tl.constexpr`` to its default (``GROUP_M: tl.constexpr = 8``), of a
    plain kernel or under an autotuner, reaches the traced graph with that default as an argument
    (torch's traced launch drops it, and inductor then compiled the kernel with None, failing the
    user's model: the gated MLP answer on an H200); what a config sets or the call gives is left
    alone."""
    (tmp_path / "defaulted.py").write_text(DEFAULTED)
    result = in_fresh_process(TRACE + '''
sys.path.insert(0, sys.argv[1])
import triton
from torch.fx.experimental.proxy_tensor import make_fx
from bbagent.agent.serving.direct import launches_traced
from defaulted import scaled, tuned

def arguments(launch):
    def function(x):
        out = torch.empty_like(x)
        with launches_traced():
            launch(x, out)
        return out
    graph = make_fx(function, tracing_mode="fake")(torch.randn(40))
    node = next(n for n in graph.graph.nodes if "triton_kernel_wrapper" in str(n.target))
    given = {**node.kwargs["kwargs"], **kernel_side_table.get_constant_args(node.kwargs["constant_args_idx"])}
    return {k: v for k, v in given.items() if k in ("BLOCK", "FACTOR")}

print(json.dumps({
    "plain": arguments(lambda x, out: scaled[(3,)](x, out, 40, BLOCK=16)),
    "tuned": arguments(lambda x, out: tuned[lambda m: (triton.cdiv(40, m["BLOCK"]),)](x, out, 40)),
    "given": arguments(lambda x, out: tuned[lambda m: (triton.cdiv(40, m["BLOCK"]),)](x, out, 40, FACTOR=5)),
    "positional": arguments(lambda x, out: scaled[(3,)](x, out, 40, 16, 7))}))
''', tmp_path, interpret=False)
    assert result["plain"] == {"BLOCK": 16, "FACTOR": 3}
    assert result["tuned"] == {"FACTOR": 3}  # BLOCK is the config's
    assert result["given"] == {"FACTOR": 5} and result["positional"] == {"BLOCK": 16, "FACTOR": 7}


def test_a_launch_through_run_as_helions_is_recorded_once_with_its_options(tmp_path):
    """Helion's launcher calls ``kernel.run(*args, grid=, warmup=False, num_warps=, num_stages=,
    launch_cooperative_grid=False)``: traced, it is one kernel node, with the defaults it leaves out
    and the warps and stages as the config torch puts around the kernel; Triton's launch options at
    their defaults are dropped, and one torch cannot take (``maxnreg``) makes the call untraceable, so
    it keeps its opaque path. ``kernel[grid]`` calls ``run`` itself, and is still counted once."""
    (tmp_path / "defaulted.py").write_text(DEFAULTED)
    result = in_fresh_process(TRACE + '''
sys.path.insert(0, sys.argv[1])
from torch.fx.experimental.proxy_tensor import make_fx
from bbagent.agent.serving.direct import launches_traced
from defaulted import scaled

def traced(launch):
    seen = {}
    def function(x):
        out = torch.empty_like(x)
        with launches_traced() as counted:
            launch(x, out)
        seen["launches"] = counted.launches
        return out
    try:
        graph = make_fx(function, tracing_mode="fake")(torch.randn(40))
    except ValueError as exc:
        return {"refused": str(exc)}
    nodes = [n for n in graph.graph.nodes if "triton_kernel_wrapper" in str(n.target)]
    kernel = kernel_side_table.get_kernel(nodes[0].kwargs["kernel_idx"])
    given = {**nodes[0].kwargs["kwargs"], **kernel_side_table.get_constant_args(nodes[0].kwargs["constant_args_idx"])}
    return {"nodes": len(nodes), "launches": seen["launches"], "warps": [c.num_warps for c in getattr(kernel, "configs", [])],
            "given": {k: v for k, v in given.items() if k in ("BLOCK", "FACTOR")}}

print(json.dumps({
    "run": traced(lambda x, out: scaled.run(x, out, 40, 16, grid=(3,), warmup=False, num_warps=2, num_stages=1,
                                             launch_cooperative_grid=False)),
    "maxnreg": traced(lambda x, out: scaled.run(x, out, 40, 16, grid=(3,), warmup=False, maxnreg=32)),
    "getitem": traced(lambda x, out: scaled[(3,)](x, out, 40, BLOCK=16))}))
''', tmp_path, interpret=False)
    assert result["run"] == {"nodes": 1, "launches": 1, "warps": [2], "given": {"BLOCK": 16, "FACTOR": 3}}, result
    assert result["getitem"] == {"nodes": 1, "launches": 1, "warps": [], "given": {"BLOCK": 16, "FACTOR": 3}}, result
    assert result["maxnreg"] == {"refused": "the launch option maxnreg=32 cannot be traced"}, result


def test_every_region_of_a_llama_served_at_once_keeps_the_graph_valid(tmp_path):
    """Answers to every region across matrix products of the tiny Llama served together (opaque
    twins): each swap's call finds its inputs defined (a norm + q, k, v region's first node is the
    norm, and the views of the k and v weights stood after it: the call was put before them), the
    graph lints, overlapping regions are swapped once, and the graph is searched again only where a
    swap replaced a later region's input."""
    result = in_fresh_process(TRACE + f'''
from pathlib import Path
from bbagent.agent.models import build_program
from bbagent.agent.regions import spanning
from bbagent.agent.regions.extract import inductor_graphs
from bbagent.agent.regions.program import region_program
from bbagent.agent.serving.compiled import CompiledServing, RegionAnswer, SwapPass
from bbagent.harness.interface import ProgramProblem, program_module

model, inputs = build_program({str(Path(__file__).parent / "models" / "tiny_llama.py")!r}, "cpu", torch.float32)
graph = inductor_graphs(model, inputs)[0]
answers = {{}}
for match in spanning.candidates(graph):
    if match.region.kind in ("gated MLP", "attention", "norm + matmul") and match.region.hash not in answers:
        path = Path(sys.argv[1]) / ("region_" + match.region.hash + ".py")
        path.write_text(region_program(match.region, "Model"))
        answers[match.region.hash] = RegionAnswer(key=match.region.hash, hash=match.region.hash,
                                                  model_new=torch.nn.Identity,
                                                  problem=program_module(ProgramProblem(path=str(path), text=path.read_text())))
searches, found = [], spanning.candidates
spanning.candidates = lambda g: searches.append(1) or found(g)
serving = CompiledServing({{}}, answers)
SwapPass({{}}, None, serving.region_twins, serving)(graph)
graph.lint()
swapped = [str(node.target).split(".")[1] for node in graph.nodes if "bbagent_served" in str(node.target)]
print(json.dumps({{"answers": len(answers), "swapped": sorted(swapped), "searches": len(searches)}}))
serving.uninstall()
''', tmp_path, interpret=False)
    per_layer = [name for name in set(result["swapped"]) if result["swapped"].count(name) == 2]  # each layer's
    assert result["answers"] == 5 and len(per_layer) >= 3 and len(result["swapped"]) >= 7, result  # + the LM head's
    assert result["searches"] < len(result["swapped"]), result


def test_a_helion_kernel_reaches_inductor_as_its_triton_kernels_launch(tmp_path):
    """Helion's host code launches its Triton kernel through ``JITFunction.run``, not ``kernel[grid]``:
    the served Helion relu's call is traced into the graph as that kernel's node (its output's
    allocation, the reshapes of its host code, the launch), with no aten relu left; under dynamic
    shapes Helion cannot bind on the trace's symbolic sizes, so the call keeps its opaque path, with
    why (never a graph without the launch)."""
    helion_relu = KERNELS / "relu_helion.py"
    result = in_fresh_process(TRACE + f'''
from torch._dynamo.backends.common import aot_autograd
from bbagent.agent.serving.direct import DirectKernel, DirectServing
from bbagent.agent.serving.load import import_kernel
from bbagent.harness.interface import resolve_op, serving
RELU = resolve_op("aten.relu.default")
kernel = import_kernel({str(helion_relu)!r}, "helion_relu")
def served():
    direct = DirectServing([DirectKernel("aten.relu.default", RELU, serving(kernel, RELU, RELU, traced=True),
                                         frozenset({{torch.float32}}), "cpu")])
    direct.install()
    return direct
model = lambda x: torch.relu(x * 1) * 2
static = served()
graph = calls(graphs_of(model, ((64, 32), torch.float32))[0])
said = static.under_compile("aten.relu.default")
static.uninstall()
dynamic, captured = served(), []
def capture(gm, _):
    captured.append(calls(gm))
    raise RuntimeError("captured")  # the graph is what is asked; without a GPU it could not run
try:
    torch.compile(model, backend=aot_autograd(fw_compiler=capture), dynamic=True)(torch.randn(64, 32))
except Exception as exc:
    assert "captured" in str(exc), exc
dynamic.uninstall()
print(json.dumps({{"graph": graph, "said": said, "dynamic": captured[0],
                  "dynamic_said": dynamic.under_compile("aten.relu.default")}}))
''', tmp_path, interpret=False)
    launches = [call for call in result["graph"] if call.startswith("triton:")]
    assert len(launches) == 1 and launches[0].startswith("triton:_helion__relu@"), result
    assert "aten.relu.default" not in result["graph"] and result["said"] == "launched by inductor's code", result
    assert "aten.relu.default" in result["dynamic"] and not any(c.startswith("triton:") for c in result["dynamic"])
    assert result["dynamic_said"].startswith("served as an opaque call: under dynamic shapes its wrapper cannot be "
                                             "traced"), result
