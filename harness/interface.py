"""The harness as agent/ sees it: the one module of harness/ that agent/ imports.

What is here, by purpose (each name is defined in the module its import below names, imported when
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

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the table of names: real imports to a type checker and to import-linter, lazy at run time
    from bbagent.harness.problem import (
        OperatorProblem, operator_problem, problem_to_test, served_problem, ProblemError, ProgramProblem,
        program_problem, PROGRAMS_FOLDER, program_module, program_key, problem_number
    )
    from bbagent.harness.request import EvaluationRequest, default_device
    from bbagent.harness.evaluate import evaluate_kernel, prepare_suite, adopt_remote_verdict, KernelFileError
    from bbagent.harness.timing.options import TimingOptions
    from bbagent.harness.timing.profile import profile_sides
    from bbagent.harness.timing.program_floor import floor_us, device_ceilings
    from bbagent.harness.sandbox.parent.watch import Limits
    from bbagent.harness.sandbox.parent.environment import SetupError, physical_gpu, start_early, triton_cache_dir
    from bbagent.harness.sandbox.parent.gpu_share import GpuShare
    from bbagent.harness.sandbox.parent.machine_gpu import machine_gpu, total_memory
    from bbagent.harness.nvml import NvmlUnavailable, open_gpu
    from bbagent.harness.ops import (
        UnknownOpError, resolve_op, describe, op_name, packet_name, value_mode, tensor_arguments
    )
    from bbagent.harness.adapters import AdapterError, serving
    from bbagent.harness.variants import functional_of, out_arguments, overloads, variant_family
    from bbagent.harness.program_facts import ProgramFacts, describe_program
    from bbagent.harness.verdict import (
        Verdict, Summary, TestCounts, Variant, Performance, PerformanceSummary, DeviceYardsticks, NcuReport, NcuSide,
        Launch, TimingStats, count_text, short_count
    )
    from bbagent.harness.error_kinds import ERROR_KINDS
    from bbagent.harness.checks.policy import TOLERANCE_POLICY, LIBRARY_POLICIES
    from bbagent.harness.dsl import DSLS, HELION, TRITON, Dsl
    from bbagent.harness.helion_configs import CONFIGS_FILE, ConfigTable
    from bbagent.harness.checks.compare import TOLERANCES
    from bbagent.harness.checks.allowed import ALLOWED, SEED_DRAW, is_allowed
    from bbagent.harness.checks.reference import is_cuda_error
    from bbagent.harness.suite.build import FLOAT_DTYPES, SAMPLE_DTYPES, build_suite
    from bbagent.harness.packaged import MANIFEST as PACKAGE_MANIFEST, Manifest, PackagedKernel, Stack, file_sha256
    from bbagent.harness.kernel_import import KernelImportError, import_module as import_kernel_module, interpret_triton
    from bbagent.harness.overriding import Installed, override, dtypes_named, in_words
    from bbagent.harness.launches import (
        LAUNCHED, OPAQUE, UNRECORDED, DirectKernel, DirectServing, launches_traced, path_said, untraceable
    )
    from bbagent.harness.suite.cache import suite_cache_dir
    from bbagent.harness.coverage import SUITES, list_ops, variant_counts
    from bbagent.harness.traces import DTYPE_NAMES, TensorSpec, TraceCall, TraceFormatError, parse_call_line, load_calls
    from bbagent.harness.inputs import materialize, tensors_in
    from bbagent.harness.layouts import CHANNELS_LAST_FAMILIES, channels_last_call
    from bbagent.harness.parse import parse
    from bbagent.harness.fingerprint import harness_fingerprint, triton_version
    from bbagent.harness.device_probe.facts import PROBE_FORMAT, DeviceFacts
    from bbagent.harness.timing.baselines import INDUCTOR_MODES, parse_engines
    from bbagent.harness.timing.ncu import find_ncu
    from bbagent.harness.timing.reference_cache import ReferenceCache, FILE_NAME as TIMING_CACHE_FILE
    from bbagent.harness.workdirs import (
        size_of, make as make_workdir, orphaned as orphaned_workdirs, remove_orphaned as remove_orphaned_workdirs
    )
    from bbagent.harness.opinfo_index import load as opinfo_listing


def _table() -> dict[str, tuple[str, str]]:
    """Public name -> (its module, its name there), read from the imports under TYPE_CHECKING above,
    so that the one list serves the type checker, the import rules and ``__getattr__`` alike."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.asname or alias.name: (node.module, alias.name)
            for node in block.body if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names}


_HOME_OF = _table()
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

    def prepare(self, request: EvaluationRequest) -> str:
        """Build the request's suite ahead of its first evaluation: "cached", "built", or why not."""
        ...

    def evaluate(self, request: EvaluationRequest, kernel_path: Path) -> Verdict:
        """The Verdict of the kernel file under the request."""
        ...


class _Here:
    """Evaluations in this process's own sandbox (``harness.evaluate``)."""

    def prepare(self, request: EvaluationRequest) -> str:
        from bbagent.harness.evaluate import prepare_suite
        return prepare_suite(request)

    def evaluate(self, request: EvaluationRequest, kernel_path: Path) -> Verdict:
        from bbagent.harness.evaluate import evaluate_kernel
        return evaluate_kernel(request, kernel_path)


HERE: Evaluator = _Here()
