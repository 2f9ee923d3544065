"""Guards and mutation semantics: cheating and wrong-convention kernels are rejected with the right kind."""
from pathlib import Path

import pytest

from conftest import KERNELS
from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
from bbagent.harness.checks.static_check import check_source
from bbagent.harness.checks.allowed import ALLOWED, SEED_DRAW


@pytest.mark.parametrize("kernel, guard, line", [
    ("relu_fallback.py", "torch_fallback", 20),
    ("reads_secret.py", "secret_read", 6),
    ("spawns_process.py", "forbidden_import", 2),
    ("patches_torch.py", "tampering", 4),
])
def test_static_guards_reject_before_running(kernel, guard, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", timeout_s=60), KERNELS / kernel)
    assert verdict.verdict == "fail" and verdict.error_kind == "guard"
    assert any(f.guard == guard and f.line == line for f in verdict.guard_findings), verdict.guard_findings
    assert f"line {line}:" in verdict.message
    assert verdict.tests == []  # nothing of it ran
    assert not Path("/tmp/bbagent-pwned").exists()


@pytest.mark.parametrize("source, expected", [
    ("import torch.nn.functional as F\ntry:\n    pass\nexcept Exception:\n    F.relu(x)\n", [("torch_fallback", 5)]),
    ("from os import getenv\n", [("secret_read", 1)]),
    ("import os\nos.getenv('K')\n", [("secret_read", 2)]),
    ("from socket import socket\n", [("forbidden_import", 1)]),
    ("import inspect\n", [("forbidden_import", 1)]),
    ("import gc\n", [("forbidden_import", 1)]),
    ("import time\ntime.perf_counter = None\n", [("tampering", 2)]),
    ("import torch\ns = torch.cuda.Stream()\n", [("side_stream", 2)]),
    ("x = eval('1')\n", [("forbidden_call", 1)]),
    ("data = open('/proc/self/environ').read()\n", [("forbidden_call", 1)]),
    ("import sys\nrunner = sys.modules['bbagent.harness.checks.case']\n", [("introspection", 2)]),
    ("def f():\n    pass\nf.__globals__\n", [("introspection", 3)]),
    ("import torch\nname = 'Str' + 'eam'\ns = getattr(torch.cuda, name)\n", [("introspection", 3)]),
    ("import torch\ns = getattr(torch.cuda, 'Stream')()\n", [("side_stream", 2)]),
    # Allowed: allocation in a handler, plain imports, exits (handled at run time).
    ("import torch\ntry:\n    pass\nexcept Exception:\n    y = torch.empty_like(x)\n", []),
    ("import os, sys, math\nimport triton.language as tl\nsys.exit(3)\n", []),
])
def test_static_rules(source, expected):
    assert [(f["guard"], f["line"]) for f in check_source(source)] == expected


def test_zero_size_inputs_inside_lists_need_no_launch():
    import torch
    from bbagent.harness.checks.case import _all_inputs_empty
    assert _all_inputs_empty(([torch.empty(0, 3), torch.empty(0, 3)], 0), {})
    assert not _all_inputs_empty(([torch.empty(0, 3), torch.ones(2, 3)], 0), {})


def _example_names():
    import torch
    return {"torch": torch, "x": torch.randn(4, 6), "y": torch.randn(6), "t": torch.tensor([3]),
            "out": torch.empty(4, 6), "shape": (4, 6), "dtype": torch.float16,
            "generator": torch.Generator().manual_seed(0)}


@pytest.mark.parametrize("allowed", ALLOWED + (SEED_DRAW,), ids=lambda row: row.purpose)
def test_every_call_the_contract_allows_passes_the_guard(allowed):
    """The prompt lists harness.checks.allowed's examples as what a wrapper may call: each one,
    run under the run-time guard, is no finding (the seed draw only for a random operator)."""
    import torch
    from bbagent.harness.checks.guards import AtenRecorder, LaunchCounter
    target = torch.ops.aten.bernoulli.default if allowed is SEED_DRAW else torch.ops.aten.relu.default
    for example in allowed.examples:
        names = _example_names()
        recorder = AtenRecorder(target, LaunchCounter(), candidate_file="<none>")
        with recorder:
            eval(example, names)
        assert recorder.findings == [], (example, recorder.findings)


def test_compute_outside_the_table_is_a_finding():
    import torch
    from bbagent.harness.checks.guards import AtenRecorder, LaunchCounter
    for example in ("x * 2", "x.relu()", "torch.where(x > 0, x, y)", "x.sum()", "x.cumsum(0)", "torch.equal(x, x)",
                    "torch.allclose(x, x)", "t.bool().is_nonzero()", "torch.linspace(0, 1, 5)",
                    "int(torch.randint(2**31 - 1, (1,), generator=generator, device=x.device))"):
        recorder = AtenRecorder(torch.ops.aten.relu.default, LaunchCounter(), candidate_file="<none>")
        with recorder:
            eval(example, _example_names())
        assert recorder.findings, example
    recorder = AtenRecorder(torch.ops.aten.clone.default, LaunchCounter(), candidate_file="<none>")
    with recorder:  # the operator itself is never allowed, even where the table lists it
        eval("x.clone()", _example_names())
    assert recorder.findings


def test_what_an_op_is_comes_from_its_schema_and_tags():
    """Views (alias results, in-place views), type arithmetic and type queries are allowed by what
    they are; a schema cannot tell size() from Int.Tensor, so number-returning queries are named."""
    import torch
    from bbagent.harness.checks.allowed import ALLOWED_ATEN, is_allowed, kind_of
    aten = torch.ops.aten
    expected = {aten.unfold.default: "view", aten.diagonal.default: "view", aten.split.Tensor: "view",
                aten.squeeze_.default: "view", aten.view_as_real.default: "view",
                aten.promote_types.default: "type_arithmetic", aten.can_cast.default: "type_arithmetic",
                aten.result_type.Tensor: "type_query", aten.result_type.Scalar_Tensor: "type_query",
                aten.add.Tensor: "compute", aten.equal.default: "compute", aten.Int.Tensor: "compute",
                aten.is_nonzero.default: "compute", aten.randn.default: "compute", aten.add_.Tensor: "compute",
                aten.copy_.default: "compute", aten._assert_async.default: "compute"}
    assert {op: kind_of(op) for op in expected} == expected
    assert is_allowed(aten.copy_.default) and is_allowed(aten.sym_size.int) and is_allowed(aten.empty.memory_format)
    assert not is_allowed(aten.Int.Tensor) and not is_allowed(aten.equal.default)
    assert len(ALLOWED_ATEN) < 60  # the named list stays short: everything else is derived


def test_a_device_comparison_of_a_one_element_result_names_the_allowed_spelling():
    """Issue 32: `partial[0] != 0` is aten.ne on the device; `partial[0].item() != 0` reads the value
    back (allowed) and compares in Python. The guard's message says so."""
    import torch
    from bbagent.harness.checks.guards import allowed_spelling
    one = torch.tensor([3.0])
    assert "`t.item() != 0`" in allowed_spelling(torch.ops.aten.ne.Scalar, (one[0], 0))
    assert allowed_spelling(torch.ops.aten.ne.Scalar, (torch.ones(4), 0)) == ""  # a real computation
    assert allowed_spelling(torch.ops.aten.add.Tensor, (one, one)) == ""
