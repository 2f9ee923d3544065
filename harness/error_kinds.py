"""Every ``error_kind`` a Verdict or one of its tests can carry, with what it means: the names the
child reports, the parent assembles, the feedback explains and ``bbagent schema verdict`` lists."""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

ERROR_KINDS = {
    "import_error": "the kernel file raised while being imported (syntax error, bad import, ...)",
    "missing_entry_point": "the kernel file defines no callable named 'kernel' (a program's answer: no ModelNew)",
    "weights_mismatch": "a program's ModelNew cannot take the reference Model's weights (its state_dict)",
    "compile_error": "Triton failed to compile a kernel",
    "exception": "the kernel raised an exception",
    "timeout": "the evaluation ran past its wall-clock limit",
    "compile_budget": "compiling and autotuning the kernel used up the evaluation's compile budget (not a hang, "
                      "not test time): fewer or cheaper configs, or fewer specialisations",
    "crash": "the process running the kernel died (signal or exit)",
    "cuda_error": "the kernel broke the CUDA context (illegal memory access, device-side assert, ...)",
    "cuda_oom": "the kernel ran out of GPU memory",
    "host_oom": "the process running the kernel used more host memory than allowed",
    "exit": "the kernel ended its process (sys.exit, os._exit)",
    "output_flood": "the kernel printed more output than allowed",
    "process_spawn": "the kernel started or forked a process (or too many of them)",
    "network": "the kernel tried to use the network",
    "forbidden_write": "the kernel wrote outside its private working directory",
    "secret_read": "the kernel tried to read credentials or another process's environment",
    "forbidden_read": "the kernel tried to read a file outside what the sandbox shows it",
    "no_triton_launch": "no Triton kernel was launched",
    "guard": "the kernel broke a rule (e.g. called PyTorch compute)",
    "not_plain_tensor": "returned or wrote something other than a plain torch.Tensor (a subclass, a Parameter, an "
                        "object with its own __torch_function__ or __torch_dispatch__)",
    "wrong_type": "returned a value of the wrong type",
    "wrong_structure": "returned the wrong number of values",
    "wrong_shape": "returned a tensor of the wrong shape",
    "wrong_dtype": "returned a tensor of the wrong dtype",
    "wrong_device": "returned a tensor on the wrong device",
    "mismatch": "values differ from the reference beyond tolerance",
    "integer_through_float": "right on small integers, wrong on integers past a float's exact range (2**24 for "
                             "float32, 2**53 for float64) or at the ends of the dtype's range: integers computed "
                             "through a float type (or another integer type)",
    "nan_mismatch": "NaN positions differ from the reference",
    "wrong_strides": "returned a tensor with other strides (for ops whose values are unspecified)",
    "distribution_mismatch": "random values that do not follow the reference draws' distribution",
    "generator_misuse": "random values that do not follow the generator (seed, state)",
    "input_mutated": "modified an input it must not modify",
    "mutation_mismatch": "an argument the overload writes holds wrong values",
    "wrong_alias": "did not return the argument the overload must return",
    "not_from_launches": "the result is not what the call's own Triton launches compute: replayed on new input "
                         "values, the recorded launches did not reproduce it (values made by another library or on "
                         "the host, behind a decoy launch)",
    "repeated_call_mismatch": "right in every test, wrong when called thousands of times in a row on refilled inputs "
                              "(results kept between calls, behaviour that changes with the call count)",
    "graph_mismatch": "right in every test, wrong when captured in a CUDA graph and replayed on new input values",
    "timing_mismatch": "right in every test, wrong when run again with new values after timing",
    "implausible_timing": "a measurement the device cannot produce (faster than its memory allows, shorter than a "
                          "launch, more time than passed): the timing is void",
    "tampering": "changed what the harness judges or times with (torch, Triton, the standard library, the harness, "
                 "torch's global settings or aten's kernels)",
    "stray_thread": "started a thread, or left one running the kernel's code",
    "side_stream": "ran work on a CUDA stream other than the call's current stream",
    "reaches_harness": "reached into the process's frames or objects (frames, tracebacks, the garbage collector)",
    "native_code": "loaded native code of its own (ctypes, a compiled extension)",
    "reference_error": "the aten reference itself rejected the test's input (not counted as a failure)",
    "no_tests": "no test could be run for this operator",
    "worker_error": "the evaluation harness itself failed",
}
if TYPE_CHECKING:  # a checker cannot read a Literal built from the table; pydantic validates it
    ErrorKind = str
else:
    ErrorKind = Literal[tuple(ERROR_KINDS)]
