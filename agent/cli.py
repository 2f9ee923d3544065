"""The ``bbagent`` command line.

Exit codes: 0 success (kernel accepted / verdict pass); 1 the kernel failed (every
round failed / verdict fail); 2 usage error (unknown op, missing file, bad option);
3 provider error (missing key, rejected request, retries exhausted); 130 interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_PROVIDER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEFAULT_ROOT = Path(__file__).resolve().parent.parent


class UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    from harness.compare import TOLERANCE_POLICY
    parser = argparse.ArgumentParser(prog="bbagent", description="Generate and test Triton kernels for aten operators.")
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="ask an LLM for a kernel, test it, feed failures back",
                         description="Ask an LLM for a Triton kernel for OP, test it, and feed failures back "
                                     "for up to --rounds rounds. An accepted kernel goes to "
                                     "ROOT/generated_kernels/OP/; every run is recorded in ROOT/runs/.")
    gen.add_argument("--op", required=True, help="exact aten overload, e.g. aten.relu.default")
    gen.add_argument("--rounds", type=int, default=5, help="most rounds to try (default 5)")
    gen.add_argument("--provider", default="openai", help="openai | anthropic | replay (default openai)")
    gen.add_argument("--model", help="model name, e.g. gpt-5 or claude-sonnet-4-5 (required for openai/anthropic)")
    gen.add_argument("--base-url", help="OpenAI-compatible server URL (vLLM, Ollama); default OPENAI_BASE_URL")
    gen.add_argument("--replay", help="replay source for --provider replay: a JSON file or a runs/<id> directory "
                                      "(default: the one shipped for OP)")
    gen.add_argument("--max-output-tokens", type=int, default=8192)
    gen.add_argument("--temperature", type=float)
    gen.add_argument("--retries", type=int, default=5, help="attempts per LLM call on 429/5xx/timeouts (default 5)")
    gen.add_argument("--candidates", type=int, default=1,
                     help="answers asked per round, in parallel; all are evaluated and the best moves on (default 1)")
    gen.add_argument("--max-cost-usd", type=float,
                     help="stop between rounds once the run's LLM calls cost this much (prices: agent/prices.json)")
    gen.add_argument("--max-tokens", type=int, help="stop between rounds once the run used this many tokens (in + out)")
    gen.add_argument("--target-speedup", type=float, default=1.0,
                     help="once a kernel is correct, keep asking for a faster one until the best reaches this "
                          "geomean speedup over eager on the GPU (default 1.0; 0 accepts the first correct kernel)")
    gen.add_argument("--exact-overload", action="store_true",
                     help="ask for OP's own calling convention and test OP alone; by default an in-place or out= "
                          "overload asks for its functional overload's computation once, and the kernel is tested "
                          "and served as every overload of the family (functional, in-place, out=)")
    _add_root(gen)
    _add_eval_options(gen)
    _add_timing_options(gen, target_ms=25.0, max_shapes=24)

    ops = sub.add_parser("ops", help="list the operators bbagent can test, with their test counts",
                         description="List aten overloads with their OpInfo samples, trace tests, dtypes, "
                                     "prompt family and value mode; an op without tests says why.")
    ops.add_argument("--suite", default="all", choices=["opinfo", "traces", "all"])
    ops.add_argument("--json", action="store_true", help="print one JSON list")

    kernels = sub.add_parser("kernels", help="list the accepted kernels in ROOT/generated_kernels and what they serve",
                             description="List every accepted kernel: the overload it is written for, every overload "
                                         "it serves (in-place and out= ones through bbagent's adapter), its tests "
                                         "and speed.")
    kernels.add_argument("--json", action="store_true", help="print one JSON list (meta.json of each kernel)")
    _add_root(kernels)

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

    pr = sub.add_parser("prompt", help="print the prompt bbagent would send for an operator (no model call)",
                        description="Render OP's prompt from prompts/ (base, family, per-op override) and print "
                                    "it without calling any model. With --round-feedback, print the feedback "
                                    "message that a round with that Verdict would send next.")
    pr.add_argument("--op", required=True, help="exact aten overload, e.g. aten.relu.default")
    pr.add_argument("--round-feedback", type=Path, metavar="VERDICT.json",
                    help="a Verdict (runs/<run>/round-N/verdict.json or `bbagent eval --json` output)")
    pr.add_argument("--target-speedup", type=float, default=1.0,
                    help="the target quoted in speed feedback for a passing, timed Verdict (default 1.0)")
    pr.add_argument("--device", choices=["cuda", "cpu"],
                    help="where the tests would run, as for generate (default: cuda if available, else cpu); the "
                         "prompt states the facts of that stack (the CPU runs Triton's interpreter)")
    pr.add_argument("--json", action="store_true", help="print op, family, template and text as one JSON object")

    logs = sub.add_parser("logs", help="list the LLM calls recorded in ROOT/runs/llm_calls.sqlite",
                          description="List every recorded LLM call: run, op, round, candidate, provider, model, "
                                      "tokens, cost, latency, and whether it was answered from the cache.")
    logs.add_argument("--op", help="only calls for this overload")
    logs.add_argument("--run", help="only calls of this run id")
    logs.add_argument("--json", action="store_true", help="print one JSON list (prompts and responses included)")
    _add_root(logs)

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
    return parser


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


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=Path(os.environ.get("BBAGENT_ROOT", DEFAULT_ROOT)),
                   help="folder holding runs/ and generated_kernels/ (default: $BBAGENT_ROOT or the checkout)")


def _add_timing_options(p: argparse.ArgumentParser, target_ms: float, max_shapes: int) -> None:
    p.add_argument("--no-cache", action="store_true",
                   help="measure eager aten again instead of reading ROOT/runs/reference_timings.sqlite (the new "
                        "numbers replace the cached ones); for generate also ask the model again instead of "
                        "answering identical requests from ROOT/runs/llm_calls.sqlite")
    p.add_argument("--max-shapes", type=int, default=max_shapes,
                   help=f"most trace shapes to time, spread from smallest to largest (default {max_shapes})")
    p.add_argument("--target-ms", type=float, default=target_ms,
                   help=f"measured time per function and shape, in ms (default {target_ms:g})")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=getattr(args, "json", False), soft_wrap=True)
    try:
        if args.command == "eval":
            return cmd_eval(args, console)
        if args.command == "ops":
            return cmd_ops(args, console)
        if args.command == "bench":
            return cmd_bench(args, console)
        if args.command == "prompt":
            return cmd_prompt(args)
        if args.command == "logs":
            return cmd_logs(args, console)
        if args.command == "kernels":
            return cmd_kernels(args, console)
        return cmd_generate(args, console)
    except UsageError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_USAGE
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return EXIT_INTERRUPTED


def _resolve(op: str) -> None:
    from harness.ops import UnknownOpError, resolve_op
    try:
        resolve_op(op)
    except UnknownOpError as exc:
        raise UsageError(str(exc)) from None


def _evaluator(args, keep_raw: bool = False, kernel_for: str | None = None, overloads: list[str] | None = None):
    from harness.evaluate import PROJECT_ROOT, TimingOptions, evaluate
    from harness.reference_cache import FILE_NAME, ReferenceCache
    # read-only for the candidate (where the OS gives a mount namespace): the code and the outputs
    protected = [PROJECT_ROOT] + ([args.root.resolve()] if getattr(args, "root", None) else [])
    timing = None
    if hasattr(args, "target_ms"):
        timing = TimingOptions(target_ms=args.target_ms, max_cases=args.max_shapes, reuse=not args.no_cache,
                               cache=ReferenceCache(args.root.resolve() / "runs" / FILE_NAME), keep_raw=keep_raw)

    def run(op: str, kernel: Path) -> dict:
        return evaluate(op, kernel, device=args.device, seed=args.seed, timeout_s=args.timeout,
                        protected=protected, timing=timing, kernel_for=kernel_for, overloads=overloads)
    return run


def _check_timing_options(args) -> None:
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive (got {args.timeout})")
    if args.max_shapes < 1:
        raise UsageError(f"--max-shapes must be at least 1 (got {args.max_shapes})")
    if args.target_ms <= 0:
        raise UsageError(f"--target-ms must be positive (got {args.target_ms})")


def cmd_eval(args, console: Console) -> int:
    from harness.adapters import AdapterError
    from harness.evaluate import KernelFileError
    _resolve(args.op)
    kernel, kernel_for = _kernel_to_evaluate(args)
    overloads = _family_of(args.op)["serves"] if args.family else [args.op]
    op = kernel_for if kernel_for in overloads else args.op  # the kernel's own overload is tested (and timed) first
    try:
        verdict = _evaluator(args, kernel_for=kernel_for, overloads=overloads)(op, kernel)
    except (KernelFileError, AdapterError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(verdict, indent=2, default=str))
    else:
        from agent.report import print_verdict
        print_verdict(console, verdict)
    return EXIT_OK if verdict["verdict"] == "pass" else EXIT_FAIL


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


def _kernel_to_evaluate(args) -> tuple[Path, str]:
    """The kernel file and the overload it is written for: --kernel (written for --kernel-for, for
    the written_for of the meta.json beside it, else for --op), or the accepted kernel serving --op."""
    from agent.served import kernel_serving
    root = args.root.resolve()
    if args.kernel:
        kernel = Path(args.kernel)
        beside = _written_for_beside(kernel)
        kernel_for = args.kernel_for or beside or args.op
    else:
        entry = kernel_serving(root, args.op)
        if entry is None:
            raise UsageError(f"no accepted kernel serves {args.op} under {root / 'generated_kernels'}: run "
                             f"'bbagent generate --op {args.op}' first or pass --kernel FILE")
        kernel, kernel_for = Path(entry["kernel"]), args.kernel_for or entry["written_for"]
    _resolve(kernel_for)
    return kernel, kernel_for


def cmd_ops(args, console: Console) -> int:
    from agent.prompting import family_of
    from harness.coverage import list_ops
    rows = list_ops(args.suite)
    for row in rows:
        row["family"] = family_of(row["op"])
    if args.json:
        print(json.dumps(rows, indent=1))
        return EXIT_OK
    from agent.report import print_ops
    print_ops(console, rows)
    return EXIT_OK


def _call_log(root: Path):
    from agent.llm_log import FILE_NAME, LLMLog
    return LLMLog(root / "runs" / FILE_NAME)


def cmd_logs(args, console: Console) -> int:
    root = args.root.resolve()
    from agent.llm_log import FILE_NAME
    if not (root / "runs" / FILE_NAME).exists():
        calls = []
    else:
        calls = _call_log(root).calls(op=args.op, run_id=args.run)
    if args.json:
        print(json.dumps(calls, indent=1))
        return EXIT_OK
    from agent.report import print_calls
    print_calls(console, calls)
    return EXIT_OK


def cmd_kernels(args, console: Console) -> int:
    from agent.served import accepted
    entries = accepted(args.root.resolve())
    if args.json:
        print(json.dumps(entries, indent=1, default=str))
        return EXIT_OK
    from agent.report import print_kernels
    print_kernels(console, entries)
    return EXIT_OK


def cmd_prompt(args) -> int:
    from agent.loop import geomean_speedup
    from agent.prompting import family_of, render_feedback, render_performance_feedback, render_prompt, template_name
    _resolve(args.op)
    if args.round_feedback is None:
        text, template = render_prompt(args.op, device=args.device), template_name(args.op)
    else:
        try:
            verdict = json.loads(args.round_feedback.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"cannot read the Verdict {args.round_feedback}: {exc}") from None
        if not isinstance(verdict, dict) or "verdict" not in verdict or "summary" not in verdict:
            raise UsageError(f"{args.round_feedback} is not a Verdict (no 'verdict' and 'summary' fields)")
        if verdict["verdict"] == "pass" and geomean_speedup(verdict) is not None:
            text, template = render_performance_feedback(verdict, target=args.target_speedup), "performance.j2"
        else:
            text, template = render_feedback(verdict), "feedback.j2"
    if args.json:
        print(json.dumps({"op": args.op, "family": family_of(args.op), "template": template, "prompt": text},
                         indent=2))
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_bench(args, console: Console) -> int:
    from agent.bench import print_bench, summary_line, write_bench
    from harness.adapters import AdapterError
    from agent.storage import RunDir, new_run_id
    from harness.evaluate import KernelFileError
    _resolve(args.op)
    _check_timing_options(args)
    root = args.root.resolve()
    kernel, kernel_for = _kernel_to_evaluate(args)
    run = RunDir(root, "bench-" + new_run_id(args.op))
    console.print(f"bbagent bench {args.op}: {kernel}; testing, then timing up to {args.max_shapes} trace "
                  f"shapes; run directory {run.path}", highlight=False)
    try:
        with console.status("evaluating and timing..."):
            verdict = _evaluator(args, keep_raw=True, kernel_for=kernel_for)(args.op, kernel)
    except (KernelFileError, AdapterError) as exc:
        raise UsageError(str(exc)) from None
    run.write_json("verdict.json", verdict)
    bench_file, records = write_bench(run.path, verdict)
    from agent.report import print_verdict
    print_verdict(console, verdict)
    print_bench(console, verdict)
    console.print(f"{len(records)} records in {bench_file}", highlight=False)
    if args.json:
        performance = verdict.get("performance") or {}
        print(json.dumps({"op": args.op, "verdict": verdict["verdict"], "run_dir": str(run.path),
                          "bench_file": str(bench_file), "records": len(records),
                          "performance": performance.get("summary"),
                          "not_timed": None if performance.get("measured") else performance.get("reason"),
                          "summary_line": summary_line(performance) if performance.get("measured") else None},
                         indent=2, default=str))
    return EXIT_OK if verdict["verdict"] == "pass" else EXIT_FAIL


def _what_to_ask_for(op: str, exact: bool) -> tuple[str, list[str]]:
    """The overload to ask the model for and every overload its kernel is tested and served as:
    the family's functional overload and the whole family, unless ``exact`` (or the overload has
    no functional sibling)."""
    family = _family_of(op)
    if exact or family["functional"] is None:
        return op, [op]
    return family["functional"], family["serves"]


def cmd_generate(args, console: Console) -> int:
    from agent.loop import Agent
    from agent.providers import ProviderError, RetryPolicy, make_provider
    from agent.report import round_reporter
    from agent.storage import RunDir, new_run_id
    if args.rounds < 1:
        raise UsageError(f"--rounds must be at least 1 (got {args.rounds})")
    if args.target_speedup < 0:
        raise UsageError(f"--target-speedup must be 0 or more (got {args.target_speedup})")
    if args.candidates < 1:
        raise UsageError(f"--candidates must be at least 1 (got {args.candidates})")
    for flag, value in (("--max-cost-usd", args.max_cost_usd), ("--max-tokens", args.max_tokens)):
        if value is not None and value <= 0:
            raise UsageError(f"{flag} must be positive (got {value})")
    _check_timing_options(args)
    _resolve(args.op)
    computation, serves = _what_to_ask_for(args.op, args.exact_overload)
    root = args.root.resolve()
    log = _call_log(root)
    try:
        provider = make_provider(args.provider, op=computation, model=args.model, base_url=args.base_url,
                                 replay=args.replay, max_output_tokens=args.max_output_tokens,
                                 temperature=args.temperature, retry=RetryPolicy(attempts=max(1, args.retries)),
                                 log=log)
    except ProviderError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_PROVIDER
    from agent.llm_log import price_of
    if args.max_cost_usd is not None and price_of(provider.model) is None:
        raise UsageError(f"--max-cost-usd needs a price for model '{provider.model}': add it to "
                         "agent/prices.json (USD per million input and output tokens) or drop --max-cost-usd")
    run = RunDir(root, new_run_id(computation))
    from agent.providers.logged import LoggedProvider
    provider = LoggedProvider(provider, log, run_id=run.path.name, op=computation, use_cache=not args.no_cache,
                              params={"max_output_tokens": args.max_output_tokens, "temperature": args.temperature})
    if computation != args.op:
        console.print(f"{args.op} is a calling convention of {computation}: asking for {computation} once "
                      "(--exact-overload asks for the overload itself)", highlight=False)
    console.print(f"bbagent generate {computation}: provider {provider.name}, model {provider.model}, "
                  f"up to {args.rounds} round(s) of {args.candidates} candidate(s); run directory {run.path}",
                  highlight=False)
    if len(serves) > 1:
        console.print(f"the kernel is tested and served as {', '.join(serves)}", highlight=False)
    agent = Agent(op=computation, serves=serves, device=args.device, provider=provider, evaluate=_evaluator(args, overloads=serves),
                  run=run, root=root,
                  rounds=args.rounds, target_speedup=args.target_speedup, report=round_reporter(console),
                  max_cost_usd=args.max_cost_usd, max_tokens=args.max_tokens, candidates=args.candidates,
                  config={"device": args.device, "timeout_s": args.timeout, "seed": args.seed,
                          "max_shapes": args.max_shapes, "target_ms": args.target_ms, "no_cache": args.no_cache})
    try:
        outcome = agent.generate()
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/yellow]; the run is recorded as interrupted in {run.path}")
        return EXIT_INTERRUPTED
    state = agent.state
    console.print(f"spent: {state['tokens']['input']} input + {state['tokens']['output']} output tokens, "
                  f"${state['cost_usd']:.4f}{'' if state['cost_complete'] else ' (at least: a model has no price)'}"
                  f"; {state['cached_calls']} answer(s) from the call log", highlight=False)
    if outcome.status == "accepted":
        console.print(f"[green]accepted[/green] after {outcome.rounds_used} round(s): {outcome.accepted_dir}\n"
                      f"{outcome.message}", highlight=False)
        return EXIT_OK
    if outcome.status == "stopped":
        console.print(f"[yellow]stopped:[/yellow] {outcome.message}; nothing written to generated_kernels/. "
                      f"Transcript: {run.path}", highlight=False)
        return EXIT_FAIL
    if outcome.status == "error":
        console.print(f"[red]error:[/red] {outcome.message}\nrun recorded in {run.path}", highlight=False)
        return EXIT_PROVIDER
    console.print(f"[red]not accepted:[/red] {outcome.message}; nothing written to generated_kernels/. "
                  f"Transcript: {run.path}", highlight=False)
    return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
