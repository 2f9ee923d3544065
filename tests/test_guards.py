"""Guards and mutation semantics: cheating and wrong-convention kernels are rejected with the right kind."""
from pathlib import Path

import pytest

from conftest import KERNELS
from harness.evaluate import evaluate
from harness.static_check import check_source


@pytest.mark.parametrize("kernel, guard, line", [
    ("relu_fallback.py", "torch_fallback", 20),
    ("reads_secret.py", "secret_read", 6),
    ("spawns_process.py", "forbidden_import", 2),
    ("patches_torch.py", "tampering", 4),
])
def test_static_guards_reject_before_running(kernel, guard, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    verdict = evaluate("aten.relu.default", KERNELS / kernel, timeout_s=60)
    assert verdict["verdict"] == "fail" and verdict["error_kind"] == "guard"
    assert any(f["guard"] == guard and f["line"] == line for f in verdict["guard_findings"]), verdict["guard_findings"]
    assert f"line {line}:" in verdict["message"]
    assert verdict["tests"] == []  # nothing of it ran
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
    ("import sys\nrunner = sys.modules['harness.runner']\n", [("introspection", 2)]),
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
    from harness.runner import _all_inputs_empty
    assert _all_inputs_empty(([torch.empty(0, 3), torch.empty(0, 3)], 0), {})
    assert not _all_inputs_empty(([torch.empty(0, 3), torch.ones(2, 3)], 0), {})
