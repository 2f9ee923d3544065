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

import bbagent as api
from bbagent import UsageError, version

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_PROVIDER, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130
PROVIDERS = ("openai", "anthropic", "replay")  # agent.providers.PROVIDERS, without importing the SDKs for --help


# --- the parser ----------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    from harness.checks.policy import TOLERANCE_POLICY
    parser = argparse.ArgumentParser(prog="bbagent", description="Generate and test Triton kernels for aten operators.")
    parser.add_argument("--version", action="version", version=f"bbagent {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = sub.add_parser("generate", help="ask an LLM for a kernel, test it, feed failures back",
                         description="Ask an LLM for a Triton kernel for OP, test it, and feed failures back "
                                     "for up to --rounds rounds. An accepted kernel goes to "
                                     "ROOT/generated_kernels/OP/; every run is recorded in ROOT/runs/.")
    _add_generate_options(gen)

    ba = sub.add_parser("batch", help="generate kernels for many operators at once, resumable",
                        description="Run generate for every operator of --ops / --ops-file, --suite / --family or "
                                    "--dataset: --jobs agent loops at once, their LLM calls through one shared rate "
                                    "limiter, their evaluations one at a time per GPU. Everything is recorded in "
                                    "ROOT/runs/<batch>/ (ledger.sqlite, events.jsonl, summary.json, summary.md); "
                                    "operators an accepted kernel serves are skipped unless --force, and the "
                                    "in-place and out= overloads of a family are served by one kernel. Ctrl-C marks "
                                    "the running ones interrupted; --resume BATCH runs those again, and those whose "
                                    "process died. `bbagent status` shows it from another terminal. Exit status: 0 "
                                    "every operator accepted or skipped, 1 some failed, 2 usage error, 130 "
                                    "interrupted.")
    ba.add_argument("--ops", type=lambda text: [t.strip() for t in text.split(",") if t.strip()], default=[],
                    help="comma-separated exact overloads")
    ba.add_argument("--ops-file", type=Path, help="one exact overload per line; '#' starts a comment")
    ba.add_argument("--suite", choices=["opinfo", "traces", "all"],
                    help="every testable overload of this suite (see `bbagent ops --suite`)")
    ba.add_argument("--family", help="every overload of this prompt family (e.g. reduction; see `bbagent ops --json`)")
    ba.add_argument("--dataset", type=Path, metavar="FILE",
                    help="a BackendBench-format operator dataset (backend_bench_problems.parquet or .json): "
                         "excluded pairs are skipped, overhead-dominated ones tested but not timed, the inputs "
                         "join their operator's trace tests (written to runs/<batch>/dataset.json)")
    ba.add_argument("--include-synthetic", action="store_true", help="with --dataset: also its synthetic inputs")
    ba.add_argument("--jobs", type=int,
                    help="agent loops at once (default: twice the GPUs evaluated on, at least 4)")
    ba.add_argument("--gpus", type=_gpu_list,
                    help="GPUs to evaluate on, e.g. 0,1 (default: every visible one); one evaluation at a time each")
    ba.add_argument("--executor", choices=["local", "ray"], default="local",
                    help="where evaluations run: this machine's GPUs (local, default) or every GPU of a Ray "
                         "cluster (ray; pip install 'bbagent[ray]'); the agent loops and LLM calls stay here")
    ba.add_argument("--ray-address", metavar="ADDRESS",
                    help="with --executor ray: the cluster to join, e.g. 10.0.0.5:6379 (default RAY_ADDRESS, "
                         "else a cluster started on this machine)")
    ba.add_argument("--ray-resource", default="GPU", metavar="NAME",
                    help="with --executor ray: the resource one evaluation holds on a node (default GPU; a custom "
                         "one declared with `ray start --resources`, evaluated with --device cpu unless --device cuda)")
    ba.add_argument("--llm-concurrency", type=int, default=8,
                    help="LLM calls in flight at once across the batch (default 8)")
    ba.add_argument("--resume", metavar="BATCH_ID", help="continue this batch (its own operators and options)")
    ba.add_argument("--force", action="store_true", help="also redo operators an accepted kernel serves")
    ba.add_argument("--lease", type=float, default=120.0, metavar="SECONDS",
                    help="an operator whose process died is run again by --resume once this has passed since "
                         "its last heartbeat (default 120)")
    ba.add_argument("--json", action="store_true", help="print the final counts as one JSON object")
    _add_generate_options(ba, one_op=False)

    st = sub.add_parser("status", help="a batch's progress, from its ledger (also while it runs)",
                        description="Counts and per-operator state of a batch (default: the newest under ROOT/runs).")
    st.add_argument("batch_id", nargs="?", metavar="BATCH_ID")
    st.add_argument("--json", action="store_true", help="print counts and rows as one JSON object")
    _add_root(st)

    rn = sub.add_parser("runs", help="list runs and batches under ROOT/runs; `runs prune` removes old ones",
                        description="List every run (one generate) and batch under ROOT/runs, oldest first. "
                                    "`bbagent runs prune --older-than DAYS` removes those older than DAYS, never "
                                    "one still running, one an accepted kernel came from, or one a kept batch "
                                    "lists; the call log and the timing cache stay.")
    rn.add_argument("action", nargs="?", choices=["prune"], help="prune: remove old runs and batches")
    rn.add_argument("--older-than", type=float, metavar="DAYS", help="with prune: remove what is older than this")
    rn.add_argument("--dry-run", action="store_true", help="with prune: only say what would be removed")
    rn.add_argument("--json", action="store_true", help="print one JSON document")
    _add_root(rn)

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
    bench.add_argument("--profile", action="store_true",
                       help="also write torch profiler traces (Chrome trace JSON: chrome://tracing, Perfetto) of eager "
                            "and of the kernel on the 2 largest timed shapes into the run directory's profiles/ (GPU)")
    bench.add_argument("--ncu", action="store_true",
                       help="also collect Nsight Compute metrics (achieved DRAM bandwidth, SM throughput, achieved "
                            "occupancy) of every kernel that eager and the kernel launch on the 2 largest timed shapes; "
                            "needs ncu on PATH or in CUDA_HOME/bin (GPU)")
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

    cm = sub.add_parser("check-model", help="run a real model with the approved kernels enabled and compare with eager",
                        description="Build MODEL from a config (fixed seed, no downloaded weights), run its forward "
                                    "eagerly and with bbagent.enable() in a child process, compare the outputs "
                                    "(|enabled - eager| <= atol + rtol * |eager| everywhere), list the aten overloads "
                                    "served by generated kernels with their call counts, time both, and on a "
                                    "mismatch bisect over the enabled overloads to name the culprit. Exit 0 match, "
                                    "1 mismatch, 2 usage error.")
    cm.add_argument("--model", required=True, choices=["resnet18", "transformer"])
    cm.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda if available, else cpu (interpreter)")
    cm.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    cm.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a model setting, e.g. --set batch=2 --set d_model=64 (see agent/models.py)")
    cm.add_argument("--ops", help="only these overloads, comma-separated (default: every one enable() serves)")
    cm.add_argument("--include-unreviewed", action="store_true", help="also kernels not approved yet")
    cm.add_argument("--include-slower", action="store_true", help="also overloads not measured as fast as eager")
    cm.add_argument("--atol", type=float, default=1e-3, help="absolute tolerance (default 1e-3)")
    cm.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    cm.add_argument("--repeats", type=int, default=5, help="interleaved timing rounds (median; default 5)")
    cm.add_argument("--iterations", type=int, default=10, help="forwards per timing round (default 10)")
    cm.add_argument("--seed", type=int, default=0)
    cm.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole check (default 1800)")
    cm.add_argument("--json", action="store_true", help="print the result as one JSON object")
    _add_root(cm)

    rp = sub.add_parser("report", help="write one self-contained HTML report of a batch or a run",
                        description="Write an offline HTML page for a batch (default: the newest under ROOT/runs) "
                                    "or a run: the funnel (asked, correct, faster than eager, approved), speedups "
                                    "across operators (failures shown as failures), the fast_p curve, per-shape "
                                    "speedup against input size, cost and rounds, the slowest and most expensive "
                                    "operators, links to kernels and transcripts. Prints the file's path.")
    rp.add_argument("ident", nargs="?", metavar="RUN_OR_BATCH_ID")
    rp.add_argument("--out", type=Path, help="the HTML file to write (default ROOT/runs/<id>/report.html)")
    _add_root(rp)

    from agent.review.command import add_parser as add_review_parser
    add_review_parser(sub, _add_root, _add_eval_options)

    schema = sub.add_parser("schema", help="print the JSON schema of a document bbagent writes",
                            description="Print the JSON schema of a Verdict (what `bbagent eval --json` prints and "
                                        "runs/<run>/round-N/verdict.json holds) or of an accepted kernel's meta.json.")
    schema.add_argument("document", choices=["verdict", "kernel-meta"],
                        help="verdict: a Verdict; kernel-meta: generated_kernels/<op>/meta.json")
    return parser


def _gpu_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU numbers separated by commas, e.g. 0,1 (got '{text}')") from None


def _add_generate_options(p: argparse.ArgumentParser, one_op: bool = True) -> None:
    """What generate takes; prompt takes the same, so that it shows what generate would send
    (batch too, less --op)."""
    if one_op:
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
    if one_op:
        p.add_argument("--max-cost-usd", type=float,
                       help="stop between rounds once the run's LLM calls cost this much (prices: agent/prices.json)")
        p.add_argument("--max-tokens", type=int, help="stop between rounds once the run used this many tokens (in + out)")
    else:  # a batch: its own budgets, and each operator's
        p.add_argument("--max-cost-usd", type=float, help="start nothing new once the batch's calls cost this much")
        p.add_argument("--max-tokens", type=int, help="start nothing new once the batch used this many tokens")
        p.add_argument("--deadline", metavar="HH:MM", help="start nothing new after this local time (the next one)")
        p.add_argument("--max-cost-per-op", type=float, help="each operator's run stops between rounds at this cost")
        p.add_argument("--max-tokens-per-op", type=int, help="each operator's run stops between rounds at this many tokens")
    p.add_argument("--target-speedup", type=float, default=1.0,
                   help="once a kernel is correct, keep asking for a faster one until the best reaches this "
                        "geomean speedup over eager on the GPU (default 1.0; 0 accepts the first correct kernel)")
    p.add_argument("--target-baseline", choices=("eager", "inductor"), default="eager",
                   help="what --target-speedup is measured against: eager (default), or torch.compile's inductor "
                        "(timed on the GPU; implies --baseline eager,inductor; where inductor compiles no shape the "
                        "target holds against eager)")
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
    p.add_argument("--channels-last", action="store_true",
                   help="also run every trace input with a contiguous 4-d or 5-d tensor with those tensors in "
                        "channels-last layout (NHWC; NDHWC), as models using torch.channels_last pass them; for "
                        "convolution, pooling, normalization and elementwise operators (a batch applies it to "
                        "those among its operators)")
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
    p.add_argument("--baseline", default="eager", metavar="ENGINES",
                   help="what to compare the kernel with, comma-separated: eager (always) and inductor (the op "
                        "compiled by torch.compile, timed on the GPU in a child of its own after the kernel "
                        "passed; cached like eager). Default eager")
    p.add_argument("--inductor-mode", default="default", choices=("default", "max-autotune"),
                   help="torch.compile mode of the inductor baseline (max-autotune without inductor's own CUDA "
                        "graphs: bbagent captures every side in a CUDA graph itself)")


# --- entry point ---------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.markup import escape

    from agent.providers.base import ProviderError
    from agent.report import pipe_safe
    sys.stdout = pipe_safe(sys.stdout)
    args = _parser().parse_args(argv)
    out = Console(file=sys.stdout, soft_wrap=True, highlight=False)
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    command = {"generate": cmd_generate, "batch": cmd_batch, "status": cmd_status, "prompt": cmd_prompt, "eval": cmd_eval, "bench": cmd_bench,
               "ops": cmd_ops, "kernels": cmd_kernels, "logs": cmd_logs, "schema": cmd_schema, "runs": cmd_runs,
               "review": cmd_review, "check-model": cmd_check_model,
               "report": cmd_report}[args.command]
    try:
        return command(args, out, err)
    except UsageError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_USAGE
    except ProviderError as exc:  # the provider cannot be used at all (no key): nothing started
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_PROVIDER
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


# --- commands: each parses nothing, checks nothing itself, calls the API and prints ----------------

def _evaluation_options(args) -> dict:
    return {"device": args.device, "seed": args.seed, "timeout_s": args.timeout,
            "allow_no_opinfo": args.allow_no_opinfo, "channels_last": args.channels_last}


def _waiting(err, text: str):
    from agent.report import Waiting
    return Waiting(err, text)


def cmd_eval(args, out, err) -> int:
    with _waiting(err, f"evaluating {args.kernel or 'the accepted kernel'} on {args.op}"):
        verdict = api.evaluate(args.op, args.kernel, kernel_for=args.kernel_for, family=args.family, root=args.root,
                               **_evaluation_options(args))
    if args.json:
        print(verdict.model_dump_json(indent=2))
    else:
        from agent.report import print_verdict
        print_verdict(out, verdict)
    return EXIT_OK if verdict.passed else EXIT_FAIL


def cmd_bench(args, out, err) -> int:
    from agent.bench import print_bench, summary_line
    from agent.report import print_verdict

    def started(run_dir: Path) -> None:
        err.print(f"bbagent bench {args.op}: testing, then timing up to {args.max_shapes} trace shapes; run "
                  f"directory {run_dir}")
    with _waiting(err, "evaluating and timing"):
        result = api.bench(args.op, args.kernel, kernel_for=args.kernel_for, root=args.root, max_shapes=args.max_shapes,
                           target_ms=args.target_ms, no_cache=args.no_cache, on_start=started,
                           baseline=args.baseline, inductor_mode=args.inductor_mode, profile=args.profile, ncu=args.ncu,
                           **_evaluation_options(args))
    verdict, performance = result.verdict, result.verdict.performance
    shown = err if args.json else out
    print_verdict(shown, verdict)
    print_bench(shown, verdict)
    if args.profile and not (performance is not None and performance.measured):
        shown.print("no profiles: they are taken on a CUDA GPU, after the kernel passed and was timed")
    shown.print(f"{len(result.records)} records in {result.bench_file}")
    if args.json:
        measured = performance is not None and performance.measured
        print(json.dumps({"op": args.op, "verdict": verdict.verdict, "run_dir": str(result.run_dir),
                          "bench_file": str(result.bench_file), "records": len(result.records),
                          "performance": performance.summary.model_dump() if measured else None,
                          "not_timed": None if measured else (performance.reason if performance else None),
                          "baselines": {name: b.model_dump() for name, b in ((performance.baselines if performance
                                                                              else None) or {}).items()},
                          "profiles": [p.model_dump() for p in (performance.profiles or [])] if performance else [],
                          "ncu": performance.ncu.model_dump() if performance and performance.ncu else None,
                          "summary_line": summary_line(performance) if measured else None}, indent=2))
    return EXIT_OK if verdict.passed else EXIT_FAIL


def cmd_ops(args, out, err) -> int:
    from agent.prompting import families
    if args.family and args.family not in families():
        err.print(f"[yellow]warning:[/yellow] no prompt family '{args.family}'; the families are: "
                  f"{', '.join(sorted(families()))}")
    shown = api.ops(args.suite, pattern=args.pattern, family=args.family)
    if args.pattern and not shown:
        err.print(f"[yellow]warning:[/yellow] no overload name contains '{args.pattern}'")
    if args.json:
        print(json.dumps(shown, indent=1))
        return EXIT_OK
    from agent.report import print_ops
    print_ops(out, shown, total=len(api.ops(args.suite)) if args.pattern or args.family else len(shown))
    return EXIT_OK


def cmd_kernels(args, out, err) -> int:
    root = api.resolve_root(args.root)
    if not (root / "generated_kernels").is_dir():
        err.print(f"[yellow]warning:[/yellow] no generated_kernels/ under {root}: no kernel was accepted there "
                  "(pass --root DIR or set BBAGENT_ROOT to read another folder)")
    entries = api.kernels(root)
    if args.json:
        print(json.dumps(entries, indent=1, default=str))
        return EXIT_OK
    from agent.report import print_kernels
    print_kernels(out, entries)
    return EXIT_OK


def cmd_logs(args, out, err) -> int:
    from agent.llm_log import FILE_NAME, LLMLog
    root = api.resolve_root(args.root)
    if args.op:
        try:
            api.check_op(args.op)
        except UsageError as exc:
            err.print(f"[yellow]warning:[/yellow] {exc}")
    calls = []
    if not (root / "runs" / FILE_NAME).exists():
        err.print(f"[yellow]warning:[/yellow] no call log at {root / 'runs' / FILE_NAME}: no LLM call was made "
                  "there (pass --root DIR or set BBAGENT_ROOT to read another folder)")
    else:
        calls = LLMLog(root / "runs" / FILE_NAME).calls(op=args.op, run_id=args.run)
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


def cmd_schema(args, out, err) -> int:
    if args.document == "kernel-meta":
        from agent.review.schema import kernel_meta_schema
        print(json.dumps(kernel_meta_schema(), indent=2))
    else:
        print(json.dumps(api.verdict_schema(), indent=2))
    return EXIT_OK


def cmd_prompt(args, out, err) -> int:
    from agent.prompting import family_of, render_feedback, render_performance_feedback, template_name
    computation, serves = api.what_to_ask_for(args.op, args.exact_overload)
    if args.round_feedback is None:
        text, template = api.prompt(args.op, exact_overload=args.exact_overload, device=args.device,
                                    channels_last=args.channels_last), \
            template_name(computation)
    else:
        verdict = _read_verdict(args.round_feedback)
        if verdict.passed and verdict.geomean_speedup() is not None:
            text, template = render_performance_feedback(verdict, target=args.target_speedup,
                                                         target_baseline=args.target_baseline), "performance.j2"
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


def _read_verdict(path: Path):
    from pydantic import ValidationError

    from harness.verdict import Verdict
    try:
        return Verdict.model_validate_json(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the Verdict {path}: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise UsageError(f"{path} is not a Verdict ({exc.error_count()} problem(s); first: {where}: {first['msg']}); "
                         "pass a verdict.json from a run or `bbagent eval --json` output") from None


def _generate_options(args) -> dict:
    per_run = args.command != "batch"  # generate: the run's budgets; batch: each operator's
    return {"provider": args.provider, "model": args.model, "rounds": args.rounds, "candidates": args.candidates,
            "base_url": args.base_url, "replay": args.replay, "max_output_tokens": args.max_output_tokens,
            "temperature": args.temperature, "retries": args.retries,
            "max_cost_usd": args.max_cost_usd if per_run else args.max_cost_per_op,
            "max_tokens": args.max_tokens if per_run else args.max_tokens_per_op, "target_speedup": args.target_speedup,
            "exact_overload": args.exact_overload, "max_shapes": args.max_shapes, "target_ms": args.target_ms,
            "target_baseline": args.target_baseline,
            "no_cache": args.no_cache, "baseline": args.baseline, "inductor_mode": args.inductor_mode,
            **_evaluation_options(args)}


def cmd_batch(args, out, err) -> int:
    from agent.batch.display import BatchDisplay
    options = _generate_options(args)
    if args.resume:  # the batch's own options; only those given here are passed, to be refused
        defaults = _generate_options(_parser().parse_args(["batch"]))
        options = {k: v for k, v in options.items() if v != defaults[k]}
    with BatchDisplay(err) as display:
        result = api.batch(args.ops, ops_file=args.ops_file, suite=args.suite, family=args.family, dataset=args.dataset,
                           include_synthetic=args.include_synthetic, resume=args.resume, jobs=args.jobs, gpus=args.gpus,
                           llm_concurrency=args.llm_concurrency, force=args.force, root=args.root, lease_s=args.lease,
                           batch_max_cost_usd=args.max_cost_usd, batch_max_tokens=args.max_tokens, deadline=args.deadline,
                           executor=args.executor, ray_address=args.ray_address, ray_resource=args.ray_resource,
                           report=display.hear, **options)
    c = result.counts
    if args.json:
        print(json.dumps({"batch_id": result.batch_id, "path": str(result.path), "counts": c,
                          "interrupted": result.interrupted}))
    else:
        out.print(f"{result.batch_id}: {c['accepted']} accepted, {c['failed']} failed, {c['skipped']} skipped, "
                  f"{c['interrupted']} interrupted of {c['total']}; summary in {result.path / 'summary.md'}")
    if result.ended_by:
        err.print(f"stopped early: {result.ended_by}; continue with: bbagent batch --resume {result.batch_id}")
    if result.interrupted:
        err.print(f"interrupted; continue with: bbagent batch --resume {result.batch_id}")
        return EXIT_INTERRUPTED
    return EXIT_FAIL if c["failed"] or c["pending"] or c["running"] else EXIT_OK


def cmd_runs(args, out, err) -> int:
    if args.action == "prune":
        if args.older_than is None:
            raise UsageError("runs prune needs --older-than DAYS (e.g. --older-than 30)")
        result = api.prune_runs(args.older_than, root=args.root, dry_run=args.dry_run)
        if args.json:
            print(json.dumps(result))
            return EXIT_OK
        verb = "would remove" if args.dry_run else "removed"
        for entry in result["removed"]:
            out.print(f"{verb} {entry['kind']} {entry['id']} ({entry['age_s'] / 86400:.1f} days old)")
        for entry in result["kept"]:
            out.print(f"kept {entry['id']}: {entry['why']}")
        out.print(f"{len(result['removed'])} {verb}, {len(result['kept'])} old ones kept")
        return EXIT_OK
    if args.older_than is not None or args.dry_run:
        raise UsageError("--older-than and --dry-run go with `bbagent runs prune`")
    entries = api.runs(args.root)
    if args.json:
        print(json.dumps(entries, default=str))
        return EXIT_OK
    if not entries:
        err.print(f"no runs under {api.resolve_root(args.root) / 'runs'}")
    for e in entries:
        cost = f"${e['cost_usd']:.4f}" if e.get("cost_usd") is not None else ""
        out.print(f"{e['id']:<52} {e['kind']:<5} {e['status'] or '':<11} {e['op'] or '':<34} {cost}",
                  markup=False)
    return EXIT_OK


def _settings(pairs: list[str]) -> dict:
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--set takes KEY=VALUE, e.g. --set batch=2 (got '{pair}')")
        try:
            settings[key.strip()] = json.loads(value)
        except ValueError:
            settings[key.strip()] = value  # a word, e.g. activation=relu
    return settings


def cmd_check_model(args, out, err) -> int:
    ops = [op.strip() for op in args.ops.split(",") if op.strip()] if args.ops else None
    with _waiting(err, f"running {args.model} eagerly and with the kernels enabled"):
        result = api.check_model(args.model, root=args.root, device=args.device, dtype=args.dtype,
                                 config=_settings(args.set), ops=ops, include_unreviewed=args.include_unreviewed,
                                 include_slower=args.include_slower, atol=args.atol, rtol=args.rtol,
                                 repeats=args.repeats, iterations=args.iterations, seed=args.seed,
                                 timeout_s=args.timeout)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        from agent.report import print_check_model
        print_check_model(out, result)
    return EXIT_OK if result["match"] else EXIT_FAIL


def cmd_report(args, out, err) -> int:
    with _waiting(err, "drawing the report"):
        path = api.report(args.ident, root=args.root, out=args.out)
    print(path)
    return EXIT_OK


def cmd_review(args, out, err) -> int:
    from agent.review.command import run
    return run(args, out, err)


def cmd_status(args, out, err) -> int:
    status = api.batch_status(args.batch_id, root=args.root)
    if args.json:
        print(json.dumps(status, default=str))
        return EXIT_OK
    c = status["counts"]
    out.print(f"{status['batch_id']}: {c['accepted']} accepted, {c['failed']} failed, {c['running']} running, "
              f"{c['pending']} pending, {c['skipped']} skipped, {c['interrupted']} interrupted of {c['total']}")
    if status["activity"]:
        from agent.batch.display import panel
        age = time.time() - status["activity"]["at"]
        out.print(f"as of {age:.0f} s ago:")
        out.print(panel(status["activity"]))
    for row in status["ops"]:
        out.print(f"  {row['op']:<40} {row['state']:<11} attempts {row['attempts']}"
                  + (f"  {row['error_class']}" if row["error_class"] else ""))
    return EXIT_OK


def cmd_generate(args, out, err) -> int:
    from rich.markup import escape

    from agent.report import round_reporter
    report = round_reporter(err)
    try:  # a provider that cannot be set up raises ProviderError before any round: exit 3 in main()
        outcome = api.generate(args.op, root=args.root, report=report, **_generate_options(args))
    except KeyboardInterrupt:
        report("stop", {})
        err.print("[yellow]interrupted[/yellow]; the run is recorded as interrupted in its run directory (above)")
        return EXIT_INTERRUPTED
    state = outcome.state
    err.print(f"spent: {state['tokens']['input']} input + {state['tokens']['output']} output tokens, "
              f"${state['cost_usd']:.4f}{'' if state['cost_complete'] else ' (at least: a model has no price)'}"
              f"; {state['cached_calls']} answer(s) from the call log")
    message = escape(outcome.message)
    if outcome.status == "accepted":
        out.print(f"[green]accepted[/green] after {outcome.rounds_used} round(s): {outcome.accepted_dir}\n{message}")
        return EXIT_OK
    if outcome.status == "stopped":
        out.print(f"[yellow]stopped:[/yellow] {message}; nothing written to generated_kernels/. "
                  f"Transcript: {outcome.run_dir}")
        return EXIT_FAIL
    if outcome.status == "error":
        err.print(f"[red]error:[/red] {message}\nrun recorded in {outcome.run_dir}")
        return EXIT_PROVIDER
    out.print(f"[red]not accepted:[/red] {message}; nothing written to generated_kernels/. "
              f"Transcript: {outcome.run_dir}")
    return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
