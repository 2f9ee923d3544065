"""The loader an exported package carries (``bbagent export --package``): it serves the package's
approved kernels with torch and triton alone, as ``bbagent.enable`` serves them from a kernel tree.

A package holds, beside this loader and the modules it needs (copied from bbagent), its kernel
files under ``kernels/<folder>/`` and ``manifest.json`` (a ``Manifest``): per kernel its digest,
the overloads it serves, the dtypes it was tested on, its speedups as measured, the Verdict it was
approved with and the stack and card it was judged on, and its self-test (``selftest/<folder>.pt``:
saved inputs of its tests).

``Package.enable`` registers each kernel for its overloads (``harness.overriding``: aten's own
kernel answers what the kernel was not tested on, and every call is counted; the in-place and out=
overloads through ``harness.adapters``). It serves a kernel only where:

* its file is the one approved (its sha256 is the manifest's);
* it was judged on this stack and card (torch, triton, device, GPU name), or its self-test passed
  here (``Package.check``, recorded per kernel digest and stack in the user's cache;
  ``enable(check=True)`` runs the missing ones first), or the user says so (``trust=True``);
* on a GPU, it was measured at least as fast as eager for that overload (``include_slower``: all).

Under torch.compile, inductor lowers aten operators itself; while enabled, each served functional
overload measured at least as fast as inductor (on the CPU: every one) is served in compiled code
too. On a GPU inductor's own code launches the kernel (``harness.launches``: the approved wrapper is
traced with its Triton launches, as ``bbagent.enable`` does); every call that cannot be traced so,
and every one on the CPU, is taken out of inductor's decompositions and lowered as a call of the
overload (an extern call out of inductor's code), which reaches the served kernel through the
dispatcher. ``Served.under_compile`` says which path each took. Only graphs compiled while enabled
are changed.

Imports torch, triton and the standard library only.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from bbagent.harness.adapters import serving
from bbagent.harness.checks.compare import compare
from bbagent.harness.helion_configs import CONFIGS_FILE
from bbagent.harness.kernel_import import KernelImportError, import_module, interpret_triton
from bbagent.harness.launches import DirectKernel, DirectServing
from bbagent.harness.ops import op_name, resolve_op
from bbagent.harness.overriding import Counted, Installed, dtypes_named, in_words, override

SCHEMA = "bbagent.package"
SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
DISPATCH_KEYS = {"cuda": "CUDA", "cpu": "CPU"}


class PackageError(ValueError):
    """What the caller asked cannot be done (a device this package cannot serve, enabled twice)."""


@dataclass(frozen=True)
class Stack:
    """Where a kernel runs: torch's and triton's versions, the device type and the GPU's name."""
    torch: str
    triton: str
    device: str
    gpu: str | None = None

    @classmethod
    def here(cls, device: str) -> Stack:
        import triton
        gpu = torch.cuda.get_device_name() if device == "cuda" else None
        return cls(torch.__version__, triton.__version__, device, gpu)

    def said(self) -> str:
        return f"torch {self.torch}, triton {self.triton}, {self.gpu or self.device}"


@dataclass
class PackagedKernel:
    """One approved kernel of the package, as ``manifest.json`` names it."""
    key: str                 # the kernel's key in the tree it was exported from (its functional overload)
    folder: str              # under kernels/
    file: str
    version: int
    status: str              # its review status when exported
    sha256: str
    written_for: str         # the overload its kernel(...) has the calling convention of
    serves: list[str]        # the overloads served with it (in-place and out= through the adapters)
    dtypes: list[str]        # those it was tested on; others go to aten
    speedups: dict[str, float]  # per served overload, over eager, measured where it was judged
    over_inductor: float | None
    verdict: dict            # the tests of the accepting Verdict
    judged_on: Stack
    selftest: str | None     # under selftest/, or None where none could be saved
    origin: dict             # where it came from: run, provider, model, the folder exported
    dsl: str = "triton"      # the kernel language it is written in (harness.dsl): helion's needs helion installed
    configs_sha256: str | None = None  # a Helion kernel's tuned configs beside its file (harness.helion_configs)

    @classmethod
    def from_row(cls, row: dict) -> PackagedKernel:
        return cls(**{**row, "judged_on": Stack(**row["judged_on"])})


@dataclass
class Manifest:
    name: str
    kernels: list[PackagedKernel]
    exported_at: str = ""
    exported_by: str = ""
    left_out: list[dict] = field(default_factory=list)
    schema: str = SCHEMA
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def read(cls, path: Path) -> Manifest:
        row = json.loads(path.read_text(encoding="utf-8"))
        if row.get("schema") != SCHEMA or row.get("schema_version") != SCHEMA_VERSION:
            raise PackageError(f"{path} is not a manifest this loader reads ({SCHEMA} {SCHEMA_VERSION})")
        return cls(**{**row, "kernels": [PackagedKernel.from_row(k) for k in row["kernels"]]})


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Checked:
    """A kernel's self-test on one stack: passed or not, over how many cases, and the first failure."""
    key: str
    passed: bool
    cases: int
    failure: str = ""


class Served(Installed):
    """What ``Package.enable`` installed; a context manager (leaving the block disables it).
    ``served``: the calls per overload; ``skipped``: each kernel or overload left to aten, with why."""

    def __init__(self, package: Package, library, served: dict[str, Counted], skipped: dict[str, str],
                 compiled: CompiledLowering | None):
        self.package, self.library, self.served, self.skipped, self.compiled = package, library, served, skipped, compiled

    def calls(self) -> dict[str, int]:
        return {op: counted.calls for op, counted in self.served.items()}

    def compiled_sites(self) -> dict[str, int]:
        """Per overload launched from inductor's code: its calls traced into compiled graphs as its
        Triton launches (no Python runs them, so they are counted where they are compiled)."""
        if self.compiled is None:
            return {}
        return {kernel.op: kernel.sites for kernel in self.compiled.direct.kernels.values()}

    def under_compile(self) -> dict[str, str]:
        """Per overload served in compiled code: launched by inductor's code, or an extern call and why."""
        return self.compiled.said() if self.compiled is not None else {}

    def fallbacks(self) -> dict[str, dict[str, int]]:
        return {op: dict(counted.fallbacks) for op, counted in self.served.items() if counted.fallbacks}

    def forget(self) -> None:
        if self.package.current is self:
            self.package.current = None


class Package:
    """The kernels of one exported package (its folder holds ``manifest.json``)."""

    def __init__(self, name: str, folder: Path):
        self.name, self.folder = name, Path(folder)
        self.manifest = Manifest.read(self.folder / MANIFEST)
        self.current: Served | None = None
        self._results: dict[str, Checked] = {}  # self-tests run in this process, by kernel digest and stack
        self._functions: dict[tuple[str, str], Callable] = {}  # kernels imported, by folder and device

    def kernels(self) -> list[dict]:
        """Each kernel: its key, version, digest, the overloads it serves, its Verdict's tests, the
        stack and card it was judged on, and its speedups."""
        return [{"key": k.key, "version": k.version, "status": k.status, "sha256": k.sha256, "serves": k.serves,
                 "verdict": k.verdict, "judged_on": asdict(k.judged_on), "speedups": k.speedups,
                 "over_inductor": k.over_inductor, "dtypes": k.dtypes} for k in self.manifest.kernels]

    def enable(self, device: str | None = None, *, include_slower: bool = False, trust: bool = False,
               check: bool = False, ops: Iterable[str] | None = None) -> Served:
        """Serve the package's kernels for ``device`` (default: CUDA where there is a GPU, else the
        CPU, under Triton's interpreter), as the module says. ``ops``: only these overloads."""
        device, here, wanted = self._where(device, ops, f"is already enabled: call {self.name}.disable() first")
        # decided (self-tests run) before anything is registered: aten's results are the references
        chosen = [(kernel, self._why_not(kernel, here, trust, check)) for kernel in self.manifest.kernels
                  if wanted is None or wanted & set(kernel.serves)]
        library = torch.library.Library("aten", "IMPL")
        served: dict[str, Counted] = {}
        skipped: dict[str, str] = {}
        compiled: dict = {}
        try:
            for kernel, why in chosen:
                if why is None:
                    why = self._register(library, kernel, device, include_slower, wanted, served, skipped, compiled)
                if why is not None:
                    for op in kernel.serves:
                        skipped[op] = why
                    _say(f"{self.name}: {kernel.key} is not served: {why}")
            direct = [DirectKernel(op, resolve_op(op), function, frozenset(dtypes), device)
                      for op, (function, dtypes) in compiled.items()] if device != "cpu" else []
            lowering = CompiledLowering([resolve_op(op) for op in compiled], DirectServing(direct),
                                        self._fingerprint(served)) if compiled else None
            if lowering is not None:
                lowering.install()
        except BaseException:
            library._destroy()
            raise
        self.current = Served(self, library, served, skipped, lowering)
        return self.current

    def disable(self) -> dict[str, int] | None:
        """Give aten its kernels back; the calls served per overload (None: nothing was enabled)."""
        if self.current is None:
            return None
        served = self.current
        served.disable()
        return served.calls()

    def check(self, device: str | None = None, ops: Iterable[str] | None = None) -> list[Checked]:
        """Run each kernel's self-test here (``ops``: only the kernels serving these), record the
        passes for this stack, and return every result."""
        device, here, wanted = self._where(device, ops, "is enabled: disable it before checking its kernels against aten")
        results = []
        for kernel in self.manifest.kernels:
            if wanted is None or wanted & set(kernel.serves):
                results.append(self._checked(kernel, here))
        return results

    def _where(self, device: str | None, ops: Iterable[str] | None, if_enabled: str) -> tuple[str, Stack, set | None]:
        """The device (checked; Triton's interpreter chosen for the CPU), its stack, and the
        overloads asked for (None: all); a PackageError saying ``if_enabled`` while enabled."""
        device = _device(device)
        if self.current is not None:
            raise PackageError(f"{self.name} {if_enabled}")
        if device == "cpu":
            _interpreted()
        return device, Stack.here(device), None if ops is None else set(ops)

    def _path(self, kernel: PackagedKernel) -> Path:
        return self.folder / "kernels" / kernel.folder / kernel.file

    def _file_problem(self, kernel: PackagedKernel) -> str | None:
        """Why the kernel's file is not the one approved (missing, or another digest), or None."""
        path = self._path(kernel)
        if not path.is_file():
            return f"its file {path} is missing"
        if file_sha256(path) != kernel.sha256:
            return f"{path} is not the file approved (its sha256 is not {kernel.sha256[:12]})"
        configs = path.with_name(CONFIGS_FILE)
        now = file_sha256(configs) if configs.is_file() else None
        if now != kernel.configs_sha256:
            return (f"{configs} is not the Helion configs approved with the kernel "
                    f"({'missing' if now is None else 'its sha256 differs'})" if kernel.configs_sha256 else
                    f"{configs} was not approved with the kernel (it was added since): remove it")
        return None

    def _why_not(self, kernel: PackagedKernel, here: Stack, trust: bool, check: bool) -> str | None:
        problem = self._file_problem(kernel)
        if problem is not None or trust or kernel.judged_on == here:
            return problem
        key = _check_key(kernel, here)
        result = asdict(self._results[key]) if key in self._results else _recorded(self.name).get(key)
        if result is None and check:
            result = asdict(self._checked(kernel, here))
        if result is None:
            return (f"judged on {kernel.judged_on.said()}, not on this {here.said()}: run 'python -m {self.name} check' "
                    f"(its self-test), or enable(trust=True)")
        if not result["passed"]:
            return f"its self-test failed on {here.said()}: {result['failure']}"
        return None

    def _register(self, library, kernel: PackagedKernel, device: str, include_slower: bool, wanted: set | None,
                  served: dict, skipped: dict, compiled: dict) -> str | None:
        try:
            function = self._kernel(kernel, device)
        except KernelImportError as exc:
            return str(exc)
        written_for = resolve_op(kernel.written_for)
        dtypes = dtypes_named(kernel.dtypes)
        for op in kernel.serves:
            if wanted is not None and op not in wanted:
                continue
            speed = kernel.speedups.get(op)
            if device != "cpu" and not include_slower and (speed is None or speed < 1.0):
                skipped[op] = (f"measured {speed:.3g}x eager" if speed is not None else "not timed on a GPU") + \
                    "; include_slower=True serves it anyway"
                continue
            overload = resolve_op(op)
            counted = Counted()
            override(library, overload, serving(function, written_for, overload), dtypes, DISPATCH_KEYS[device], counted)
            served[op] = counted
            over = kernel.over_inductor
            if op == kernel.written_for and (device == "cpu" or include_slower or (over is not None and over >= 1.0)):
                compiled[op] = (serving(function, written_for, overload, traced=True), dtypes)
        return None

    def _kernel(self, kernel: PackagedKernel, device: str) -> Callable:
        """The kernel's ``kernel``, imported once per device (a second import would compile its
        Triton kernels again)."""
        if (kernel.folder, device) not in self._functions:
            path = self._path(kernel)
            module = import_module(path, f"{self.name}_kernel_{kernel.folder}", device)
            function = getattr(module, "kernel", None)
            if not callable(function):
                raise KernelImportError(f"{path} defines no kernel(...)")
            self._functions[(kernel.folder, device)] = function
        return self._functions[(kernel.folder, device)]

    def _checked(self, kernel: PackagedKernel, here: Stack) -> Checked:
        result = self._self_test(kernel, here.device)
        self._results[_check_key(kernel, here)] = result
        _record(self.name, _check_key(kernel, here), result)
        return result

    def _self_test(self, kernel: PackagedKernel, device: str) -> Checked:
        """The kernel against aten on its saved test inputs, on ``device``."""
        if kernel.selftest is None:
            return Checked(kernel.key, False, 0, "the package holds no test inputs for it")
        problem = self._file_problem(kernel)
        if problem is not None:
            return Checked(kernel.key, False, 0, problem)
        try:
            function = self._kernel(kernel, device)
            saved = torch.load(self.folder / "selftest" / kernel.selftest, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - the check fails, with why
            return Checked(kernel.key, False, 0, in_words(exc))
        written_for = resolve_op(kernel.written_for)
        cases = saved["cases"]
        for case in cases:
            failure = _one_case(function, written_for, case, device)
            if failure is not None:
                return Checked(kernel.key, False, len(cases), f"{case['id']}: {failure}")
        return Checked(kernel.key, bool(cases), len(cases), "" if cases else "no saved test inputs")

    def _fingerprint(self, served: dict) -> str:
        # the files checked to be the manifest's: the kernel and any Helion configs the direct path traces in with it
        return ",".join(sorted(f"{k.key}={k.sha256}+{k.configs_sha256 or 'none'}" for k in self.manifest.kernels
                               if set(k.serves) & set(served)))


def _one_case(function, overload, case: dict, device: str) -> str | None:
    """None where ``function`` gives aten's result on the case's inputs (by the judge's comparison;
    against float64 where aten and the kernel round differently), else what went wrong."""
    def inputs():
        return _on(case["args"], device), _on(case["kwargs"], device)
    args, kwargs = inputs()
    try:
        expected = overload(*args, **kwargs)
    except Exception:  # noqa: BLE001 - aten refuses this input here: nothing to compare
        return None
    args, kwargs = inputs()
    try:
        actual = function(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a kernel that raises on a tested input fails its check
        return f"the kernel raised {in_words(exc)}"
    failure = compare(expected, actual)
    if failure is None:
        return None
    wide = _wide(overload, args, kwargs, expected)
    if wide is not None and compare(wide, actual) is None:
        return None
    return failure.get("message", "differs from aten")


def _wide(overload, args, kwargs, expected):
    """aten's result on the inputs in float64, cast back to the result's dtype (None where it cannot be)."""
    def widen(value):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.double()
        if isinstance(value, (list, tuple)):
            return type(value)(widen(v) for v in value)
        return value
    try:
        wide = overload(*widen(args), **{k: widen(v) for k, v in kwargs.items()})
    except Exception:  # noqa: BLE001 - no float64 run of this op
        return None
    if isinstance(wide, torch.Tensor) and isinstance(expected, torch.Tensor):
        return wide.to(expected.dtype)
    return None


def _on(value, device: str):
    if isinstance(value, torch.Tensor):
        return value.clone().to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_on(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _on(v, device) for k, v in value.items()}
    return value


def _check_key(kernel: PackagedKernel, here: Stack) -> str:
    return f"{kernel.sha256} {here.said()}"


def _checks_file(name: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bbagent-packages" / name / "checks.json"


def _recorded(name: str) -> dict:
    try:
        return json.loads(_checks_file(name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _record(name: str, key: str, result: Checked) -> None:
    """Keep a self-test's result for later processes; where the cache cannot be written, this
    process keeps it and says so."""
    path = _checks_file(name)
    rows = {**_recorded(name), key: {**asdict(result), "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        _say(f"{name}: the self-test's result is not kept for later processes ({path}: {exc.strerror})")


def _device(device: str | None) -> str:
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in DISPATCH_KEYS:
        raise PackageError(f"device must be one of {', '.join(DISPATCH_KEYS)} (got {device!r})")
    return device


def _interpreted() -> None:
    try:
        interpret_triton()
    except KernelImportError as exc:
        raise PackageError(str(exc)) from None


_SAID: set[str] = set()


def _say(line: str) -> None:
    """A line on stderr, once per process."""
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


class CompiledLowering:
    """Until ``uninstall``: ``direct``'s overloads are traced as their kernels' launches where they
    can be, and inductor lowers every call of ``overloads`` left as a call of the overload (which
    reaches the served kernel) instead of its own code; ``fingerprint`` keys the graphs it compiles
    apart from those compiled without it (inductor's caches read its custom pass's uuid)."""

    def __init__(self, overloads: list, direct: DirectServing, fingerprint: str):
        self.overloads, self.direct = overloads, direct
        self.fingerprint = f"{fingerprint};direct={','.join(direct.names)}"
        self._saved: list = []
        self.left_out: dict[str, str] = {}

    def said(self) -> dict[str, str]:
        names = {kernel.op for kernel in self.direct.kernels.values()}
        return {**{op: self.direct.under_compile(op) or "" for op in names},
                **{op_name(overload): "an extern call out of inductor's code"
                   for overload in self.overloads if op_name(overload) not in names}}

    def install(self) -> None:
        from torch._inductor import config, decomposition, lowering
        self.left_out = self.direct.install()
        for overload in self.overloads:
            removed = [(table, table.pop(overload)) for table in (decomposition.decompositions,
                                                                  decomposition.fast_random_decomps())
                       if overload in table]
            self._saved.append((overload, lowering.lowerings.get(overload), removed,
                                overload in lowering.needs_realized_inputs))
            lowering.lowerings.pop(overload, None)
            lowering.register_lowering(overload, type_promotion_kind=None)(
                lowering.fallback_handler(overload, add_to_fallback_set=False))
            lowering.add_needs_realized_inputs(overload)
        self._before = config.post_grad_custom_pre_pass
        self._pass = _keyed(self.fingerprint, self._before)
        config.post_grad_custom_pre_pass = self._pass

    def uninstall(self) -> None:
        from torch._inductor import config, lowering
        self.direct.uninstall()
        for overload, lowered, removed, realized in reversed(self._saved):
            lowering.lowerings.pop(overload, None)
            if lowered is not None:
                lowering.lowerings[overload] = lowered
            for table, decomposed in removed:
                table[overload] = decomposed
            if not realized:
                lowering.needs_realized_inputs.discard(overload)
        self._saved = []
        if config.post_grad_custom_pre_pass is self._pass:
            config.post_grad_custom_pre_pass = self._before


def _keyed(fingerprint: str, before):
    """A post-grad pass that changes nothing but names the served kernels in inductor's cache key;
    the pass that was there (``before``) runs as before. Made when installed: importing inductor
    imports triton, which must wait for the interpreter's choice."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class Keyed(CustomGraphPass):
        def __call__(self, graph) -> None:
            if before is not None:
                before(graph)

        def uuid(self) -> bytes:
            earlier = before.uuid() if before is not None and hasattr(before, "uuid") else b""
            return hashlib.sha256(f"{fingerprint}|".encode() + bytes(earlier or b"")).digest()
    return Keyed()
