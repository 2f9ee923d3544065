"""The run-time backing of the static rules, piece by piece on the CPU: a result must be plain data
(``harness.plain``), the judge's state is compared by identity (``harness.checks.integrity``),
threads left running the candidate's code are seen (``harness.checks.runtime``), impossible
measurements are named (``harness.timing.phase``), and the static rules' new spellings. The whole
path, kernel by kernel, is the corpus (``tests/test_corpus.py``)."""
import threading
import time

import numpy
import pytest
import torch

from bbagent.harness.checks.integrity import JudgeState
from bbagent.harness.plain import NotPlainTensor, not_plain, plain_only
from bbagent.harness.checks.runtime import CallWatch
from bbagent.harness.checks.static_check import check_source
from conftest import KERNELS


class Sub(torch.Tensor):
    pass


def test_plain_data_is_exact_tensors_plain_containers_and_scalars():
    x = torch.randn(3)
    assert not_plain(x) is None
    assert not_plain((x, [x, 2, 2.5, None, True, torch.float16])) is None
    assert not_plain(torch.max(torch.randn(3, 4), dim=1)) is None  # torch.return_types.max
    assert not_plain(numpy.float64(1.5)) is None
    assert "subclass of torch.Tensor" in not_plain(x.as_subclass(Sub))
    assert "Parameter" in not_plain(torch.nn.Parameter(x))
    assert "the result[1][0]" in not_plain((x, [torch.nn.Parameter(x)]))

    class Liar(tuple):
        def __iter__(self):
            return iter(())
    assert "Liar" in not_plain(Liar((x.as_subclass(Sub),)))  # a tuple subclass of the kernel's own
    assert "not a tensor" in not_plain(object())


def test_plain_only_refuses_what_the_kernel_made_and_keeps_the_callers_own():
    weight = torch.nn.Parameter(torch.randn(4))
    inplace = plain_only(lambda self: self)          # an in-place result is self: the caller's object
    assert inplace(weight) is weight
    with pytest.raises(NotPlainTensor, match="subclass of torch.Tensor"):
        plain_only(lambda self: self.clone().as_subclass(Sub))(torch.randn(2))

    def reclasses(self):
        self.__class__ = Sub
        return torch.empty(2)
    with pytest.raises(NotPlainTensor, match="argument 0 was a torch.Tensor and the call made it"):
        plain_only(reclasses)(torch.randn(2))

    def shortens(tensors):
        tensors.pop()
        return torch.empty(2)
    with pytest.raises(NotPlainTensor, match=r"argument 0 was a list of 2 \(torch.Tensor, torch.Tensor\) and the "
                                             r"call made it a list of 1 \(torch.Tensor\)"):
        plain_only(shortens)([torch.randn(2), torch.randn(2)])


def test_the_judge_state_names_what_changed_by_any_spelling():
    state = JudgeState.capture(ops=[torch.ops.aten.relu.default])
    assert state.changes(deep=True) == []
    original = torch.cuda.Event.elapsed_time
    try:
        type.__setattr__(torch.cuda.Event, "elapsed_time", lambda *a: 0.0)
        assert any(name.endswith("Event.elapsed_time") for name in state.changes())
    finally:
        type.__setattr__(torch.cuda.Event, "elapsed_time", original)
    assert state.changes() == []
    torch.Tensor.abs = lambda self: self  # a new class attribute shadows the base's method
    try:
        assert "torch.Tensor.abs (added)" in state.changes()
    finally:
        del torch.Tensor.abs
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        assert any("float32_matmul_precision" in name for name in state.changes())
    finally:  # (torch's newer fp32_precision setting does not go back to what it was: left out here)
        torch.set_float32_matmul_precision(precision)


def test_the_judge_state_sees_aten_overrides_and_code_swaps_deeply():
    import bbagent.harness.checks.compare as compare
    state = JudgeState.capture(ops=[torch.ops.aten.relu.default])
    code = compare.equal_exactly.__code__
    compare.equal_exactly.__code__ = (lambda before, after: True).__code__
    try:
        assert state.changes() == []  # the tables are the same objects: only the deep look sees it
        assert "bbagent.harness.checks.compare.equal_exactly.__code__" in state.changes(deep=True)
    finally:
        compare.equal_exactly.__code__ = code
    library = torch.library.Library("aten", "IMPL")
    library.impl("isclose", lambda *a, **k: torch.ones(1, dtype=torch.bool), "CPU")
    try:
        assert "the aten kernels registered for aten::isclose" in state.changes(deep=True)
    finally:
        library._destroy()
    assert state.changes(deep=True) == []


def test_a_submodule_imported_later_is_not_a_change():
    import sys
    state = JudgeState.capture()
    name = "torch.utils.bundled_inputs"
    had = sys.modules.pop(name, None)
    try:
        import torch.utils.bundled_inputs  # noqa: F401 - adds an attribute to torch.utils
        assert state.changes() == []
    finally:
        if had is not None:
            sys.modules[name] = had


def test_a_thread_left_running_the_candidates_code_is_seen(tmp_path):
    candidate = tmp_path / "candidate.py"
    candidate.write_text("import time\ndef spin(stop):\n    while not stop.is_set():\n        time.sleep(0.01)\n")
    namespace = {}
    exec(compile(candidate.read_text(), str(candidate), "exec"), namespace)
    watch = CallWatch(str(candidate), "cpu")
    stop = threading.Event()

    def kernel(x):
        threading.Thread(target=namespace["spin"], args=(stop,), daemon=True).start()
        return x
    try:
        watch.wrap(kernel)(torch.ones(1))
        failure = watch.failure()
        assert failure["error_kind"] == "stray_thread" and "line 4" in failure["message"]
    finally:
        stop.set()
    time.sleep(0.1)
    watch.wrap(lambda x: x)(torch.ones(1))
    assert watch.failure() is None


def test_watching_a_call_keeps_none_of_its_callers_values_alive(tmp_path):
    """The scan for stray threads lists every thread's frames; holding its own, it kept the frames
    of its callers (a program's draw: gigabytes of inputs and outputs) alive in a reference cycle
    until the garbage collector ran, and an 80 GB H100 ran out of memory on KernelBench level 1."""
    import gc
    import weakref
    watch = CallWatch(str(tmp_path / "candidate.py"), "cpu")

    def judged():
        big = torch.ones(1 << 20)
        watch.wrap(lambda x: x + 1)(big)
        return weakref.ref(big)
    gc.disable()
    try:
        assert judged()() is None  # freed when the caller returned, no collection needed
    finally:
        gc.enable()


@pytest.mark.parametrize("source, guard", [
    ("import torch\nclass L(torch.Tensor):\n    pass\n", "tensor_subclass"),
    ("from torch import Tensor\nclass L(Tensor):\n    pass\n", "tensor_subclass"),
    ("class M:\n    def __torch_dispatch__(cls, f, t, a, k):\n        pass\n", "tensor_subclass"),
    ("def kernel(x):\n    return x.as_subclass(object)\n", "tensor_subclass"),
    ("import torch\ntype.__setattr__(torch.cuda.Event, 'elapsed_time', None)\n", "tampering"),
    ("import torch\nobject.__setattr__(torch, 'relu', None)\n", "tampering"),
    ("def kernel(x):\n    x.__class__ = int\n", "tampering"),
    ("s = setattr\n", "forbidden_call"),
    ("import torch\ntorch.set_float32_matmul_precision('high')\n", "tampering"),
    ("import torch\nlib = torch.library.Library('aten', 'IMPL')\n", "tampering"),
    ("import torch\nt = torch.threading.Thread\n", "forbidden_import"),
    ("import torch\nm = torch.cuda.sys.modules\n", "introspection"),
])
def test_static_rules_see_these_spellings(source, guard):
    assert guard in [f["guard"] for f in check_source(source)], check_source(source)


@pytest.mark.parametrize("source", [
    "import torch\nlib = torch.library.Library('mylib', 'DEF')\n",   # a namespace of its own
    "def kernel(input):\n    return input\n",                          # a parameter named like a builtin
    "import torch\nwith torch.no_grad():\n    pass\n",
    "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass Config:\n    block: int = 128\n",
])
def test_static_rules_leave_these_alone(source):
    assert check_source(source) == []


def test_impossible_measurements_are_named():
    from bbagent.harness.timing.phase import implausible_call, implausible_device
    assert implausible_device({"empty_launch_ms": 0.004, "empty_graph_launch_ms": 0.002, "copy_gbs": 3000.0}, 3350.0) is None
    assert "empty Triton launch" in implausible_device({"empty_launch_ms": 1e-4, "copy_gbs": 3000.0}, 3350.0)
    assert "beyond this device's memory" in implausible_device({"empty_launch_ms": 0.004, "copy_gbs": 21474836.0}, 3350.0)
    assert "no GPU moves 20 TB/s" in implausible_device({"empty_launch_ms": 0.004, "copy_gbs": 30000.0}, None)
    l2 = 50 << 20
    assert implausible_call(0.2, 0.004, True, 400 << 20, l2, 3000.0) is None      # 2 TB/s of writes: possible
    assert "under half an empty Triton launch" in implausible_call(0.0001, 0.004, True, 1024, l2, 3000.0)
    assert implausible_call(0.0001, 0.004, False, 0, l2, 3000.0) is None        # a view: no launch, no work
    assert "past the L2 cache" in implausible_call(0.01, 0.004, True, 400 << 20, l2, 3000.0)
    assert implausible_call(0.003, 0.004, True, 40 << 20, l2, 3000.0) is None    # fits in L2: no floor


def test_events_that_add_up_to_more_than_the_host_saw_are_impossible():
    from bbagent.harness.timing.clock import events_beyond_host
    assert events_beyond_host(measured_ms=80.0, host_ms=100.0, reps=50) is None
    assert events_beyond_host(measured_ms=100.3, host_ms=100.0, reps=50) is None   # within rounding
    assert "only 100.000 ms passed" in events_beyond_host(measured_ms=400.0, host_ms=100.0, reps=50)


def test_a_hang_while_the_tests_wait_for_kernels_compiled_ahead_is_the_compilers():
    """The faulthandler dump shows the main thread only: waiting in compile_ahead for a compilation
    that never ends is a hang in Triton's compiler; a loop in the kernel's own code during its call
    ahead of the tests is the kernel's."""
    from bbagent.harness.sandbox.parent.run import _hang_site
    waiting = ('Stack (most recent call first):\n'
               '  File "/usr/lib/python3.12/threading.py", line 355 in wait\n'
               '  File "/work/main/harness/sandbox/child/compile_ahead.py", line 117 in wait_for_call\n'
               '  File "/work/main/harness/sandbox/child/worker.py", line 315 in _run_tests\n')
    assert _hang_site(waiting, "/tmp/candidate.py").startswith("in Triton's compiler")
    looping = ('Stack (most recent call first):\n'
               '  File "/tmp/candidate.py", line 7 in kernel\n'
               '  File "/work/main/harness/sandbox/child/compile_ahead.py", line 80 in compile_ahead\n')
    assert _hang_site(looping, "/tmp/candidate.py").startswith("in the kernel's code")


def test_torch_wrapping_its_own_function_later_is_no_change():
    """TorchDynamo, imported late (by the profiler), wraps torch.manual_seed: torch's own wrapper of
    the same function is no tampering; torch's wrapper of another function is."""
    state = JudgeState.capture()
    seed, close = torch.manual_seed, torch.isclose
    try:
        torch.manual_seed = torch._disable_dynamo(seed)
        assert state.changes() == []
        torch.isclose = torch._disable_dynamo(lambda *args, **kwargs: torch.ones(1, dtype=torch.bool))
        assert state.changes() == ["torch.isclose"]
    finally:
        torch.manual_seed, torch.isclose = seed, close


def test_the_bytes_a_call_must_write():
    """What the write ceiling of the timing phase counts: results and written arguments, not a view
    of an input (moved counts every read and every write once, as the roofline does)."""
    from bbagent.harness.timing.phase import traffic
    aten = torch.ops.aten
    x, bias, out = torch.randn(32), torch.randn(8, 4), torch.empty(8, 4)
    assert traffic(aten.relu.default, (x,), {}, torch.relu(x)) == (2 * 32 * 4, 32 * 4)
    assert traffic(aten.relu_.default, (x,), {}, x) == (2 * 32 * 4, 32 * 4)           # read self, write self
    assert traffic(aten.add.out, (out, bias), {"out": out}, out) == ((32 + 32 + 32) * 4, 32 * 4)
    assert traffic(aten.view.default, (x, [4, 8]), {}, x.view(4, 8))[1] == 32 * 4  # another shape: counted
    assert traffic(aten.alias.default, (x,), {}, x)[1] == 0                        # the input itself: no write


def test_copying_an_operator_is_no_tampering_but_other_slot_names_are(capsys):
    """``copy`` stores ``__slotnames__`` on a class the first time it copies an instance (Helion's
    compiler deep-copies graphs holding OpOverloads): a correct kernel doing so passes. Any other
    value there, or another new class attribute, is still a change."""
    from bbagent.cli import main
    assert main(["eval", "--op", "aten.relu.default", "--kernel", str(KERNELS / "relu_copies_its_op.py")]) == 0, \
        capsys.readouterr().out
    cls = torch._ops.OpOverload
    had = vars(cls).get("__slotnames__", None)
    if had is not None:
        delattr(cls, "__slotnames__")
    try:
        state = JudgeState.capture()
        cls.__slotnames__ = []  # what copy stores: no slots of its own
        assert state.changes() == []
        cls.__slotnames__ = ["_op"]
        assert "torch._ops.OpOverload.__slotnames__ (added)" in state.changes()
    finally:
        delattr(cls, "__slotnames__")
        if had is not None:
            cls.__slotnames__ = had


def test_the_time_zone_set_anew_is_no_tampering_but_the_clocks_are():
    """``time.tzset()`` sets ``time.tzname`` and the offsets anew (on the GPU machine a library importing
    under Helion did, and in the sandbox's file view the zone file is gone): no value the harness reads.
    A clock replaced is still a change."""
    import time
    state = JudgeState.capture()
    before, clock = time.tzname, time.perf_counter
    try:
        time.tzname = ("XXX", "YYY")
        assert state.changes() == []
        time.perf_counter = lambda: 0.0
        assert any("time.perf_counter" in change for change in state.changes())
    finally:
        time.tzname, time.perf_counter = before, clock
