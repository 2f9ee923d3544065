"""The ``bbagent`` command line.

Results go to stdout, diagnostics (progress, warnings, errors) to stderr. Exit codes: 0 success
(kernel accepted / verdict pass); 1 the kernel failed (every round failed / verdict fail); 2 usage
error (unknown op, missing file, bad option, unusable --root, no CUDA for --device cuda, OpInfo
unavailable); 3 provider error (missing or rejected key, retries exhausted); 70 internal error (a
bug in bbagent: the message names the file holding the traceback); 130 interrupted.

Imports are lazy: ``bbagent --help`` and ``--version`` never load torch.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_PROVIDER, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130
PROVIDERS = ("openai", "anthropic", "replay")


class UsageError(Exception):
    """A usage error: the message says what to change."""


def version() -> str:
    from importlib import metadata
    try:
        return metadata.version("bbagent")
    except metadata.PackageNotFoundError:
        return "0+unknown (not installed)"


# --- the parser ----------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    from harness.policy import TOLERANCE_POLICY
    parser = argparse.ArgumentParser(prog="bbagent", description="Generate and test Triton kernels for aten operators.")
    parser.add_argument("--version", action="version", version=f"bbagent {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = sub.add_parser("generate", help="ask an LLM for a kernel, test it, feed failures back",
                         description="Ask an LLM for a Triton kernel for OP, test it, and feed failures back "
                                     "for up to --rounds rounds. An accepted kernel goes to "
                                     "ROOT/generated_kernels/OP/; every run is recorded in ROOT/runs/.")
    _add_generate_options(gen)

    pr = sub.add_parser("prompt", help="print the prompt bbagent would send for an operator (no model call)",
                        description="Print the first message 'bbagent generate' would send with the same options "
                                    "(for an in-place or out= overload: its functional overload's prompt, unless "
                                    "--exact-overload), without calling any model. With --round-feedback, print "
                                    "the feedback message that a round with that Verdict would send next.")
    _add_generate_options(pr)
    pr.add_argument("--round-feedback", type=Path, metavar="VERDICT.json",
                    help="a Verdict (runs/<run>/round-N/verdict.json or `bbagent eval --json` output)")
    pr.add_argument("--json", action="store_true", help="print op, family, template and text as one JSON object")

    ev = sub.add_parser("eval", help="test one kernel file against an operator",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Run the kernel in FILE against OP's tests in a separate process and print "
                                    "the Verdict.\n\nComparison policy: " + TOLERANCE_POLICY +
                                    "\n\nExit status: 0 pass, 1 fail, 2 usage error.")
    ev.add_argument("--op", required=True, help="exact aten overload, e.g. aten.relu.default or aten.relu_.default")
    _add_kernel_options(ev)
    ev.add_argument("--family", action="store_true",
                    help="test every overload of OP's family (functional, in-place, out=) with the one kernel")
    ev.add_argument("--json", action="store_true", help="print the Verdict as one JSON object")
    _add_root(ev)
    _add_eval_options(ev)

    bench = sub.add_parser("bench", help="time a kernel against eager aten and write benchmark records",
                           description="Test the kernel, then time it and eager aten on OP's real-model trace "
                                       "shapes (GPU only: L2 flushed per repetition, reference and kernel "
                                       "interleaved, CUDA-graph replay where both can be captured). Writes one "
                                       "record per (input, engine) in the benchmark log schema v0.1 to "
                                       "ROOT/runs/<run_id>/bench.jsonl and prints a table. On the CPU the "
                                       "records carry correctness only. Exit status: 0 pass, 1 fail, 2 usage error.")
    bench.add_argument("--op", required=True, help="exact aten overload, e.g. aten.relu.default")
    _add_kernel_options(bench, "; an in-place or out= overload is timed as served, through bbagent's adapter")
    bench.add_argument("--json", action="store_true", help="print the run's summary as one JSON object")
    _add_root(bench)
    _add_eval_options(bench)
    _add_timing_options(bench, target_ms=100.0, max_shapes=64)

    ops = sub.add_parser("ops", help="list the operators bbagent can test, with their test counts",
                         description="List aten overloads with their OpInfo samples, trace tests, prompt family "
                                     "and how they are tested; an op without tests says why.")
    ops.add_argument("pattern", nargs="?", help="only overloads whose name contains this text (e.g. relu)")
    ops.add_argument("--family", help="only overloads of this prompt family (e.g. reduction)")
    ops.add_argument("--suite", default="all", choices=["opinfo", "traces", "all"])
    ops.add_argument("--json", action="store_true", help="print one JSON list")

    kernels = sub.add_parser("kernels", help="list the accepted kernels in ROOT/generated_kernels and what they serve",
                             description="List every accepted kernel: the overload it is written for, every overload "
                                         "it serves (in-place and out= ones through bbagent's adapter), its tests "
                                         "and speed.")
    kernels.add_argument("--json", action="store_true", help="print one JSON list (meta.json of each kernel)")
    _add_root(kernels)

    logs = sub.add_parser("logs", help="list the LLM calls recorded in ROOT/runs/llm_calls.sqlite",
                          description="List every recorded LLM call: run, op, round, candidate, provider, model, "
                                      "tokens, cost, latency, and whether it was answered from the cache.")
    logs.add_argument("--op", help="only calls for this overload")
    logs.add_argument("--run", help="only calls of this run id")
    logs.add_argument("--json", action="store_true", help="print one JSON list (prompts and responses included)")
    _add_root(logs)
    return parser


def _add_generate_options(p: argparse.ArgumentParser) -> None:
    """What generate takes; prompt takes the same, so that it shows what generate would send."""
    p.add_argument("--op", required=True, help="exact aten overload, e.g. aten.relu.default")
    p.add_argument("--rounds", type=int, default=5, help="most rounds to try (default 5)")
    p.add_argument("--provider", default="openai", choices=PROVIDERS, help="LLM provider (default openai)")
    p.add_argument("--model", help="model name, e.g. gpt-5 or claude-sonnet-4-5 (required for openai/anthropic)")
    p.add_argument("--base-url", help="OpenAI-compatible server URL (vLLM, Ollama); default OPENAI_BASE_URL")
    p.add_argument("--replay", help="replay source for --provider replay: a JSON file, a runs/<id> directory or a "
                                    "run id (default: the one shipped for OP)")
    p.add_argument("--max-output-tokens", type=int, default=8192)
    p.add_argument("--temperature", type=float)
    p.add_argument("--retries", type=int, default=5, help="attempts per LLM call on 429/5xx/timeouts (default 5)")
    p.add_argument("--candidates", type=int, default=1,
                   help="answers asked per round, in parallel; all are evaluated and the best moves on (default 1)")
    p.add_argument("--max-cost-usd", type=float,
                   help="stop between rounds once the run's LLM calls cost this much (prices: agent/prices.json)")
    p.add_argument("--max-tokens", type=int, help="stop between rounds once the run used this many tokens (in + out)")
    p.add_argument("--target-speedup", type=float, default=1.0,
                   help="once a kernel is correct, keep asking for a faster one until the best reaches this "
                        "geomean speedup over eager on the GPU (default 1.0; 0 accepts the first correct kernel)")
    p.add_argument("--exact-overload", action="store_true",
                   help="ask for OP's own calling convention and test OP alone; by default an in-place or out= "
                        "overload asks for its functional overload's computation once, and the kernel is tested "
                        "and served as every overload of the family (functional, in-place, out=)")
    _add_root(p)
    _add_eval_options(p)
    _add_timing_options(p, target_ms=25.0, max_shapes=24)


def _add_kernel_options(p: argparse.ArgumentParser, default_note: str = "") -> None:
    """--kernel and --kernel-for, read by ``_kernel_to_evaluate``."""
    p.add_argument("--kernel", help="Python file defining kernel(...) (default: the accepted kernel in "
                                    f"ROOT/generated_kernels that serves OP{default_note})")
    p.add_argument("--kernel-for", metavar="OVERLOAD",
                   help="the overload whose calling convention the file's kernel has (default: the written_for of "
                        "an accepted kernel's meta.json, else OP); the functional overload of OP's family is "
                        "served as OP through bbagent's adapter")


def _add_eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda if available, else cpu (Triton interpreter)")
    p.add_argument("--timeout", type=float, default=300.0, help="wall-clock seconds per evaluation (default 300)")
    p.add_argument("--seed", type=int, help="input seed (default: fresh per evaluation; recorded in the Verdict)")
    p.add_argument("--allow-no-opinfo", action="store_true",
                   help="evaluate even where PyTorch's OpInfo database cannot be imported (expecttest missing): the "
                        "tests are then the real-model traces and edge cases only")


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=None,
                   help="folder holding runs/ and generated_kernels/ (default: $BBAGENT_ROOT, else the current "
                        "directory)")


def _add_timing_options(p: argparse.ArgumentParser, target_ms: float, max_shapes: int) -> None:
    p.add_argument("--no-cache", action="store_true",
                   help="measure eager aten again instead of reading ROOT/runs/reference_timings.sqlite (the new "
                        "numbers replace the cached ones); for generate also ask the model again instead of "
                        "answering identical requests from ROOT/runs/llm_calls.sqlite")
    p.add_argument("--max-shapes", type=int, default=max_shapes,
                   help=f"most trace shapes to time, spread from smallest to largest (default {max_shapes})")
    p.add_argument("--target-ms", type=float, default=target_ms,
                   help=f"measured time per function and shape, in ms (default {target_ms:g})")


# --- entry point ---------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.markup import escape

    from agent.report import pipe_safe
    sys.stdout = pipe_safe(sys.stdout)
    args = _parser().parse_args(argv)
    out = Console(file=sys.stdout, soft_wrap=True, highlight=False)
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    command = {"generate": cmd_generate, "prompt": cmd_prompt, "eval": cmd_eval, "bench": cmd_bench,
               "ops": cmd_ops, "kernels": cmd_kernels, "logs": cmd_logs}[args.command]
    try:
        return command(args, out, err)
    except UsageError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a bug in bbagent: one line for the user, the traceback in a file
        err.print(f"[red]internal error:[/red] {type(exc).__name__}: {escape(str(exc))}\nThis is a bug in bbagent; the "
                  f"traceback is in {_save_traceback()}. Please report it with that file.")
        return EXIT_INTERNAL


def _save_traceback() -> str:
    fd, path = tempfile.mkstemp(prefix="bbagent-internal-error-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write(f"bbagent {version()}, {time.strftime('%Y-%m-%d %H:%M:%S')}, argv {sys.argv}\n\n")
        f.write(traceback.format_exc())
    return path


# --- checks shared by commands -------------------------------------------------------------------

def _resolve(op: str) -> None:
    from harness.ops import UnknownOpError, resolve_op
    try:
        resolve_op(op)
    except UnknownOpError as exc:
        raise UsageError(str(exc)) from None


def _root(args, write: bool) -> Path:
    """The folder for runs/ and generated_kernels/: --root, else $BBAGENT_ROOT, else the current
    directory. A command that writes creates it; one that reads only warns where it is missing."""
    given = args.root or os.environ.get("BBAGENT_ROOT") or "."
    root = Path(given).expanduser().resolve()
    source = "--root" if args.root else ("BBAGENT_ROOT" if os.environ.get("BBAGENT_ROOT") else "the current directory")
    if root.exists() and not root.is_dir():
        raise UsageError(f"{source} {root} is a file, not a folder: pass --root DIR")
    if write:
        try:
            (root / "runs").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot use {source} {root} to keep runs/ and generated_kernels/ "
                             f"({exc.strerror or exc}): pass --root DIR with a folder you can write") from None
        if not os.access(root / "runs", os.W_OK):
            raise UsageError(f"{source} {root} is not writable: pass --root DIR with a folder you can write")
    return root


def _positive(flag: str, value, minimum=None) -> None:
    if value is None:
        return
    if (minimum is None and value <= 0) or (minimum is not None and value < minimum):
        rule = "positive" if minimum is None else f"at least {minimum}"
        raise UsageError(f"{flag} must be {rule} (got {value})")


def _check_eval_options(args) -> None:
    """--timeout, --device and OpInfo: what an evaluation needs before it starts."""
    _positive("--timeout", args.timeout)
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise UsageError("--device cuda: this machine has no usable CUDA device (torch "
                             f"{torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); use --device cpu "
                             "to run under the Triton interpreter")
    problem = None if args.allow_no_opinfo else opinfo_problem()
    if problem:
        raise UsageError(f"PyTorch's OpInfo test database cannot be imported ({problem}), so every OpInfo test "
                         "would be missing. Install it with: pip install expecttest (or pass --allow-no-opinfo "
                         "to test on traces and edge cases alone)")


def opinfo_problem() -> str | None:
    """Why the OpInfo database (torch.testing._internal) cannot be imported, or None. Checked
    without importing it (that costs seconds): its module must exist and expecttest, which it
    imports first, must be importable."""
    import importlib.util
    try:
        if importlib.util.find_spec("torch.testing._internal.common_methods_invocations") is None:
            return "this torch has no torch.testing._internal"
        import expecttest  # noqa: F401
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _check_timing_options(args) -> None:
    _positive("--max-shapes", args.max_shapes, minimum=1)
    _positive("--target-ms", args.target_ms)


def _check_generate_options(args, asks_a_model: bool = True) -> None:
    """What generate needs of its options; ``prompt`` takes the same but asks no model."""
    _positive("--rounds", args.rounds, minimum=1)
    _positive("--candidates", args.candidates, minimum=1)
    _positive("--retries", args.retries, minimum=1)
    _positive("--max-output-tokens", args.max_output_tokens)
    _positive("--max-cost-usd", args.max_cost_usd)
    _positive("--max-tokens", args.max_tokens)
    if args.target_speedup < 0:
        raise UsageError(f"--target-speedup must be 0 or more (got {args.target_speedup})")
    if asks_a_model and args.provider in ("openai", "anthropic") and not args.model:
        example = "gpt-5" if args.provider == "openai" else "claude-sonnet-4-5"
        raise UsageError(f"--model is required with --provider {args.provider} (for example --model {example})")
    _check_timing_options(args)


def _evaluator(args, root: Path, keep_raw: bool = False, kernel_for: str | None = None,
               overloads: list[str] | None = None):
    from harness.evaluate import PROJECT_ROOT, TimingOptions, evaluate
    from harness.reference_cache import FILE_NAME, ReferenceCache
    # read-only for the candidate (where the OS gives a mount namespace): the code and the outputs
    protected = [PROJECT_ROOT, root]
    timing = None
    if hasattr(args, "target_ms"):
        timing = TimingOptions(target_ms=args.target_ms, max_cases=args.max_shapes, reuse=not args.no_cache,
                               cache=ReferenceCache(root / "runs" / FILE_NAME), keep_raw=keep_raw)

    def run(op: str, kernel: Path) -> dict:
        return evaluate(op, kernel, device=args.device, seed=args.seed, timeout_s=args.timeout,
                        protected=protected, timing=timing, kernel_for=kernel_for, overloads=overloads)
    return run


# --- eval, bench ---------------------------------------------------------------------------------

def cmd_eval(args, out, err) -> int:
    from harness.adapters import AdapterError
    from harness.evaluate import KernelFileError
    _resolve(args.op)
    _check_eval_options(args)
    root = _root(args, write=False)
    kernel, kernel_for = _kernel_to_evaluate(args, root)
    overloads = _family_of(args.op)["serves"] if args.family else [args.op]
    op = kernel_for if kernel_for in overloads else args.op  # the kernel's own overload is tested (and timed) first
    try:
        with _waiting(err, f"evaluating {kernel} on {op}"):
            verdict = _evaluator(args, root, kernel_for=kernel_for, overloads=overloads)(op, kernel)
    except (KernelFileError, AdapterError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(verdict, indent=2, default=str))
    else:
        from agent.report import print_verdict
        print_verdict(out, verdict)
    return EXIT_OK if verdict["verdict"] == "pass" else EXIT_FAIL


def cmd_bench(args, out, err) -> int:
    from agent.bench import print_bench, summary_line, write_bench
    from agent.report import print_verdict
    from agent.storage import RunDir, new_run_id
    from harness.adapters import AdapterError
    from harness.evaluate import KernelFileError
    _resolve(args.op)
    _check_eval_options(args)
    _check_timing_options(args)
    root = _root(args, write=True)
    kernel, kernel_for = _kernel_to_evaluate(args, root)
    run = RunDir(root, "bench-" + new_run_id(args.op))
    err.print(f"bbagent bench {args.op}: {kernel}; testing, then timing up to {args.max_shapes} trace "
              f"shapes; run directory {run.path}")
    try:
        with _waiting(err, "evaluating and timing"):
            verdict = _evaluator(args, root, keep_raw=True, kernel_for=kernel_for)(args.op, kernel)
    except (KernelFileError, AdapterError) as exc:
        raise UsageError(str(exc)) from None
    run.write_json("verdict.json", verdict)
    bench_file, records = write_bench(run.path, verdict)
    shown = err if args.json else out
    print_verdict(shown, verdict)
    print_bench(shown, verdict)
    shown.print(f"{len(records)} records in {bench_file}")
    if args.json:
        performance = verdict.get("performance") or {}
        print(json.dumps({"op": args.op, "verdict": verdict["verdict"], "run_dir": str(run.path),
                          "bench_file": str(bench_file), "records": len(records),
                          "performance": performance.get("summary"),
                          "not_timed": None if performance.get("measured") else performance.get("reason"),
                          "summary_line": summary_line(performance) if performance.get("measured") else None},
                         indent=2, default=str))
    return EXIT_OK if verdict["verdict"] == "pass" else EXIT_FAIL


def _waiting(err, text: str):
    from agent.report import Waiting
    return Waiting(err, text)


def _family_of(op: str) -> dict:
    from harness.ops import resolve_op
    from harness.variants import variant_family
    return variant_family(resolve_op(op))


def _written_for_beside(kernel: Path) -> str | None:
    """``written_for`` from the meta.json of an accepted kernel's folder, if the file sits in one."""
    try:
        meta = json.loads((kernel.parent / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("written_for") if isinstance(meta, dict) else None


def _kernel_to_evaluate(args, root: Path) -> tuple[Path, str]:
    """The kernel file and the overload it is written for: --kernel (written for --kernel-for, for
    the written_for of the meta.json beside it, else for --op), or the accepted kernel serving --op."""
    from agent.served import kernel_serving
    if args.kernel:
        kernel = Path(args.kernel)
        if not kernel.is_file():
            raise UsageError(f"--kernel {kernel}: no such file" if not kernel.exists()
                             else f"--kernel {kernel} is not a file")
        kernel_for = args.kernel_for or _written_for_beside(kernel) or args.op
    else:
        entry = kernel_serving(root, args.op)
        if entry is None:
            raise UsageError(f"no accepted kernel serves {args.op} under {root / 'generated_kernels'}: run "
                             f"'bbagent generate --op {args.op}' first or pass --kernel FILE")
        kernel, kernel_for = Path(entry["kernel"]), args.kernel_for or entry["written_for"]
    _resolve(kernel_for)
    return kernel, kernel_for


# --- listings ------------------------------------------------------------------------------------

def cmd_ops(args, out, err) -> int:
    from agent.prompting import family_of, families
    from harness.coverage import list_ops
    rows = list_ops(args.suite)
    for row in rows:
        row["family"] = family_of(row["op"])
    if args.family and args.family not in families():
        err.print(f"[yellow]warning:[/yellow] no prompt family '{args.family}'; the families are: "
                  f"{', '.join(sorted(families()))}")
    shown = [row for row in rows if (not args.pattern or args.pattern in row["op"])
             and (not args.family or row["family"] == args.family)]
    if args.pattern and not shown:
        err.print(f"[yellow]warning:[/yellow] no overload name contains '{args.pattern}'")
    if args.json:
        print(json.dumps(shown, indent=1))
        return EXIT_OK
    from agent.report import print_ops
    print_ops(out, shown, total=len(rows))
    return EXIT_OK


def cmd_kernels(args, out, err) -> int:
    from agent.served import accepted
    root = _root(args, write=False)
    if not (root / "generated_kernels").is_dir():
        err.print(f"[yellow]warning:[/yellow] no generated_kernels/ under {root}: no kernel was accepted there "
                  "(pass --root DIR or set BBAGENT_ROOT to read another folder)")
    entries = accepted(root)
    if args.json:
        print(json.dumps(entries, indent=1, default=str))
        return EXIT_OK
    from agent.report import print_kernels
    print_kernels(out, entries)
    return EXIT_OK


def cmd_logs(args, out, err) -> int:
    from agent.llm_log import FILE_NAME
    root = _root(args, write=False)
    if args.op:
        from harness.ops import UnknownOpError, resolve_op
        try:
            resolve_op(args.op)
        except UnknownOpError as exc:
            err.print(f"[yellow]warning:[/yellow] {exc}")
    if not (root / "runs" / FILE_NAME).exists():
        err.print(f"[yellow]warning:[/yellow] no call log at {root / 'runs' / FILE_NAME}: no LLM call was made "
                  "there (pass --root DIR or set BBAGENT_ROOT to read another folder)")
        calls = []
    else:
        calls = _call_log(root).calls(op=args.op, run_id=args.run)
        if not calls and (args.op or args.run):
            err.print("[yellow]warning:[/yellow] no recorded call matches "
                      + " and ".join(f"{flag} {value}" for flag, value in (("--op", args.op), ("--run", args.run))
                                     if value))
    if args.json:
        print(json.dumps(calls, indent=1))
        return EXIT_OK
    from agent.report import print_calls
    print_calls(out, calls)
    return EXIT_OK


def _call_log(root: Path):
    from agent.llm_log import FILE_NAME, LLMLog
    return LLMLog(root / "runs" / FILE_NAME)


# --- prompt, generate ----------------------------------------------------------------------------

def _what_to_ask_for(op: str, exact: bool) -> tuple[str, list[str]]:
    """The overload to ask the model for and every overload its kernel is tested and served as:
    the family's functional overload and the whole family, unless ``exact`` (or the overload has
    no functional sibling)."""
    family = _family_of(op)
    if exact or family["functional"] is None:
        return op, [op]
    return family["functional"], family["serves"]


def cmd_prompt(args, out, err) -> int:
    from agent.loop import geomean_speedup
    from agent.prompting import family_of, render_feedback, render_performance_feedback, render_prompt, template_name
    _resolve(args.op)
    _check_generate_options(args, asks_a_model=False)
    computation, serves = _what_to_ask_for(args.op, args.exact_overload)
    if args.round_feedback is None:
        text = render_prompt(computation, also_serves=serves[1:], device=args.device)
        template = template_name(computation)
    else:
        try:
            verdict = json.loads(args.round_feedback.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"cannot read the Verdict {args.round_feedback}: {exc}") from None
        if not isinstance(verdict, dict) or "verdict" not in verdict or "summary" not in verdict:
            raise UsageError(f"{args.round_feedback} is not a Verdict (no 'verdict' and 'summary' fields)")
        if verdict["verdict"] == "pass" and geomean_speedup(verdict) is not None:
            text, template = render_performance_feedback(verdict, target=args.target_speedup), "performance.j2"
        else:
            text, template = render_feedback(verdict), "feedback.j2"
    if computation != args.op:
        err.print(f"{args.op} is a calling convention of {computation}: this is the prompt for {computation}, "
                  "as generate sends it (--exact-overload asks for the overload itself)")
    if args.json:
        print(json.dumps({"op": computation, "requested": args.op, "serves": serves, "family": family_of(computation),
                          "template": template, "prompt": text}, indent=2))
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_generate(args, out, err) -> int:
    from rich.markup import escape

    from agent.loop import Agent
    from agent.providers import ProviderError, RetryPolicy, make_provider
    from agent.report import round_reporter
    from agent.storage import RunDir, new_run_id
    _check_generate_options(args)
    _resolve(args.op)
    _check_eval_options(args)
    root = _root(args, write=True)
    computation, serves = _what_to_ask_for(args.op, args.exact_overload)
    log = _call_log(root)
    report = round_reporter(err)
    try:
        provider = make_provider(args.provider, op=computation, model=args.model, base_url=args.base_url,
                                 replay=args.replay, max_output_tokens=args.max_output_tokens,
                                 temperature=args.temperature, retry=RetryPolicy(attempts=args.retries),
                                 log=log, root=root)
    except ProviderError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_PROVIDER
    provider.on_retry = lambda info: report("retry", info)
    from agent.llm_log import price_of
    if args.max_cost_usd is not None and price_of(provider.model) is None:
        raise UsageError(f"--max-cost-usd needs a price for model '{provider.model}': add it to "
                         "agent/prices.json (USD per million input and output tokens) or drop --max-cost-usd")
    run = RunDir(root, new_run_id(computation))
    from agent.providers.logged import LoggedProvider
    provider = LoggedProvider(provider, log, run_id=run.path.name, op=computation, use_cache=not args.no_cache,
                              params={"max_output_tokens": args.max_output_tokens, "temperature": args.temperature})
    if computation != args.op:
        err.print(f"{args.op} is a calling convention of {computation}: asking for {computation} once "
                  "(--exact-overload asks for the overload itself)")
    err.print(f"bbagent generate {computation}: provider {provider.name}, model {provider.model}, "
              f"up to {args.rounds} round(s) of {args.candidates} candidate(s); run directory {run.path}")
    if len(serves) > 1:
        err.print(f"the kernel is tested and served as {', '.join(serves)}")
    agent = Agent(op=computation, serves=serves, device=args.device, provider=provider,
                  evaluate=_evaluator(args, root, overloads=serves), run=run, root=root,
                  rounds=args.rounds, target_speedup=args.target_speedup, report=report,
                  max_cost_usd=args.max_cost_usd, max_tokens=args.max_tokens, candidates=args.candidates,
                  config={"device": args.device, "timeout_s": args.timeout, "seed": args.seed,
                          "max_shapes": args.max_shapes, "target_ms": args.target_ms, "no_cache": args.no_cache})
    try:
        outcome = agent.generate()
    except KeyboardInterrupt:
        report("stop", {})
        err.print(f"[yellow]interrupted[/yellow]; the run is recorded as interrupted in {run.path}")
        return EXIT_INTERRUPTED
    state = agent.state
    err.print(f"spent: {state['tokens']['input']} input + {state['tokens']['output']} output tokens, "
              f"${state['cost_usd']:.4f}{'' if state['cost_complete'] else ' (at least: a model has no price)'}"
              f"; {state['cached_calls']} answer(s) from the call log")
    if outcome.status == "accepted":
        out.print(f"[green]accepted[/green] after {outcome.rounds_used} round(s): {outcome.accepted_dir}\n"
                  f"{escape(outcome.message)}")
        return EXIT_OK
    if outcome.status == "stopped":
        out.print(f"[yellow]stopped:[/yellow] {escape(outcome.message)}; nothing written to generated_kernels/. "
                  f"Transcript: {run.path}")
        return EXIT_FAIL
    if outcome.status == "error":
        err.print(f"[red]error:[/red] {escape(outcome.message)}\nrun recorded in {run.path}")
        return EXIT_PROVIDER
    out.print(f"[red]not accepted:[/red] {escape(outcome.message)}; nothing written to generated_kernels/. "
              f"Transcript: {run.path}")
    return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
