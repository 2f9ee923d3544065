"""The harness as agent/ sees it: the one module of harness/ that agent/ imports.

What is here, by purpose (each name is defined in the module named beside it, imported when
first used, so that importing this module costs nothing: every command pays for its imports):

* the problem and the request: ``OperatorProblem``, ``operator_problem``, ``problem_to_test``,
  ``UnknownOpError``, ``AdapterError``; a program's ``ProgramProblem``, ``program_problem``,
  ``ProblemError`` and what it computes (``describe_program``, ``ProgramFacts``) and its floor on the GPU
  (``floor_us``, ``device_ceilings``); ``EvaluationRequest``, ``TimingOptions``, ``Limits``,
  ``default_device``;
* evaluating: the ``Evaluator`` protocol (prepare, evaluate) and ``HERE``, the one that runs on
  this machine; ``evaluate_kernel``, ``prepare_suite``, ``adopt_remote_verdict``; the errors that are
  the caller's (``KernelFileError``, ``SetupError``); the GPU share and pinning (``GpuShare``,
  ``physical_gpu``, ``open_gpu``, ``NvmlUnavailable``, ``start_early``);
* the Verdict and its parts, and how they read (``count_text``, ``short_count``, ``ERROR_KINDS``);
* what prompts and reports say of an operator and of the device: its schema and family, OpInfo
  dtypes, traces, tolerances, the sandbox's allowances, ``DeviceFacts``;
* serving an approved kernel (``serving``) and the harness's folders and caches.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

_HOMES = {
    "bbagent.harness.problem": ("OperatorProblem", "operator_problem", "problem_to_test", "served_problem",
                                "ProblemError", "ProgramProblem", "program_problem", "PROGRAMS_FOLDER", "program_module", "program_key", "problem_number"),
    "bbagent.harness.request": ("EvaluationRequest", "default_device"),
    "bbagent.harness.evaluate": ("evaluate_kernel", "prepare_suite", "adopt_remote_verdict", "KernelFileError"),
    "bbagent.harness.timing.options": ("TimingOptions",),
    "bbagent.harness.timing.profile": ("profile_sides",),
    "bbagent.harness.timing.program_floor": ("floor_us", "device_ceilings"),
    "bbagent.harness.sandbox.parent.watch": ("Limits",),
    "bbagent.harness.sandbox.parent.environment": ("SetupError", "physical_gpu", "start_early", "triton_cache_dir"),
    "bbagent.harness.sandbox.parent.gpu_share": ("GpuShare",),
    "bbagent.harness.sandbox.parent.machine_gpu": ("machine_gpu", "total_memory"),
    "bbagent.harness.nvml": ("NvmlUnavailable", "open_gpu"),
    "bbagent.harness.ops": ("UnknownOpError", "resolve_op", "describe", "op_name", "packet_name", "value_mode",
                            "tensor_arguments"),
    "bbagent.harness.adapters": ("AdapterError", "serving"),
    "bbagent.harness.variants": ("functional_of", "out_arguments", "overloads", "variant_family"),
    "bbagent.harness.program_facts": ("ProgramFacts", "describe_program"),
    "bbagent.harness.verdict": ("Verdict", "Summary", "TestCounts", "Variant", "Performance", "PerformanceSummary",
                                "DeviceYardsticks", "NcuReport", "NcuSide", "Launch", "count_text", "short_count"),
    "bbagent.harness.error_kinds": ("ERROR_KINDS",),
    "bbagent.harness.checks.policy": ("TOLERANCE_POLICY", "LIBRARY_POLICIES"),
    "bbagent.harness.checks.compare": ("TOLERANCES",),
    "bbagent.harness.checks.allowed": ("ALLOWED", "SEED_DRAW", "is_allowed"),
    "bbagent.harness.checks.reference": ("is_cuda_error",),
    "bbagent.harness.suite.build": ("FLOAT_DTYPES", "SAMPLE_DTYPES"),
    "bbagent.harness.suite.cache": ("suite_cache_dir",),
    "bbagent.harness.coverage": ("SUITES", "list_ops", "variant_counts"),
    "bbagent.harness.traces": ("DTYPE_NAMES", "TensorSpec", "TraceCall", "TraceFormatError", "parse_call_line",
                               "load_calls"),
    "bbagent.harness.inputs": ("materialize", "tensors_in"),
    "bbagent.harness.layouts": ("CHANNELS_LAST_FAMILIES", "channels_last_call"),
    "bbagent.harness.parse": ("parse",),
    "bbagent.harness.fingerprint": ("harness_fingerprint", "triton_version"),
    "bbagent.harness.device_probe.facts": ("PROBE_FORMAT", "DeviceFacts"),
    "bbagent.harness.timing.baselines": ("INDUCTOR_MODES", "parse_engines"),
    "bbagent.harness.timing.ncu": ("find_ncu",),
    "bbagent.harness.timing.reference_cache": ("ReferenceCache",),
    "bbagent.harness.workdirs": ("size_of",),
}
# names said more plainly here than in their modules: public name -> (module, its name there)
_RENAMED = {"opinfo_listing": ("bbagent.harness.opinfo_index", "load"),
            "TIMING_CACHE_FILE": ("bbagent.harness.timing.reference_cache", "FILE_NAME"),
            "make_workdir": ("bbagent.harness.workdirs", "make"),
            "orphaned_workdirs": ("bbagent.harness.workdirs", "orphaned"),
            "remove_orphaned_workdirs": ("bbagent.harness.workdirs", "remove_orphaned")}
_HOME_OF = {**{name: (module, name) for module, names in _HOMES.items() for name in names}, **_RENAMED}
__all__ = ["Evaluator", "HERE", *_HOME_OF]


def __getattr__(name: str):
    """A public name of the harness, imported from its module on first use."""
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _HOME_OF[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


class Evaluator(Protocol):
    """Where evaluations run: this machine (``HERE``), a batch's GPUs, a Ray cluster."""

    def prepare(self, request) -> str:
        """Build the request's suite ahead of its first evaluation: "cached", "built", or why not."""

    def evaluate(self, request, kernel_path: Path):
        """The Verdict of the kernel file under the request."""


class _Here:
    """Evaluations in this process's own sandbox (``harness.evaluate``)."""

    def prepare(self, request) -> str:
        from bbagent.harness.evaluate import prepare_suite
        return prepare_suite(request)

    def evaluate(self, request, kernel_path: Path):
        from bbagent.harness.evaluate import evaluate_kernel
        return evaluate_kernel(request, kernel_path)


HERE: Evaluator = _Here()
