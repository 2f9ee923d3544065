"""Run PyTorch on the approved kernels: ``bbagent.enable()`` / ``disable()``.

Each served overload is registered as aten's implementation for one dispatch key (CUDA by
default) through ``torch.library``, overload by overload (``harness.overriding``): aten's own
kernel answers inputs the kernel was not tested on (a leading dtype outside meta.json's
``dtypes``) and those it raises on, and every call is counted.

On the CPU dispatch key the kernels run under Triton's interpreter (``agent.serving.load``).

Which kernels: per operator the newest approved, non-stale version (``include_unreviewed``: the
current one unless rejected), and of its overloads, on a GPU, only those measured at least as fast
as eager (``include_slower``: all). On the CPU every overload of the version is served: the CPU is
the interpreter, where nothing is timed, so there is no speed to gate on. Everything left out is
listed with the reason in ``Enabled.skipped``; an overload of an approved kernel left out is also
said once on stderr (``SLOWER_HINT`` names the option that serves it anyway).
"""
from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bbagent.agent.errors import UsageError
from bbagent.agent.review.meta import KernelMeta
from bbagent.agent.serving.load import import_kernel, interpret_triton
from bbagent.harness.interface import Installed

DISPATCH_KEYS = {"cuda": "CUDA", "cpu": "CPU"}
SLOWER_HINT = "include_slower=True serves it anyway"  # the Python spelling; commands say their flag
_SAID: set[str] = set()


@dataclass
class ServedOverload:
    op: str
    version: int
    folder: str
    speedup: float | None
    calls: int = 0
    fallbacks: Counter = field(default_factory=Counter)

    def row(self) -> dict:
        return {"op": self.op, "version": self.version, "folder": self.folder, "speedup": self.speedup,
                "calls": self.calls, "fallbacks": dict(self.fallbacks)}


class Enabled(Installed):
    """What ``enable`` installed. A context manager: leaving the block disables it. ``compiled``
    (``agent.serving.compiled``) routes compiled graphs to the kernels it serves; ``not_compiled``
    says, per served overload left to inductor under torch.compile, why."""

    def __init__(self, library, served: dict[str, ServedOverload], skipped: dict[str, str], dispatch_key: str,
                 slower: set[str] | None = None, compiled=None, not_compiled: dict[str, str] | None = None):
        self.library, self.served, self.skipped, self.dispatch_key = library, served, skipped, dispatch_key
        self.slower = slower or set()  # of the skipped, those an approved kernel serves once slower ones are asked for
        self.compiled, self.not_compiled = compiled, not_compiled or {}

    def calls(self) -> dict[str, int]:
        """Calls served by a generated kernel, per overload."""
        return {op: s.calls for op, s in self.served.items()}

    def compiled_calls(self) -> dict[str, int]:
        """Calls of a generated kernel through its opaque twin from code torch.compile generated,
        per overload and region answer (counted in ``calls`` too)."""
        return {op: self.compiled.calls[op] for op in self.compiled.names} if self.compiled is not None else {}

    def alone_over_compile(self) -> dict[str, float]:
        """Per overload and region answer served under torch.compile: its speedup over torch.compile
        measured on its own (its problem, its shapes), where it was measured."""
        if self.compiled is None:
            return {}
        return {name: over for name, over in {**self.compiled.over_inductor,
                                              **{a.key: a.over_inductor for a in self.compiled.region_answers.values()}}.items()
                if over is not None}

    def compiled_sites(self) -> dict[str, int]:
        """Per overload and region answer: its calls traced into compiled graphs as its Triton
        launches, which inductor's code then launches itself (``agent.serving.direct``; no Python
        runs them, so they are counted where they are compiled, not where they run)."""
        return self.compiled.sites() if self.compiled is not None else {}

    def regions(self) -> dict[str, str]:
        """Each answer to a region problem (``bbagent regions``): how it is served under
        torch.compile (``CompiledServing.region_status``), or why not."""
        served = ({key: self.compiled.region_status(key) for key in self.compiled.region_keys.values()}
                  if self.compiled is not None else {})
        return {**{key: why for key, why in self.not_compiled.items() if key not in self.served}, **served}

    def report(self) -> list[dict]:
        compiled, sites = self.compiled_calls(), self.compiled_sites()
        return [{**s.row(), "compiled_calls": compiled.get(s.op), "compiled_sites": sites.get(s.op),
                 "under_compile": (self.compiled.under_compile(s.op) if self.compiled is not None else None)
                 or self.not_compiled.get(s.op)}
                for s in self.served.values()]

    def forget(self) -> None:
        global _current
        if _current is self:
            _current = None


_current: Enabled | None = None


def current() -> Enabled | None:
    return _current


def enable(root: Path, *, include_unreviewed: bool = False, include_slower: bool = False, device: str = "cuda",
           ops: list[str] | None = None, direct: bool = True, plan=None) -> Enabled:
    """Register the chosen kernels under ``root/generated_kernels`` for ``device``'s dispatch key
    (module docstring). ``ops`` limits it to these overloads and region answers (by key). A CPU
    kernel runs under Triton's interpreter (``agent.serving.load``). ``direct``: on a GPU,
    inductor's code launches the kernels where it can (``agent.serving.direct``); else each is an
    opaque call. ``plan`` (``agent.serving.gate.ServingPlan``): exactly what the whole-model gate
    served, every other kernel left out with the gate's reason (its speed gates are the plan's)."""
    global _current
    import torch
    from bbagent.harness.interface import resolve_op, serving
    if device not in DISPATCH_KEYS:
        raise UsageError(f"device must be one of {', '.join(DISPATCH_KEYS)} (got '{device}')")
    if device == "cpu":
        interpret_triton()  # before anything here imports triton
    if _current is not None:
        raise UsageError("bbagent kernels are already enabled: call bbagent.disable() first")
    if not hasattr(torch.library, "get_kernel"):
        raise UsageError(f"bbagent.enable needs torch.library.get_kernel (torch 2.9 or newer; this is "
                         f"{torch.__version__}) to keep aten's kernel as the fallback")
    if plan is not None:
        ops, include_slower = None, True  # the plan was measured in the model: it is the gate
    chosen, skipped, gated, refused = to_serve(root, include_unreviewed, include_slower or device == "cpu", ops)
    if plan is not None:
        skipped.update({op: _left_out_by(plan, op) for op, _, _ in chosen if op not in plan.served})
        chosen, gated = [c for c in chosen if c[0] in plan.served], set()
    for op in sorted(gated):  # an approved kernel not served: said once per process, on stderr
        _say(f"bbagent.enable: {op} is not served: {skipped[op]}; {SLOWER_HINT}")
    for op in sorted(refused):
        _say(f"bbagent.enable: {op} is not served: {skipped[op]}")
    dispatch_key = DISPATCH_KEYS[device]
    library = torch.library.Library("aten", "IMPL")
    served: dict = {}
    kernels: dict[Path, Callable | UsageError] = {}
    functions: dict = {}
    try:
        for op, version, speed in chosen:
            if version.folder not in kernels:
                try:
                    kernels[version.folder] = import_kernel(version.kernel, f"{version.meta.op}_v{version.number}", device)
                except UsageError as exc:  # this kernel alone is left to aten
                    kernels[version.folder] = exc
            kernel = kernels[version.folder]
            if isinstance(kernel, UsageError):
                skipped[op] = str(kernel)
                _say(f"bbagent.enable: {op} is not served: {skipped[op]}")
                continue
            record = ServedOverload(op, version.number, str(version.folder), speed)
            _register(library, op, version.meta, kernel, record, dispatch_key)
            functions[op] = serving(kernel, resolve_op(version.meta.written_for), resolve_op(op),
                                    traced=True)
            served[op] = record
        regions, unserved_regions = region_answers(root, device, include_unreviewed, include_slower, ops)
        if plan is not None:
            unserved_regions.update({a.key: _left_out_by(plan, a.key) for a in regions.values()
                                     if a.key not in plan.served})
            regions = {h: a for h, a in regions.items() if a.key in plan.served}
        compiled, not_compiled = _under_compile(served, {op: version for op, version, _ in chosen}, device,
                                                include_slower, regions, functions if direct else None)
        not_compiled.update(unserved_regions)
    except BaseException:
        library._destroy()
        raise
    _current = Enabled(library, served, skipped, dispatch_key, gated, compiled, not_compiled)
    return _current


def _left_out_by(plan, name: str) -> str:
    return (f"the whole-model gate left it out of {plan.model} ({plan.mode}): "
            f"{plan.left_out.get(name, 'not a candidate when the plan was measured')}")


def region_answers(root: Path, device: str, include_unreviewed: bool, include_slower: bool,
                   only: list[str] | None = None) -> tuple[dict, dict]:
    """The answers to region problems (``bbagent regions``) compiled code may call, by hash
    (``agent.serving.compiled.RegionAnswer``), and why each other one may not: not approved (or
    rejected, with ``include_unreviewed``), its folder or file refused, the problem file gone or
    changed since, or, on a GPU, not measured at least as fast as inductor (``include_slower``:
    served anyway)."""
    from bbagent.agent.review.catalog import catalogue
    from bbagent.agent.serving.compiled import RegionAnswer
    from bbagent.agent.serving.load import import_module
    from bbagent.harness.interface import in_words, program_module
    answers, refused = {}, {}
    for entry in catalogue(root)[0]:
        current = entry.current
        key = current.meta.op
        try:
            posed = current.kind.region(current)
        except UsageError as exc:
            refused[key] = str(exc)
            continue
        if posed is None:
            continue  # an operator's kernel (served below) or a KernelBench answer (bbagent.load_program)
        if only is not None and key not in only:
            refused[key] = "not in --ops"
            continue
        version = entry.served(include_unreviewed)
        if version is None or (entry.current.unusable and version.folder == entry.current.folder):
            refused[key] = entry.current.unusable or "no approved, non-stale version"
            continue
        try:  # the copy kept beside the answer, else the file it was posed from (the current one's read above)
            problem = posed if version is current else version.kind.region(version)
        except UsageError as exc:
            refused[key] = str(exc)
            continue
        if problem is None:
            refused[key] = f"the problem v{version.number} answers is no region's"
            continue
        over = version.meta.performance.speedup_over("inductor")
        if device != "cpu" and not include_slower and (over is None or over < 1.0):
            refused[key] = (f"measured {over:.3g}x torch.compile" if over is not None else
                            "not timed against torch.compile on a GPU")
            continue
        try:
            module = program_module(problem)
            model_new = getattr(import_module(version.kernel, key.replace("/", "_"), device), "ModelNew")
        except Exception as exc:  # noqa: BLE001 - this answer alone is left to inductor, with why
            refused[key] = f"cannot be loaded: {in_words(exc)}"
            continue
        answers[module.REGION_HASH] = RegionAnswer(key=key, hash=module.REGION_HASH, model_new=model_new, problem=module,
                                                   sha256=served_digest(version.kernel), over_inductor=over)
    return answers, refused


def served_digest(kernel: Path) -> str:
    """What inductor's caches key a served file by: its digest and that of the Helion configs beside
    it, as they are now. A meta recorded without the judged digest, or a table approved again, must
    not meet a graph compiled for another file (the direct path traces the kernel into the graph)."""
    from bbagent.agent.review.lifecycle import file_sha256
    from bbagent.harness.interface import CONFIGS_FILE
    return "+".join(digest or "none" for digest in (file_sha256(kernel), file_sha256(kernel.with_name(CONFIGS_FILE))))


def _under_compile(served: dict[str, ServedOverload], versions: dict, device: str, include_slower: bool,
                   regions: dict | None = None, functions: dict | None = None):
    """The ``CompiledServing`` of the served overloads that torch.compile's code may call instead of
    its own (installed), and why each other served overload is left to inductor. On a GPU an
    overload goes there only where its kernel was measured at least as fast as inductor's code
    (``include_slower``: all), and inductor's code launches its kernel itself where it can
    (``agent.serving.direct``; ``functions``: each served overload's function for tracing, None: none
    does); on the CPU, the interpreter, where nothing is timed, every one does, as an opaque call."""
    from bbagent.agent.serving.compiled import CompiledServing
    from bbagent.agent.serving.direct import DirectKernel
    from bbagent.harness.interface import resolve_op
    chosen, not_compiled = {}, {}
    over_inductor = {}
    for op in served:
        meta = versions[op].meta
        over = meta.performance.speedup_over("inductor") if op == meta.written_for else None
        over_inductor[op] = over
        if device == "cpu" or include_slower or (over is not None and over >= 1.0):
            chosen[op] = resolve_op(op)
        else:
            not_compiled[op] = (f"measured {over:.3g}x torch.compile" if over is not None else
                                "not timed against torch.compile (bbagent bench --op " + op +
                                " --baseline eager,inductor on a GPU)")
    direct = []
    if device != "cpu" and functions is not None:
        for op, overload in chosen.items():
            direct.append(DirectKernel(op, overload, functions[op], frozenset(tested_dtypes(versions[op].meta)), device))
    fingerprint = ",".join(sorted(f"{op}={served_digest(versions[op].kernel)}" for op in chosen) +
                           sorted(f"{a.key}={a.sha256}" for a in (regions or {}).values()))
    compiled = CompiledServing(chosen, regions, direct, fingerprint, inline_regions=device != "cpu" and functions is not None,
                               over_inductor={op: over_inductor[op] for op in chosen})
    for op in chosen:
        if resolve_op(op) not in compiled.twins and op not in compiled.direct.names:
            not_compiled[op] = "an in-place or out= overload: compiled code calls its functional overload"
    compiled.install()
    return compiled, not_compiled


def to_serve(root: Path, include_unreviewed: bool, include_slower: bool,
           ops: list[str] | None) -> tuple[list, dict, set, set]:
    """(overload, version, speedup) for every overload to serve, every one left out with why, those
    of them left out only for their speed (a usable version exists), and those refused because a
    kernel folder is broken or an approved file was modified since its approval."""
    from bbagent.agent.review.catalog import catalogue
    chosen, skipped, gated, refused = [], {}, set(), set()
    kernels, wrecks = catalogue(root)
    for entry in kernels:
        version = entry.served(include_unreviewed)
        unusable = entry.current.unusable
        if unusable and (version is None or version.folder == entry.current.folder):
            for op in entry.current.overloads:
                if ops is None or op in ops:
                    skipped[op] = unusable
                    refused.add(op)
            continue
        if version is None:
            statuses = ", ".join(f"v{v.number} {v.status}" for v in entry.versions)
            for op in entry.current.overloads:
                skipped[op] = f"no {'usable' if include_unreviewed else 'approved, non-stale'} version ({statuses})"
            continue
        speeds = version.meta.overload_speeds()
        for op in version.overloads:
            if ops is not None and op not in ops:
                continue
            speed = speeds.get(op)
            if not include_slower and (speed is None or speed < 1.0):
                skipped[op] = (f"measured {speed:.3g}x eager" if speed is not None else
                               "not timed as served (bbagent bench --op " + op + " on a GPU)")
                gated.add(op)
                continue
            chosen.append((op, version, speed))
    for wreck in wrecks:
        skipped[wreck.folder.name] = f"the kernel folder {wreck.folder} is broken: {wreck.reason}"
        refused.add(wreck.folder.name)
    return chosen, skipped, gated, refused


def _say(line: str) -> None:
    """A line on stderr, once per process."""
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


def disable() -> dict[str, int] | None:
    """Restore aten's kernels; returns the calls served per overload (None if nothing was enabled)."""
    if _current is None:
        return None
    enabled = _current
    enabled.disable()
    return enabled.calls()


def _register(library, op: str, meta: KernelMeta, kernel, record: ServedOverload, dispatch_key: str) -> None:
    from bbagent.harness.interface import resolve_op, serving
    from bbagent.harness.interface import override
    overload = resolve_op(op)
    override(library, overload, serving(kernel, resolve_op(meta.written_for), overload), tested_dtypes(meta),
             dispatch_key, record)


def tested_dtypes(meta: KernelMeta) -> set:
    """The torch dtypes meta.json says the kernel was tested on (empty: not recorded)."""
    from bbagent.harness.interface import dtypes_named
    return dtypes_named(meta.dtypes)

