"""``bbagent.enable()`` / ``disable()`` on the CPU: approved interpreter kernels change what
``torch.relu`` runs (the call counter proves it) and disable restores aten; the re-entrancy
guard, the dtype and exception fallbacks and the speed gate. Each scenario runs in a fresh
process with ``TRITON_INTERPRET=1`` (registrations are process-wide)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bbagent.agent.review import lifecycle
from conftest import PYTHONPATH, speed_summary
from tests.test_review import install, run_meta

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"
RELU = "aten.relu.default"
FAMILY = [RELU, "aten.relu_.default", "aten.relu.out"]


def in_fresh_process(script: str, root: Path, interpret: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=PYTHONPATH, **({"TRITON_INTERPRET": "1"} if interpret else {}))
    done = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, cwd=root,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Overriding a previously registered kernel" not in done.stderr   # the override is the point: no warning
    return json.loads(done.stdout.strip().splitlines()[-1])


def accepted(root: Path, source: str, approve: bool = True, **extra) -> Path:
    install(root, RELU, source, run_meta(RELU, "run-1", serves=FAMILY, dtypes=["float32"], **extra))
    folder = root / "generated_kernels" / RELU
    if approve:
        lifecycle.set_status(folder, "approved")
    return folder


def test_enable_serves_torch_relu_from_the_approved_kernel_and_disable_restores_aten(tmp_path):
    accepted(tmp_path, (KERNELS / "relu_triton.py").read_text())
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        "x = torch.randn(1000)\n"
        "enabled = bbagent.enable(sys.argv[1], device='cpu', include_slower=True)\n"
        "y = torch.relu(x); z = torch.nn.functional.relu(x)\n"
        "during = enabled.calls()\n"
        "served = sorted(enabled.served)\n"
        "counts = bbagent.disable()\n"
        "torch.relu(x)\n"
        "print(json.dumps({'during': during, 'after': enabled.calls(), 'served': served, 'final': counts,\n"
        "                  'correct': bool(torch.equal(y, x.clamp_min(0))), 'active': enabled.active,\n"
        "                  'kernel_type': type(enabled.library).__name__}))\n", tmp_path)
    assert result["served"] == sorted(FAMILY)
    assert result["during"][RELU] == 2 and result["correct"]
    assert result["after"][RELU] == 2 and result["final"][RELU] == 2      # aten again after disable
    assert result["active"] is False


def test_unreviewed_and_slower_overloads_are_left_to_aten_unless_asked(tmp_path):
    """On the CPU (the interpreter: nothing is timed) an approved kernel serves every overload it
    has; on a GPU only those measured at least as fast as eager, and each one left to aten is said
    once on stderr, with the option that serves it anyway."""
    accepted(tmp_path, (KERNELS / "relu_triton.py").read_text(), approve=False,
             performance={"measured": True, "summary": speed_summary(0.8)},
             overload_speedups={"aten.relu_.default": {"geomean_speedup": 0.62}})
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        "first = bbagent.enable(sys.argv[1], device='cpu'); a = (sorted(first.served), first.skipped)\n"
        "bbagent.disable()\n"
        "with bbagent.enable(sys.argv[1], device='cpu', include_unreviewed=True) as second:\n"
        "    torch.relu(torch.randn(8)); b = (sorted(second.served), second.skipped, second.calls())\n"
        "print(json.dumps({'default': a, 'unreviewed': b}))\n", tmp_path)
    served, skipped = result["default"]
    assert served == [] and "no approved, non-stale version (v1 needs_review)" in skipped[RELU]
    served, skipped, calls = result["unreviewed"]
    assert served == sorted(FAMILY) and calls[RELU] == 1 and skipped == {}
    script = ("import json, sys, bbagent\n"
              "for _ in range(2):\n"  # enabled twice: said once
              "    with bbagent.enable(sys.argv[1], device='cuda', include_unreviewed=True) as gpu:\n"
              "        a = (sorted(gpu.served), gpu.skipped, sorted(gpu.slower))\n"
              "print(json.dumps(a))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env={**env, "PYTHONPATH": PYTHONPATH}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    served, skipped, slower = json.loads(done.stdout.strip().splitlines()[-1])
    assert served == [] and slower == sorted(FAMILY)  # nothing registered: no CUDA kernel needed here
    assert skipped[RELU].startswith("measured 0.8x eager")
    assert skipped["aten.relu_.default"].startswith("measured 0.62x eager")
    assert skipped["aten.relu.out"].startswith("not timed as served")
    said = [line for line in done.stderr.splitlines() if "is not served" in line]
    assert len(said) == 3 and all(line.endswith("include_slower=True serves it anyway") for line in said)


def test_a_kernel_calling_its_own_op_gets_the_original_and_odd_inputs_fall_back(tmp_path):
    """The kernel calls torch.relu itself: without the guard this recursed until the stack ran out.
    A float64 input (only float32 was tested) and an input the kernel raises on go to aten."""
    accepted(tmp_path, "import torch\n\n"
                       "def kernel(self):\n"
                       "    if self.dim() == 0:\n"
                       "        raise NotImplementedError('scalars')\n"
                       "    return torch.relu(self) + 0.0\n")
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        "with bbagent.enable(sys.argv[1], device='cpu', include_slower=True) as enabled:\n"
        "    x = torch.randn(64)\n"
        "    ok = bool(torch.equal(torch.relu(x), x.clamp_min(0)))\n"
        "    torch.relu(x.double()); torch.relu(torch.tensor(-1.0))\n"
        "    row = next(r for r in enabled.report() if r['op'] == 'aten.relu.default')\n"
        "print(json.dumps({'ok': ok, 'row': row}))\n", tmp_path)
    assert result["ok"]
    assert result["row"]["calls"] == 1
    assert result["row"]["fallbacks"] == {"re-entered: the kernel called its own overload": 1,
                                          "dtype float64 not tested": 1,
                                          "kernel raised NotImplementedError: scalars": 1}


def test_the_fallback_takes_python_numbers_where_aten_wants_a_tensor(tmp_path):
    """``x + 0.5`` reaches a Python kernel with 0.5 as a float; aten's boxed kernel needs a Tensor
    there, with a wrapped number's promotion (an int tensor plus 0.5 is float32, not float64)."""
    add = "aten.add.Tensor"
    install(tmp_path, add, "def kernel(self, other, alpha=1):\n    raise NotImplementedError\n",
            run_meta(add, "run-1", serves=[add]))
    lifecycle.set_status(tmp_path / "generated_kernels" / add, "approved")
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        "with bbagent.enable(sys.argv[1], device='cpu', include_slower=True) as enabled:\n"
        "    a = torch.arange(4) + 0.5\n"
        "    b = torch.ones(3, dtype=torch.float16) + 2\n"
        "    row = enabled.report()[0]\n"
        "print(json.dumps({'a': [str(a.dtype), a.tolist()], 'b': str(b.dtype), 'row': row}))\n", tmp_path)
    assert result["a"] == ["torch.float32", [0.5, 1.5, 2.5, 3.5]] and result["b"] == "torch.float16"
    assert result["row"]["fallbacks"] == {"kernel raised NotImplementedError": 2}


def test_one_kernel_that_cannot_import_is_left_to_aten_alone_and_a_second_enable_is_refused(tmp_path):
    accepted(tmp_path, (KERNELS / "relu_triton.py").read_text())
    install(tmp_path, "aten.exp.default", "def kernel(self:\n", run_meta("aten.exp.default", "run-2"))
    lifecycle.set_status(tmp_path / "generated_kernels" / "aten.exp.default", "approved")
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        "enabled = bbagent.enable(sys.argv[1], device='cpu', include_slower=True)\n"
        "torch.relu(torch.randn(8))\n"
        "try:\n"
        "    bbagent.enable(sys.argv[1], device='cpu')\n"
        "    twice = ''\n"
        "except bbagent.UsageError as exc:\n"
        "    twice = str(exc)\n"
        "print(json.dumps({'calls': enabled.calls(), 'skipped': enabled.skipped, 'twice': twice}))\n", tmp_path)
    assert result["calls"][RELU] == 1                                  # the others are served
    assert "aten.exp.default/kernel.py cannot be imported: SyntaxError" in result["skipped"]["aten.exp.default"]
    assert "already enabled: call bbagent.disable() first" in result["twice"]


def test_a_kernel_edited_after_approval_is_refused_by_enable_and_load_until_approved_again(tmp_path, capsys):
    from bbagent.cli import main
    folder = accepted(tmp_path, (KERNELS / "relu_triton.py").read_text())
    identity = "def kernel(self):\n    return self\n"
    (folder / "kernel.py").write_text(identity)  # the file a reviewer never read
    script = ("import json, sys, torch, bbagent\n"
              "enabled = bbagent.enable(sys.argv[1], device='cpu', include_slower=True)\n"
              "y = torch.relu(torch.tensor([-1., 2.])).tolist()\n"
              "bbagent.disable()\n"
              "try:\n"
              "    bbagent.load('aten.relu.default', sys.argv[1], device='cpu'); loaded = ''\n"
              "except bbagent.UsageError as exc:\n"
              "    loaded = str(exc)\n"
              "print(json.dumps({'y': y, 'skipped': enabled.skipped, 'loaded': loaded}))\n")
    result = in_fresh_process(script, tmp_path)
    assert result["y"] == [0.0, 2.0]                                     # aten's relu, not the edited file
    for why in (result["skipped"][RELU], result["loaded"]):
        assert f"{folder / 'kernel.py'} was modified since its approval" in why and "review it again" in why
    assert main(["review", "list", "--root", str(tmp_path), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["status"] == "modified" and "modified since its approval" in row["flags"][0]
    assert row["served_version"] is None
    assert main(["review", "approve", RELU, "--root", str(tmp_path)]) == 0  # read again: pinned anew
    assert in_fresh_process(script, tmp_path)["y"] == [-1.0, 2.0]           # the approved identity is served


@pytest.mark.parametrize("device", ["tpu"])
def test_enable_rejects_an_unknown_device(device):
    import bbagent
    with pytest.raises(bbagent.UsageError, match="device must be one of cuda, cpu"):
        bbagent.enable(device=device)


def test_load_and_enable_run_cpu_kernels_under_the_interpreter_without_triton_interpret_set(tmp_path):
    """A fresh interpreter with TRITON_INTERPRET unset: ``load()`` and ``enable(device="cpu")`` run
    the Triton kernels interpreted, an autotuned one included; where triton was imported first (to
    compile), loading a CPU kernel is refused at once, naming the fix."""
    accepted(tmp_path, (KERNELS / "relu_triton.py").read_text())
    mm = "aten.mm.default"
    install(tmp_path, mm, (KERNELS / "mm_autotuned.py").read_text(), run_meta(mm, "run-2", serves=[mm]))
    result = in_fresh_process(
        "import json, os, sys, torch, bbagent\n"
        "assert 'TRITON_INTERPRET' not in os.environ\n"
        "x = torch.randn(1000)\n"
        "relu = bbagent.load('aten.relu.default', sys.argv[1])\n"
        "a, b = torch.randn(33, 17), torch.randn(17, 9)\n"
        "mm = bbagent.load('aten.mm.default', sys.argv[1], device='cpu')\n"
        "with bbagent.enable(sys.argv[1], device='cpu', include_slower=True) as enabled:\n"
        "    y = torch.relu(x)\n"
        "    wrong = torch.relu(torch.randn(3, dtype=torch.float64))\n"
        "    calls, rows = enabled.calls(), enabled.report()\n"
        "print(json.dumps({'load': bool(torch.equal(relu(x), x.clamp_min(0))),\n"
        "                  'mm': bool(torch.allclose(mm(a, b), a @ b, atol=1e-4)),\n"
        "                  'enabled': bool(torch.equal(y, x.clamp_min(0))), 'calls': calls, 'rows': rows,\n"
        "                  'interpret_after': os.environ.get('TRITON_INTERPRET')}))\n", tmp_path, interpret=False)
    assert result["load"] and result["mm"] and result["enabled"], result
    assert result["calls"][RELU] == 1 and result["interpret_after"] == "1"
    assert result["rows"][0]["fallbacks"] == {"dtype float64 not tested": 1}
    refused = in_fresh_process(
        "import json, sys, triton, bbagent\n"
        "try:\n"
        "    bbagent.load('aten.relu.default', sys.argv[1], device='cpu')\n"
        "except bbagent.UsageError as exc:\n"
        "    print(json.dumps({'error': str(exc)}))\n", tmp_path, interpret=False)
    assert "set TRITON_INTERPRET=1 before Python starts" in refused["error"]


def test_a_kernel_that_raises_falls_back_with_its_own_message(tmp_path):
    accepted(tmp_path, "def kernel(self):\n    raise ValueError('rank 3 is not supported')\n")
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        "with bbagent.enable(sys.argv[1], device='cpu', include_slower=True) as enabled:\n"
        "    torch.relu(torch.randn(2, 2, 2))\n"
        "    row = enabled.report()[0]\n"
        "print(json.dumps(row))\n", tmp_path, interpret=False)
    assert result["fallbacks"] == {"kernel raised ValueError: rank 3 is not supported": 1}


def test_a_result_that_is_not_a_plain_tensor_is_refused_as_served_and_as_loaded(tmp_path):
    """The lazy-subclass cheat (relu computed whenever the result is used) and a Parameter wrapper,
    approved by mistake: ``enable()`` serves aten's result instead and says why, ``load()`` raises;
    an in-place overload still returns the caller's own tensor, whatever its class."""
    accepted(tmp_path, (KERNELS / "relu_lazy_subclass.py").read_text())
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        "from bbagent.harness.plain import NotPlainTensor\n"
        "x = torch.randn(64)\n"
        "weight = torch.nn.Parameter(torch.randn(8), requires_grad=False)\n"
        "with bbagent.enable(sys.argv[1], device='cpu', include_slower=True) as enabled:\n"
        "    y = torch.relu(x)\n"
        "    kept = torch.relu_(weight) is weight\n"
        "    row = next(r for r in enabled.report() if r['op'] == 'aten.relu.default')\n"
        "try:\n"
        "    bbagent.load('aten.relu.default', sys.argv[1], device='cpu')(x)\n"
        "    loaded = 'served'\n"
        "except NotPlainTensor as exc:\n"
        "    loaded = str(exc)\n"
        "print(json.dumps({'plain': type(y) is torch.Tensor, 'right': bool(torch.equal(y, x.clamp_min(0))),\n"
        "                  'kept': kept, 'row': row, 'loaded': loaded}))\n", tmp_path)
    assert result["plain"] and result["right"] and result["kept"]
    assert result["row"]["calls"] == 0
    [reason] = result["row"]["fallbacks"]
    assert reason.startswith("kernel raised NotPlainTensor: the result is a bbagent_kernel_")
    assert "subclass of torch.Tensor" in result["loaded"]


def test_evaluate_then_enable_in_one_process(tmp_path):
    """Issue 47 (point 3): bbagent.evaluate imported Triton into the caller's process (for the suite
    cache's key), so a later enable(device='cpu') refused: "set TRITON_INTERPRET=1 before Python
    starts". Nothing in the evaluation path imports Triton here now, and the sequence works as the
    README's Python API shows it, with no variable set beforehand."""
    accepted(tmp_path, (KERNELS / "relu_triton.py").read_text())
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        f"verdict = bbagent.evaluate('{RELU}', '{KERNELS / 'relu_triton.py'}', device='cpu')\n"
        "imported = 'triton' in sys.modules\n"
        "with bbagent.enable(sys.argv[1], device='cpu') as enabled:\n"
        "    torch.relu(torch.randn(8))\n"
        "    calls = enabled.calls()\n"
        "print(json.dumps({'passed': verdict.passed, 'imported': imported, 'calls': calls}))\n",
        tmp_path, interpret=False)
    assert result == {"passed": True, "imported": False, "calls": {**dict.fromkeys(FAMILY, 0), RELU: 1}}


@pytest.mark.slow
def test_compiled_code_calls_the_served_kernels_while_enabled_and_inductors_own_after(tmp_path):
    """Inductor lowers aten itself: without a change to its graph a compiled model served nothing
    (an H200 showed it: one call in eager, none under torch.compile). While enabled, a served
    overload in the graph inductor receives becomes an opaque call that reaches the kernel; the
    in-place overload arrives functionalized; after disable, a new compile is inductor's alone."""
    accepted(tmp_path, (KERNELS / "relu_triton.py").read_text())
    result = in_fresh_process(
        "import json, sys, torch, bbagent\n"
        "from torch._inductor import config\n"
        "x = torch.randn(64, 32)\n"
        "enabled = bbagent.enable(sys.argv[1], device='cpu', include_slower=True)\n"
        "y = torch.compile(lambda t: torch.relu(t) * 2 + 1)(x)\n"
        "first = dict(enabled.compiled_calls())\n"
        "torch.manual_seed(0)\n"
        "block = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU())\n"
        "z = torch.compile(block)(x)\n"
        "w = torch.compile(lambda t: t.clone().relu_())(x)\n"
        "report = {row['op']: row for row in enabled.report()}\n"
        "compiled = dict(enabled.compiled_calls())\n"
        "bbagent.disable(); torch._dynamo.reset()\n"
        "calls_before = enabled.calls()['aten.relu.default']\n"
        "again = torch.compile(lambda t: torch.relu(t) * 2 + 1)(x)\n"
        "print(json.dumps({'first': first, 'compiled': compiled, 'report': report,\n"
        "                  'correct': [bool(torch.equal(y, x.clamp_min(0) * 2 + 1)),\n"
        "                              bool(torch.allclose(z, block[0](x).clamp_min(0))),\n"
        "                              bool(torch.equal(w, x.clamp_min(0))), bool(torch.equal(again, y))],\n"
        "                  'after': enabled.calls()['aten.relu.default'] - calls_before,\n"
        "                  'pass_after': repr(config.post_grad_custom_pre_pass)}))\n", tmp_path)
    assert result["first"] == {RELU: 1} and result["compiled"] == {RELU: 3}, result
    assert result["correct"] == [True] * 4
    assert result["report"][RELU]["under_compile"] == "served" and result["report"][RELU]["compiled_calls"] == 3
    assert "functional overload" in result["report"]["aten.relu_.default"]["under_compile"]
    assert result["after"] == 0 and result["pass_after"] == "None"


def test_on_a_gpu_compiled_code_is_given_only_kernels_measured_faster_than_inductors(monkeypatch, tmp_path):
    from types import SimpleNamespace
    from bbagent.agent.review.meta import PerformanceRecord
    from bbagent.agent.serving import enable as serving
    kernel = tmp_path / "kernel.py"
    kernel.write_text((KERNELS / "relu_triton.py").read_text())

    def version(over, file=kernel):
        baselines = {"inductor": {"geomean_speedup": over}} if over is not None else {}
        return SimpleNamespace(kernel=file, meta=SimpleNamespace(
            written_for=RELU, dtypes=["float32"], kernel_sha256="f" * 64,
            performance=PerformanceRecord(measured=True, baselines=baselines)))
    served = {RELU: serving.ServedOverload(RELU, 1, "f", 1.2)}
    functions = {RELU: lambda x: x}
    for over, expected in ((1.3, None), (0.8, "measured 0.8x torch.compile"), (None, "not timed against torch.compile")):
        compiled, not_compiled = serving._under_compile(served, {RELU: version(over)}, "cuda", False, None, functions)
        try:
            assert (not_compiled.get(RELU) or "")[:len(expected or "")] == (expected or "")
            assert compiled.names == ([] if expected else [RELU])
            # on a GPU inductor's own code launches a served kernel (agent.serving.direct)
            assert compiled.under_compile(RELU) == (None if expected else "launched by inductor's code")
        finally:
            compiled.uninstall()
    from torch._inductor import config
    fp64 = config._use_fp64_for_unbacked_floats
    compiled, not_compiled = serving._under_compile(served, {RELU: version(0.8)}, "cuda", True, None, functions)
    direct_key = _pass_key()
    # a float argument of a launch traced in reaches the kernel as Triton passes it (fp32), not fp64
    assert config._use_fp64_for_unbacked_floats is False
    compiled.uninstall()
    assert config._use_fp64_for_unbacked_floats is fp64 is True
    assert not_compiled == {} and compiled.names == [RELU]
    opaque, _ = serving._under_compile(served, {RELU: version(0.8)}, "cuda", True, None, None)  # enable(direct=False)
    opaque_key = _pass_key()
    assert config._use_fp64_for_unbacked_floats is True  # nothing traced in: inductor's own typing
    opaque.uninstall()
    assert opaque.under_compile(RELU) == "served" and opaque_key != direct_key  # inductor's caches tell them apart
    # the direct path traces the file itself into the graph: another file, or Helion configs beside it, is another
    # graph, whatever the meta says (the same digest here) -- inductor's caches once gave one kernel's code to another
    other = tmp_path / "other" / "kernel.py"
    other.parent.mkdir()
    other.write_text(kernel.read_text() + "# another file\n")

    def key(file):
        compiled, _ = serving._under_compile(served, {RELU: version(0.8, file)}, "cuda", True, None, functions)
        try:
            return _pass_key()
        finally:
            compiled.uninstall()
    keys = [key(kernel), key(other)]
    other.with_name("helion_configs.json").write_text("{}")
    keys.append(key(other))
    assert keys[0] == direct_key and len(set(keys)) == 3, keys


def _pass_key() -> bytes:
    from torch._inductor import config
    return config.post_grad_custom_pre_pass.uuid()


@pytest.mark.slow
def test_an_operator_inductor_decomposes_stays_whole_for_its_served_twin(tmp_path):
    """Inductor decomposes gelu (into erf and mul) before its post-grad passes: while gelu is
    served it is kept out of inductor's decomposition table, so the compiled graph calls its twin
    (here aten's own gelu behind it), and the table is whole again after."""
    result = in_fresh_process(
        "import json, torch\n"
        "from torch._inductor import decomposition\n"
        "from bbagent.agent.serving.compiled import CompiledServing\n"
        "gelu = torch.ops.aten.gelu.default\n"
        "x = torch.randn(64, 32)\n"
        "serving = CompiledServing({'aten.gelu.default': gelu}); serving.install()\n"
        "during = gelu in decomposition.decompositions\n"
        "y = torch.compile(lambda t: torch.nn.functional.gelu(t) + 1)(x)\n"
        "calls = dict(serving.calls)\n"
        "serving.uninstall(); torch._dynamo.reset()\n"
        "print(json.dumps({'calls': calls, 'during': during, 'after': gelu in decomposition.decompositions,\n"
        "                  'correct': bool(torch.allclose(y, torch.nn.functional.gelu(x) + 1))}))\n", tmp_path)
    assert result == {"calls": {"aten.gelu.default": 1}, "during": False, "after": True, "correct": True}


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a CUDA device is visible: enable() defaults to it")
def test_enable_with_no_arguments_serves_on_a_machine_without_cuda(tmp_path):
    """Issue 64, 1: the README's ``bbagent.enable()`` on a CPU machine serves the approved kernels
    under the interpreter (the CPU is the default without a GPU), with no variable set before."""
    assert relu_served_with_no_device(tmp_path) == {"calls": {op: 1 if op == RELU else 0 for op in FAMILY},
                                                    "device": "CPU", "y": [0.0, 2.0]}


def relu_served_with_no_device(root: Path, tensor_device: str = "cpu", **enable) -> dict:
    """``bbagent.enable(**enable)`` with no device, in a fresh process in ``root`` holding an
    approved relu: the calls served, the dispatch key it picked, and relu of a ``tensor_device`` tensor."""
    accepted(root, (KERNELS / "relu_triton.py").read_text())
    return in_fresh_process(
        "import json, os, sys, torch, bbagent\n"
        "os.chdir(sys.argv[1])\n"
        f"enabled = bbagent.enable(**{enable!r})\n"
        f"y = torch.relu(torch.tensor([-1.0, 2.0], device={tensor_device!r}))\n"
        "print(json.dumps({'calls': enabled.calls(), 'device': enabled.dispatch_key, 'y': y.tolist()}))\n",
        root, interpret=False)


def test_the_serving_overhead_benchmark_runs_on_the_cpu(tmp_path):
    """benchmarks/enable_overhead.py (and benchmarks/compiled_launch.py, which builds its root the
    same way on the GPU) installs an approved kernel as a run accepts one and serves torch.relu from it."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "enable_overhead.py"), "--device", "cpu",
                           "--calls", "20", "--repeats", "1", "--numel", "16", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "triton relu kernel" in done.stdout and "Traceback" not in done.stderr
