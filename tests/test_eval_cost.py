"""Issue 33 on the CPU: the suite is built once per operator and reused with fresh values, and a
candidate that fails one test of a class early stops with grouped feedback instead of running the
whole suite. (The autotuning half is in test_compile_clock.py; the timings are
benchmarks/eval_cost.py's, on a GPU.)"""
import hashlib

import pytest
import torch

from conftest import KERNELS
from bbagent.harness.problem import operator_problem
from bbagent.harness.evaluate import EvaluationRequest, evaluate_kernel
from bbagent.harness.ops import resolve_op
from bbagent.harness.suite import cache
from bbagent.harness.suite.build import build_suite
from bbagent.harness.suite.tiers import class_of, failing_classes_first, first_tier_order


@pytest.fixture
def suite_cache(tmp_path, monkeypatch):
    where = tmp_path / "suites"
    monkeypatch.setenv("BBAGENT_SUITE_CACHE", str(where))
    return where


def test_the_suite_is_built_once_across_two_candidates(suite_cache):
    first = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu"), KERNELS / "relu_triton.py")
    saved = list(suite_cache.glob("*.pt"))
    second = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu"), KERNELS / "relu_strided.py")
    assert first.passed and second.passed
    assert len(saved) == 1 and list(suite_cache.glob("*.pt")) == saved  # built by the first, reused by the second
    assert not any("suite reused" in note for note in first.suite.notes)
    reused = next(note for note in second.suite.notes if "suite reused" in note)
    assert "drawn fresh for this evaluation" in reused
    assert [t.id for t in first.tests] == [t.id for t in second.tests]  # the same tests
    assert first.summary.planned == second.summary.planned
    assert second.timings.suite_build_s < first.timings.suite_build_s


def test_a_reused_suite_draws_fresh_values_for_every_evaluation():
    ADD = operator_problem("aten.add.Tensor", exact_overload=True)
    op = resolve_op("aten.add.Tensor")
    data = cache.dumps([("aten.add.Tensor", op, build_suite(op, "cpu", 7, interpreter=True))])
    one, _ = cache.refreshed(cache.loads(data, "cpu", ADD), seed=1)
    two, fresh = cache.refreshed(cache.loads(data, "cpu", ADD), seed=2)
    pairs = list(zip(one[0][2].cases, two[0][2].cases))
    refreshable = [(a, b) for a, b in pairs if a.refreshable]
    assert refreshable and fresh >= len(refreshable)
    for a, b in refreshable:  # same shapes, strides and dtypes; other values
        for x, y in zip(_tensors(a), _tensors(b)):
            assert (x.shape, x.stride(), x.dtype) == (y.shape, y.stride(), y.dtype)
        assert any(x.dtype.is_floating_point and x.count_nonzero() and not torch.equal(x, y)
                   for x, y in zip(_tensors(a), _tensors(b)))
    traces = [(a, b) for a, b in pairs if a.trace is not None]
    assert traces and all(a.seed != b.seed for a, b in traces)
    edges = [(a, b) for a, b in pairs if a.source.startswith("edge:")]
    assert edges and all(torch.equal(x.nan_to_num(), y.nan_to_num()) for a, b in edges
                         for x, y in zip(_tensors(a), _tensors(b)))  # an edge case's values are the test


def test_a_saved_suite_keeps_every_input_layout_and_a_redraw_keeps_signs():
    """Tensor.to makes a view with gaps contiguous (a CUDA suite lost its strided inputs that way,
    and a kernel ignoring strides passed): saved and loaded, a view keeps its strides and offset."""
    from bbagent.harness.suite.build import TestCase
    base = torch.randn(6, 10)
    view = base[1:, ::3]  # gaps between elements, a storage offset
    case = TestCase(id="t", source="opinfo:x", description="", dtype="float32", args=(view,), kwargs={})
    op = resolve_op("aten.relu.default")
    from bbagent.harness.suite.build import Suite
    data = cache.dumps([("aten.relu.default", op, Suite(cases=[case]))])
    relu = operator_problem("aten.relu.default", exact_overload=True)
    loaded = cache.loads(data, "cpu", relu)[0][2].cases[0].args[0]
    assert (loaded.shape, loaded.stride(), loaded.storage_offset()) == (view.shape, view.stride(), view.storage_offset())
    assert torch.equal(loaded, view) and loaded.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    elsewhere = cache.loads(data, "meta", relu)[0][2].cases[0].args[0]  # another device, as on a GPU
    assert (elsewhere.stride(), elsewhere.storage_offset()) == (view.stride(), view.storage_offset())
    fresh = cache.redrawn(loaded, torch.Generator().manual_seed(3))
    assert (fresh.stride(), fresh.storage_offset()) == (view.stride(), view.storage_offset())
    assert torch.equal(torch.sign(fresh), torch.sign(view)) and not torch.equal(fresh, view)
    ratio = fresh / view
    assert bool(((ratio >= 0.49) & (ratio <= 2.01)).all())


def _tensors(case):
    from bbagent.harness.inputs import tensors_in
    return tensors_in((case.args, case.kwargs))


def test_a_suite_file_changed_after_the_child_announced_it_is_not_adopted(tmp_path, suite_cache):
    """The candidate runs in the directory the building child saved its suite to: the parent keeps
    the file only if it still has the digest announced before the candidate was imported."""
    saved = tmp_path / "suite.pt"
    saved.write_bytes(b"what the child saved")
    digest = hashlib.sha256(b"what the child saved").hexdigest()
    saved.write_bytes(b"what a candidate wrote over it")
    assert cache.adopt(saved, digest, "key") is None and not cache.cached("key")
    saved.write_bytes(b"what the child saved")
    assert cache.adopt(saved, digest, "key") == cache.cached("key")
    assert (cache.cached("key").stat().st_mode & 0o777) == 0o600


def test_the_suite_cache_keeps_the_most_recently_used(tmp_path, suite_cache, monkeypatch):
    import os
    monkeypatch.setattr(cache, "MAX_CACHED", 2)
    for number, key in enumerate(("a", "b", "c")):
        saved = tmp_path / f"{key}.pt"
        saved.write_bytes(key.encode())
        cache.adopt(saved, hashlib.sha256(key.encode()).hexdigest(), key)
        os.utime(cache.cached(key), (number, number))
    assert not cache.cached("a")
    cache.touch(cache.cached("b"))  # used now: "c" is the oldest
    saved = tmp_path / "d.pt"
    saved.write_bytes(b"d")
    cache.adopt(saved, hashlib.sha256(b"d").hexdigest(), "d")
    assert cache.cached("b") and cache.cached("d") and not cache.cached("c")


def test_the_first_tier_holds_one_test_of_every_class_in_suite_order():
    op = resolve_op("aten.add.Tensor")
    suite = build_suite(op, "cpu", 1, interpreter=True)
    planned = [("aten.add.Tensor", op, case) for case in suite.cases]
    order, size = first_tier_order(planned)
    classes = [class_of(name, case) for name, _, case in order]
    assert sorted(id(e[2]) for e in order) == sorted(id(e[2]) for e in planned)  # nothing dropped
    assert len(set(classes[:size])) == size and set(classes[size:]) <= set(classes[:size])
    tier = [case.id for _, _, case in order[:size]]
    assert tier == [case.id for _, _, case in planned if case.id in set(tier)]  # suite order kept
    assert any("alpha" in class_of("aten.add.Tensor", case)[5] for _, _, case in order[:size])


def test_after_a_failing_first_tier_the_failing_classes_tests_come_first():
    op = resolve_op("aten.add.Tensor")
    suite = build_suite(op, "cpu", 1, interpreter=True)
    order, size = first_tier_order([("aten.add.Tensor", op, case) for case in suite.cases])
    rest = order[size:]
    failing = {class_of(name, case) for name, _, case in rest[-1:]}  # the class of the last test left
    reordered = failing_classes_first(rest, failing)
    first_classes = [class_of(name, case) in failing for name, _, case in reordered]
    held = first_classes.count(True)
    assert 0 < held < len(rest) and first_classes == [True] * held + [False] * (len(rest) - held)
    assert sorted(id(e[2]) for e in reordered) == sorted(id(e[2]) for e in rest)
    others = [case.id for name, _, case in reordered[held:]]
    assert others == [case.id for name, _, case in rest if class_of(name, case) not in failing]  # suite order


def test_a_tests_class_is_worked_out_once_and_contiguity_read_as_torch_reads_it(monkeypatch):
    import torch
    from bbagent.harness.suite import tiers
    for shape in [(), (5,), (2, 1, 3), (2, 0, 3), (1, 1), (4, 3, 2, 7)]:
        assert tiers._contiguous_strides(shape) == torch.empty(shape, device="meta").stride(), shape
    op = resolve_op("aten.add.Tensor")
    suite = build_suite(op, "cpu", 1, interpreter=True)
    planned = [("aten.add.Tensor", op, case) for case in suite.cases]
    worked_out = []
    original = tiers.class_of
    monkeypatch.setattr(tiers, "class_of", lambda name, case: worked_out.append(case.id) or original(name, case))
    classes = tiers.Classes()
    order, size = tiers.first_tier_order(planned, classes)
    tiers.failing_classes_first(order[size:], {classes(*order[-1][::2])}, classes)
    assert sorted(worked_out) == sorted(case.id for case in suite.cases)  # once each, for both orderings


def test_a_wrong_kernel_stops_after_the_first_tier_and_names_its_failing_classes(suite_cache):
    """add_ignores_alpha is wrong only where alpha is given: the first tier holds a test of that
    class, so the evaluation stops there with its feedback, and says the rest did not run."""
    fast = evaluate_kernel(EvaluationRequest.of("aten.add.Tensor", device="cpu", fail_fast_s=0), KERNELS / "add_ignores_alpha.py")
    full = evaluate_kernel(EvaluationRequest.of("aten.add.Tensor", device="cpu", fail_fast_s=None), KERNELS / "add_ignores_alpha.py")
    assert not fast.passed and not full.passed
    assert len(list(suite_cache.glob("*.pt"))) == 1  # fail_fast_s does not shape the suite: one build serves both
    assert fast.summary.not_run > 0 and fast.summary.total + fast.summary.not_run == fast.summary.planned
    assert full.summary.not_run == 0 and full.summary.not_run_reason is None
    assert "fail fast" in fast.summary.not_run_reason and f"the other {fast.summary.not_run}" in fast.summary.not_run_reason
    assert fast.summary.failing_classes and all("with alpha" in c for c in fast.summary.failing_classes)
    assert "did not run" in fast.message and fast.failure_groups
    assert {g.error_kind for g in fast.failure_groups} == {"mismatch"}


def test_a_sealed_child_imports_only_what_the_candidate_imports(tmp_path):
    """After the seal an import pays the audit hook and the file view (torch._dynamo, imported by
    the first aten call under the tests' dispatch mode, took 4 s there on the H200): torch, Triton
    and the harness are loaded before. The Verdict lists what was imported sealed."""
    candidate = tmp_path / "relu_importing.py"
    candidate.write_text((KERNELS / "relu_triton.py").read_text().replace(
        "def kernel(self):", "def kernel(self):\n    import tabnanny  # noqa: F401 - loaded by no one else\n"
                             "    torch.broadcast_shapes(self.shape, self.shape)  # imports sympy on first use\n"))
    for warm in (True, True, False):  # builds the suite, then reuses it (less is loaded before the seal); cold
        verdict = evaluate_kernel(EvaluationRequest.of("aten.relu.default", device="cpu", warm=warm), candidate)
        assert verdict.passed, verdict.message
        assert verdict.timings.imported_sealed == ["tabnanny"]


def test_the_tests_dispatch_mode_does_not_import_torchdynamo():
    """torch wraps a dispatch mode's ``__torch_dispatch__`` so as to import TorchDynamo at its first
    call unless the mode says not to; the AtenRecorder says not to (a fresh process shows it)."""
    import subprocess
    import sys
    from conftest import ROOT
    code = ("import sys, torch\n"
            "from bbagent.harness.checks.guards import AtenRecorder, LaunchCounter\n"
            "with AtenRecorder(torch.ops.aten.relu.default, LaunchCounter(), 'k.py') as recorder:\n"
            "    torch.empty_like(torch.ones(3)).relu()\n"
            "print(len(recorder.findings), 'torch._dynamo' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "False"]  # the relu was recorded; TorchDynamo never loaded


def test_trimming_the_suite_cache_skips_suites_another_process_removed(tmp_path, monkeypatch):
    import os
    from pathlib import Path
    for age, name in enumerate(["new", "mid", "old"]):
        (tmp_path / f"{name}.pt").write_bytes(b"x")
        os.utime(tmp_path / f"{name}.pt", (1000 - age, 1000 - age))
    listed = list(tmp_path.glob("*.pt")) + [tmp_path / "gone.pt"]  # listed, then removed by another process
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter(listed))
    cache._keep_newest(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mid.pt", "new.pt"]
