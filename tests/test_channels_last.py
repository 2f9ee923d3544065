"""--channels-last: trace inputs with a contiguous 4-d or 5-d tensor run again in that layout, the
Verdict says which tests those were, a kernel that ignores strides fails them, and the prompt says
which layouts are tested and what aten returns for them."""

import pytest
import torch

from bbagent.harness.layouts import channels_last_call, channels_last_strides
from bbagent.harness.traces import parse_call_line


@pytest.mark.parametrize("shape, memory_format", [((2, 3, 4, 5), torch.channels_last),
                                                  ((2, 3, 4, 5, 6), torch.channels_last_3d),
                                                  ((1, 7, 1, 9), torch.channels_last)])
def test_strides_are_torchs_own(shape, memory_format):
    assert channels_last_strides(shape) == torch.empty(shape).to(memory_format=memory_format).stride()


def test_only_contiguous_4d_and_5d_tensors_with_channels_and_extent_change():
    call = parse_call_line("aten.convolution.default",
                           "cnt: 3, ((T([8, 64, 56, 56], f16), T([64, 64, 3, 3], f16), T([64], f16), [1, 1], "
                           "[1, 1], [1, 1], False, [0, 0], 1), {})")
    changed = channels_last_call(call)
    x, w, b = changed.tensor_specs()
    assert x.stride == (200704, 1, 3584, 64) and w.stride == (576, 1, 192, 64) and b.stride is None
    assert changed.count == 3 and changed.args[3:] == call.args[3:]
    one_channel = parse_call_line("aten.relu.default", "cnt: 1, ((T([8, 1, 56, 56], f32),), {})")
    flat = parse_call_line("aten.relu.default", "cnt: 1, ((T([8, 64], f32),), {})")
    strided = parse_call_line("aten.relu.default", "cnt: 1, ((T([8, 4, 5, 6], f32, stride=(120, 1, 24, 4)),), {})")
    assert channels_last_call(one_channel) is None and channels_last_call(flat) is None
    assert channels_last_call(strided) is None  # already as traced


# the shipped relu traces are all over the CPU interpreter's size budget: small 4-d inputs, as a dataset's
SMALL = {"aten.relu.default": [{"line": "cnt: 2, ((T([2, 8, 5, 5], f32),), {})", "timed": True},
                               {"line": "cnt: 1, ((T([3, 4, 6, 2, 2], f16),), {})", "timed": True}]}


def test_the_suite_adds_channels_last_cases_whose_inputs_are_channels_last():
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.suite.build import build_suite
    op = resolve_op("aten.relu.default")
    plain = build_suite(op, "cpu", 5, interpreter=True, extra_traces=SMALL)
    both = build_suite(op, "cpu", 5, interpreter=True, extra_traces=SMALL, channels_last=True)
    assert not any("channels-last" in c.source for c in plain.cases)
    layered = [c for c in both.cases if "channels-last" in c.source]
    assert layered and all(c.id.startswith("dataset-cl-") for c in layered)
    left_out = [skip for skip in both.skipped if skip["id"].startswith("dataset-cl-")]  # the CPU's cap on traces
    assert len(layered) + len(left_out) == 2 and all("CPU interpreter" in skip["reason"] for skip in left_out)
    formats = []
    for case in layered:
        (x,), _ = case.inputs()
        formats.append(torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
        assert x.is_contiguous(memory_format=formats[-1]) and not x.is_contiguous()
    assert {c.id for c in both.cases} > {c.id for c in plain.cases}  # the traced layout stays


def test_eval_runs_both_layouts_and_a_kernel_ignoring_strides_fails_the_channels_last_ones():
    from conftest import KERNELS
    from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
    verdicts = {kernel: evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", seed=11, extra_traces=SMALL, channels_last=True), KERNELS / kernel)
                for kernel in ("relu_triton.py", "relu_ignores_strides.py")}
    good = verdicts["relu_triton.py"]
    layered = [t for t in good.tests if "channels-last" in (t.source or "")]
    assert good.passed and layered and all(t.passed for t in layered)
    bad = verdicts["relu_ignores_strides.py"]
    failed = [t.id for t in bad.tests if t.passed is False]
    assert not bad.passed and any(name.startswith("dataset-cl-") for name in failed), failed


def test_the_prompt_names_the_layouts_and_what_aten_returns(capsys):
    from bbagent.cli import main
    assert main(["prompt", "--op", "aten.relu.default", "--channels-last", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "channels-last (NHWC in memory; NDHWC in 5-d)" in text
    assert "stride=(786432, 1, 24576, 768)),)` -> [32, 768, 32, 32] channels-last, strides (786432, 1, 24576, 768)" in text
    assert main(["prompt", "--op", "aten.relu.default", "--device", "cpu"]) == 0
    plain = capsys.readouterr().out  # the family's own advice may name the layout; the tested layouts are not listed
    assert "channels-last (NHWC in memory" not in plain and "-> [32, 768, 32, 32] channels-last" not in plain
    # the layout aten picks depends on the device: a CPU convolution keeps channels-last (meta tensors said contiguous)
    assert main(["prompt", "--op", "aten.convolution.default", "--channels-last", "--device", "cpu"]) == 0
    assert "1024)), T([1024, 1024, 1, 1], f16), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)` -> " \
           "[32, 1024, 14, 14] channels-last, strides (200704, 1, 14336, 1024)" in capsys.readouterr().out


def test_channels_last_for_another_family_is_a_usage_error(capsys):
    from bbagent.cli import main
    assert main(["prompt", "--op", "aten.mm.default", "--channels-last"]) == 2
    err = capsys.readouterr().err
    assert "--channels-last applies to the convolution, elementwise_binary" in err and "aten.mm.default is in" in err


LAYOUT_CHECK = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("example", sys.argv[1])
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
op, args = eval(sys.argv[2]), eval(sys.argv[3])
x = torch.randn(2, 8, 6, 5).to(memory_format=torch.channels_last)
got, want = example.kernel(x, *args), op(x, *args)
for g, w in zip(*[v if isinstance(v, tuple) else (v,) for v in (got, want)]):
    torch.testing.assert_close(g, w)
    assert g.stride() == w.stride(), (g.stride(), w.stride())
print("same values, same layout")
"""


@pytest.mark.parametrize("example, op, args", [("elementwise_unary", "torch.ops.aten.sigmoid.default", "()"),
                                               ("pooling", "torch.ops.aten.max_pool2d_with_indices.default", "([2, 2],)")])
def test_the_examples_read_a_channels_last_input_in_place(example, op, args):
    """The worked examples a model imitates take a channels-last input as it is, and return aten's
    layout (channels-last), instead of copying it to contiguous first: that copy cost the pooling
    example two thirds of its time on an H200. Values and strides both checked, under the
    interpreter, in a process of its own (TRITON_INTERPRET is read when triton is imported)."""
    import os
    import subprocess
    import sys
    from bbagent.agent.generate.prompting import PROMPTS_DIR
    from conftest import PYTHONPATH
    done = subprocess.run([sys.executable, "-c", LAYOUT_CHECK, str(PROMPTS_DIR / "examples" / f"{example}.py"), op, args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": PYTHONPATH})
    assert done.returncode == 0 and "same values, same layout" in done.stdout, done.stderr[-2000:]
