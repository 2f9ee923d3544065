"""``bbagent``'s command line, declared: one function per command adds its parser; generate's
flags (and batch's and prompt's) are made from ``GenerateOptions``' fields. Building it imports
neither torch nor the SDKs, so ``bbagent --help`` and ``--version`` stay fast."""
from __future__ import annotations

import argparse
from pathlib import Path

from bbagent import version

STATUSES = ("needs_review", "approved", "rejected", "stale", "modified", "broken")  # agent.review.lifecycle.SHOWN_STATUSES
SORT_KEYS = ("op", "status", "speedup", "cost", "tests", "rounds", "version")  # agent.review.catalog.SORT_KEYS


class BadArguments(Exception):
    """Arguments argparse refused: ``parser`` (the command's) and argparse's ``message``. Raised
    instead of argparse's own exit so that the command line can say it as JSON too."""

    def __init__(self, parser: argparse.ArgumentParser, message: str):
        super().__init__(message)
        self.parser, self.message = parser, message


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are ``BadArguments`` (its subcommands' too)."""

    def error(self, message: str):  # type: ignore[override]
        raise BadArguments(self, message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="bbagent", description="Generate and test Triton kernels for aten operators.")
    parser.add_argument("--version", action="version", version=f"bbagent {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_generate_command, _batch_command, _status_command, _runs_command, _cache_command, _prompt_command,
                _eval_command,
                _bench_command, _ops_command, _kernels_command, _logs_command, _check_model_command,
                _regions_command, _report_command, _review_command, _export_command, _schema_command):
        add(sub)
    return parser


def _generate_command(sub) -> None:
    gen = sub.add_parser("generate", help="ask an LLM for a kernel, test it, feed failures back",
                         description="Ask an LLM for a Triton kernel for OP, test it, and feed failures back "
                                     "for up to --rounds rounds. An accepted kernel goes to "
                                     "ROOT/generated_kernels/OP/; every run is recorded in ROOT/runs/. With "
                                     "--problem FILE (a PyTorch program in KernelBench's format), ask for a "
                                     "ModelNew computing it with Triton kernels; an accepted answer goes to "
                                     "ROOT/generated_kernels/kernelbench/level<N>/<problem>/.")
    _add_generate_options(gen, problem=True)


def _batch_command(sub) -> None:
    ba = sub.add_parser("batch", help="generate kernels for many operators at once, resumable",
                        description="Run generate for every operator of --ops / --ops-file, --suite / --family or "
                                    "--dataset (or for every program problem of --kernelbench DIR): --jobs agent loops at once, their LLM calls through one shared rate "
                                    "limiter, their evaluations sharing each GPU by phase (tests side by side "
                                    "as its memory allows, timing alone). Everything is recorded in "
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
    ba.add_argument("--kernelbench", type=Path, metavar="DIR",
                    help="a KernelBench checkout: generate a ModelNew for each problem of its KernelBench/level<N>/ "
                         "folders (answers go to generated_kernels/kernelbench/level<N>/<problem>/); or a folder "
                         "of numbered problem files with no levels, as `bbagent regions` writes them (answers go "
                         "to generated_kernels/kernelbench/other/<problem>/)")
    ba.add_argument("--level", metavar="LEVELS", help="with --kernelbench: its levels, e.g. 1,2 (default: all)")
    ba.add_argument("--problems", metavar="NUMBERS",
                    help="with --kernelbench: problem numbers, e.g. 1-20,25 (default: all)")
    ba.add_argument("--jobs", type=int,
                    help="agent loops at once (default: twice the GPUs evaluated on, at least 4)")
    ba.add_argument("--gpus", type=_gpu_list,
                    help="GPUs to evaluate on, e.g. 0,1 (default: every visible one)")
    ba.add_argument("--evals-per-gpu", type=int, metavar="N",
                    help="evaluations sharing one GPU: their tests run side by side as its memory allows, each "
                         "timing holds the GPU alone (default: half the cores, at most 8, and 8 GiB of host "
                         "memory each, per GPU of the host; with --executor ray, of each node); 1 evaluates one at "
                         "a time")
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
    ba.add_argument("--retry-failed", action="store_true",
                    help="with --resume: run the batch's failed operators again too (their attempts so far stay counted)")
    ba.add_argument("--force", action="store_true", help="also redo operators an accepted kernel serves")
    ba.add_argument("--lease", type=float, default=120.0, metavar="SECONDS",
                    help="an operator whose process died is run again by --resume once this has passed since "
                         "its last heartbeat (default 120)")
    ba.add_argument("--json", action="store_true", help="print the final counts as one JSON object")
    _add_generate_options(ba, one_op=False)


def _export_command(sub) -> None:
    ex = sub.add_parser("export", help="ship approved kernels: a package, BackendBench's or HF kernels' layout, "
                                       "KernelBench's",
                        description="Write the approved kernels where they are used without bbagent. --package DIR "
                                    "--name NAME: a Python project (and its wheel in DIR/dist) whose package NAME "
                                    "serves them with torch and triton alone (NAME.enable(), NAME.disable(), "
                                    "NAME.kernels(), python -m NAME check). --hf-kernels DIR --name NAME: the same as "
                                    "the Hugging Face kernels library's universal build variant "
                                    "(kernels.get_local_kernel(DIR)). --backendbench DIR: BackendBench's "
                                    "DirectoryBackend layout. --kernelbench DIR: answers to program problems as "
                                    "DIR/level<L>/level_<L>_problem_<ID>_sample_<S>_kernel.py, the run folder per "
                                    "level KernelBench's scripts/eval_from_generations.py reads (runs_dir=DIR "
                                    "run_name=level<L>), and bbagent's verdicts of them as DIR/bbagent-level<L>/"
                                    "eval_results.json (+ pass_at_k_results.json), the files its "
                                    "scripts/benchmark_eval_analysis.py reads. Each "
                                    "writes bbagent_export.json saying what each file is and what was left out. "
                                    "Exit 0 something written, 1 nothing to write (--kernelbench), 2 usage error "
                                    "(no approved kernel, a folder that cannot be written, a bad --name).")
    target = ex.add_mutually_exclusive_group(required=True)
    target.add_argument("--package", type=Path, metavar="DIR", help="the project folder to write (with --name)")
    target.add_argument("--hf-kernels", type=Path, metavar="DIR", help="the kernel repository folder to write "
                                                                      "(with --name)")
    target.add_argument("--backendbench", type=Path, metavar="DIR", help="the ops folder BackendBench's "
                                                                        "--ops-directory reads")
    target.add_argument("--kernelbench", type=Path, metavar="OUT_DIR",
                        help="the folder to write (e.g. KernelBench/runs)")
    ex.add_argument("--samples", choices=["accepted", "first-round"], default="accepted",
                    help="with --kernelbench: 'accepted' (default) writes each problem's approved answer as sample "
                         "0; 'first-round' writes every first-round answer of every run of each problem, right or "
                         "wrong, as samples 0..N-1 (independent draws from one prompt: KernelBench's pass@k)")
    ex.add_argument("--name", help="the Python package's name (--package, --hf-kernels)")
    ex.add_argument("--include-unreviewed", action="store_true",
                    help="also kernels and answers not approved yet (never rejected ones)")
    ex.add_argument("--json", action="store_true", help="print what was written and left out as one JSON object")
    _add_root(ex)


def _status_command(sub) -> None:
    st = sub.add_parser("status", help="a batch's progress, from its ledger (also while it runs)",
                        description="Counts and per-operator state of a batch (default: the newest under ROOT/runs).")
    st.add_argument("batch_id", nargs="?", metavar="BATCH_ID")
    st.add_argument("--json", action="store_true", help="print counts and rows as one JSON object")
    _add_root(st)


def _runs_command(sub) -> None:
    rn = sub.add_parser("runs", help="list runs and batches under ROOT/runs; `runs prune` removes old ones",
                        description="List every run (one generate) and batch under ROOT/runs, oldest first. "
                                    "`bbagent runs prune --older-than DAYS` removes those older than DAYS, never "
                                    "one still running, one an accepted kernel came from, or one a kept batch "
                                    "lists; the call log and the timing cache stay. It also removes the working "
                                    "folders of bbagent processes that ended without removing them (kill -9).")
    rn.add_argument("action", nargs="?", choices=["prune"], help="prune: remove old runs and batches")
    rn.add_argument("--older-than", type=float, metavar="DAYS", help="with prune: remove what is older than this")
    rn.add_argument("--dry-run", action="store_true", help="with prune: only say what would be removed")
    rn.add_argument("--json", action="store_true", help="print one JSON document")
    _add_root(rn)


def _cache_command(sub) -> None:
    ca = sub.add_parser("cache", help="list the caches bbagent keeps; `cache clear NAME...` empties them",
                        description="List what bbagent keeps between runs outside runs/ and generated_kernels/: the "
                                    "built suites, the Triton kernels candidates compiled, the timing cache, and "
                                    "the working folders of bbagent processes that ended without removing them "
                                    "(kill -9). `bbagent cache clear suites|triton|timing|workdirs|all` empties "
                                    "them; a working folder is removed only once its process is gone.")
    ca.add_argument("action", nargs="?", choices=["list", "clear"], default="list")
    ca.add_argument("names", nargs="*", metavar="NAME", help="with clear: suites, triton, timing, devices, workdirs or all")
    ca.add_argument("--dry-run", action="store_true", help="with clear: only say what would be removed")
    ca.add_argument("--json", action="store_true", help="print one JSON document")
    _add_root(ca)


def _prompt_command(sub) -> None:
    pr = sub.add_parser("prompt", help="print the prompt bbagent would send for an operator or a program (no model call)",
                        description="Print the first message 'bbagent generate' would send with the same options "
                                    "(for an in-place or out= overload: its functional overload's prompt, unless "
                                    "--exact-overload), without calling any model. With --round-feedback, print "
                                    "the feedback message that a round with that Verdict would send next. With "
                                    "--problem, the prompt for a PyTorch program in KernelBench's format (a file "
                                    "defining Model, get_inputs and get_init_inputs), answered by a ModelNew.")
    _add_generate_options(pr, problem=True)
    pr.add_argument("--round-feedback", type=Path, metavar="VERDICT.json",
                    help="a Verdict (runs/<run>/round-N/verdict.json or `bbagent eval --json` output)")
    pr.add_argument("--json", action="store_true", help="print op, family, template and text as one JSON object")


def _eval_command(sub) -> None:
    from bbagent.harness.interface import LIBRARY_POLICIES, TOLERANCE_POLICY
    ev = sub.add_parser("eval", help="test one kernel file against an operator, or an answer against a program",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Run the kernel in FILE against OP's tests in a separate process and print "
                                    "the Verdict. With --problem, run the answer (a module defining ModelNew) "
                                    "against a PyTorch program in KernelBench's format instead: built with the "
                                    "reference's weights, on the problem's inputs, signed inputs, perturbed "
                                    "weights, and at smaller, odd sizes where the program allows them.\n\nComparison policy: " + TOLERANCE_POLICY +
                                    "\n\nExit status: 0 pass, 1 fail, 2 usage error.")
    asked = ev.add_mutually_exclusive_group(required=True)
    asked.add_argument("--op", help="exact aten overload, e.g. aten.relu.default or aten.relu_.default")
    asked.add_argument("--problem", type=Path, metavar="FILE",
                       help="a PyTorch program in KernelBench's format (Model, get_inputs, get_init_inputs); "
                            "--kernel is then the answer, a module defining ModelNew")
    ev.add_argument("--allow-library", choices=LIBRARY_POLICIES, default="gemm",
                    help="with --problem: what the answer may leave to torch (none; gemm: matrix products and "
                         "convolutions, the default; all)")
    _add_kernel_options(ev)
    ev.add_argument("--variants", action="store_true",
                    help="test every variant of OP (its functional, in-place and out= overloads) with the one kernel")
    # the flag's earlier name, still taken: --family names a prompt family in ops, batch and review list
    ev.add_argument("--family", action="store_true", dest="variants", help=argparse.SUPPRESS)
    ev.add_argument("--json", action="store_true", help="print the Verdict as one JSON object")
    _add_root(ev)
    _add_eval_options(ev)


def _bench_command(sub) -> None:
    from bbagent.harness.interface import LIBRARY_POLICIES
    bench = sub.add_parser("bench", help="time a kernel against eager aten and write benchmark records",
                           description="Test the kernel, then time it and eager aten on OP's real-model trace "
                                       "shapes (GPU only: L2 flushed per repetition, reference and kernel "
                                       "interleaved, CUDA-graph replay where both can be captured). Writes one "
                                       "record per (input, engine) in the benchmark log schema v0.1 to "
                                       "ROOT/runs/<run_id>/bench.jsonl and prints a table. On the CPU the "
                                       "records carry correctness only. Exit status: 0 pass, 1 fail, 2 usage error.")
    asked = bench.add_mutually_exclusive_group(required=True)
    asked.add_argument("--op", help="exact aten overload, e.g. aten.relu.default")
    asked.add_argument("--problem", type=Path, metavar="FILE",
                       help="a PyTorch program in KernelBench's format: its answer (--kernel ANSWER.py, default the "
                            "accepted one) timed against eager and torch.compile on the problem's inputs")
    _add_kernel_options(bench, "; an in-place or out= overload is timed as served, through bbagent's adapter")
    bench.add_argument("--allow-library", choices=LIBRARY_POLICIES, default="gemm",
                       help="with --problem: what the answer may leave to torch (none; gemm: matrix products and "
                            "convolutions, the default; all)")
    bench.add_argument("--json", action="store_true", help="print the run's summary as one JSON object")
    bench.add_argument("--profile", action="store_true",
                       help="also write torch profiler traces (Chrome trace JSON: chrome://tracing, Perfetto) of eager "
                            "and of the kernel on the 2 largest timed shapes (a program: of Model and ModelNew on its inputs) "
                            "into the run directory's profiles/ (GPU)")
    bench.add_argument("--ncu", action="store_true",
                       help="also collect Nsight Compute metrics (achieved DRAM bandwidth, SM throughput, achieved "
                            "occupancy) of every kernel that eager and the kernel launch on the 2 largest timed shapes; "
                            "needs ncu on PATH or in CUDA_HOME/bin (GPU)")
    _add_root(bench)
    _add_eval_options(bench)
    _add_timing_options(bench, target_ms=100.0, max_shapes=64)


def _ops_command(sub) -> None:
    ops = sub.add_parser("ops", help="list the operators bbagent can test, with their test counts",
                         description="List aten overloads with their OpInfo samples, trace tests, prompt family "
                                     "and how they are tested; an op without tests says why.")
    ops.add_argument("pattern", nargs="?", help="only overloads whose name contains this text (e.g. relu)")
    ops.add_argument("--family", help="only overloads of this prompt family (e.g. reduction)")
    ops.add_argument("--suite", default="all", choices=["opinfo", "traces", "all"])
    ops.add_argument("--json", action="store_true", help="print one JSON list")


def _kernels_command(sub) -> None:
    kernels = sub.add_parser("kernels", help="list the accepted kernels in ROOT/generated_kernels and what they serve",
                             description="List every accepted kernel: the overload it is written for, every overload "
                                         "it serves (in-place and out= ones through bbagent's adapter), its tests "
                                         "and speed.")
    kernels.add_argument("--json", action="store_true", help="print one JSON list (meta.json of each kernel)")
    _add_root(kernels)


def _logs_command(sub) -> None:
    logs = sub.add_parser("logs", help="list the LLM calls recorded in ROOT/runs/llm_calls.sqlite",
                          description="List the recorded LLM calls, oldest first: run, op, round, candidate, provider, "
                                      "model, tokens, cost, latency, and whether it was answered from the cache. "
                                      "--id N prints one call whole: every message sent and the answer.")
    logs.add_argument("--op", help="only calls for this overload")
    logs.add_argument("--run", help="only calls of this run, or of this batch (batch-...: every run of it)")
    logs.add_argument("--model", help="only calls to this model")
    logs.add_argument("-q", "--query", action="append", default=[], metavar="TEXT",
                      help="only calls whose prompt or answer holds TEXT (case-insensitive; repeat: all of them)")
    logs.add_argument("-n", "--count", type=_at_least(0, "-n"), metavar="N",
                      help="only the N most recent of the calls chosen (0: all, the default)")
    logs.add_argument("--id", type=_at_least(1, "--id"), metavar="N",
                      help="the call numbered N (the table's id), whole: its messages and its answer")
    logs.add_argument("--json", action="store_true",
                      help="print one JSON list (each call's messages, parsed, and its answer included); with --id, "
                           "one JSON object")
    _add_root(logs)


def _add_model_arguments(parser, device_help: str, script: bool = False) -> None:
    """--model, --device, --dtype and --set: a model built from a config (agent/models.py); with
    ``script``, --script FILE.py in --model's place."""
    if script:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--model", choices=["resnet18", "transformer"])
        which.add_argument("--script", type=Path, metavar="FILE.py",
                           help="your own model, as a program in KernelBench's format: class Model(nn.Module), "
                                "get_inputs(), get_init_inputs()")
    else:
        parser.add_argument("--model", required=True, choices=["resnet18", "transformer"])
    parser.add_argument("--device", choices=["cuda", "cpu"], help=device_help)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a model setting, e.g. --set batch=2 --set d_model=64 (see agent/models.py)")


def _regions_command(sub) -> None:
    rg = sub.add_parser("regions", help="find the regions of a real model worth a kernel of their own, as problems",
                        description="Build MODEL from a config (fixed seed, no downloaded weights), compile it once "
                                    "with torch.compile, and search the graphs inductor receives for regions: a "
                                    "matrix product or convolution with the pointwise work after it, a reduction "
                                    "(a normalization, a softmax) with the pointwise work around it. Each region is "
                                    "hashed by its operators and shapes, counted, and written as a program problem in "
                                    "KernelBench's format (OUT/<n>_<kind>_<hash>.py) that generate --problem, "
                                    "eval --problem and batch --kernelbench OUT take. On a GPU, each region's share "
                                    "of the compiled model's GPU time (its GPU time compiled alone, times its count). "
                                    "Exit 0, 2 usage error.")
    _add_model_arguments(rg, "default: cuda if available, else cpu", script=True)
    rg.add_argument("--out", type=Path, help="where the problem files go (default ROOT/runs/regions-MODEL-<time>)")
    rg.add_argument("--backward", action="store_true",
                    help="search the training graphs, forward and backward (a backward of the output's sum), "
                         "instead of the inference graph; no time shares")
    rg.add_argument("--json", action="store_true", help="print the regions as one JSON object")
    _add_root(rg)


def _check_model_command(sub) -> None:
    from bbagent.agent.serving.check_model import COMPILE_MODES
    cm = sub.add_parser("check-model", help="run a real model with the approved kernels enabled and compare with eager",
                        description="Build MODEL from a config (fixed seed, no downloaded weights), run its forward "
                                    "eagerly and with bbagent.enable() in a child process, compare the outputs "
                                    "(|enabled - eager| <= atol + rtol * |eager| everywhere), list the aten overloads "
                                    "served by generated kernels with their call counts, time both, and on a "
                                    "mismatch bisect over the enabled overloads to name the culprit. With --compile: "
                                    "the model compiled by torch.compile alone and with the approved kernels and "
                                    "region answers, both against eager, timed (eager, torch.compile, torch.compile "
                                    "with bbagent), and which kernels and regions compiled code called. Exit 0 match, "
                                    "1 mismatch, 2 usage error, 4 nothing served (so nothing checked).")
    _add_model_arguments(cm, "default: cuda if available, else cpu (interpreter)", script=True)
    cm.add_argument("--train", action="store_true",
                    help="training steps (forward, a loss, backward, an SGD step) instead of forwards, compiled "
                         "(--compile's mode, default if not given): loss and gradients against eager, time per "
                         "step and peak memory for eager, torch.compile and torch.compile with bbagent")
    cm.add_argument("--steps", type=int, default=5, help="training steps per run with --train (default 5)")
    cm.add_argument("--gate", action="store_true",
                    help="the whole-model gate (compiled; --compile's mode): every approved kernel and region answer "
                         "the compiled model runs, measured in the model alone, then the winners together and all "
                         "of them together, against torch.compile (--repeats rounds; served only where the 95%% interval of the speedup is "
                         "above 1); the plan is recorded in ROOT/runs/plans/ for bbagent.enable(model=..., mode=...)")
    cm.add_argument("--ops", help="only these overloads, comma-separated (default: every one enable() serves)")
    cm.add_argument("--include-unreviewed", action="store_true", help="also kernels not approved yet")
    cm.add_argument("--include-slower", action="store_true", help="also overloads not measured as fast as eager")
    cm.add_argument("--atol", type=float, default=1e-3, help="absolute tolerance (default 1e-3)")
    cm.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    cm.add_argument("--repeats", type=int, default=5, help="interleaved timing rounds (median; default 5)")
    cm.add_argument("--iterations", type=int, default=10, help="forwards per timing round (default 10)")
    cm.add_argument("--compile", nargs="?", const="default", metavar="MODE", choices=COMPILE_MODES,
                    help="compile the model with torch.compile (MODE: default, reduce-overhead, max-autotune, "
                         "max-autotune-no-cudagraphs), alone and with the approved kernels and region answers; both "
                         "against eager, timed against each other; no bisection")
    cm.add_argument("--seed", type=int, default=0)
    cm.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole check (default 1800)")
    cm.add_argument("--json", action="store_true", help="print the result as one JSON object")
    _add_root(cm)


def _report_command(sub) -> None:
    rp = sub.add_parser("report", help="write one self-contained HTML report of a batch or a run",
                        description="Write an offline HTML page for a batch (default: the newest under ROOT/runs) "
                                    "or a run: the funnel (asked, correct, faster than eager, approved), speedups "
                                    "across operators (failures shown as failures), the fast_p curve, per-shape "
                                    "speedup against input size, cost and rounds, the slowest and most expensive "
                                    "operators, links to kernels and transcripts. Prints the file's path.")
    rp.add_argument("ident", nargs="?", metavar="RUN_OR_BATCH_ID")
    rp.add_argument("--out", type=Path, help="the HTML file to write (default ROOT/runs/<id>/report.html)")
    _add_root(rp)


def _schema_command(sub) -> None:
    schema = sub.add_parser("schema", help="print the JSON schema of a document bbagent writes",
                            description="Print the JSON schema of a Verdict (what `bbagent eval --json` prints and "
                                        "runs/<run>/round-N/verdict.json holds) or of an accepted kernel's meta.json.")
    schema.add_argument("document", choices=["verdict", "kernel-meta"],
                        help="verdict: a Verdict; kernel-meta: generated_kernels/<op>/meta.json")


def _review_command(sub) -> None:
    review = sub.add_parser(
        "review", help="review accepted kernels: list, show, approve, reject, diff, verify",
        description="The review lifecycle of generated_kernels/<op>/ (meta.json 'review'): a new kernel "
                    "needs_review; approve or reject it; an approved kernel turns stale when torch, triton, the GPU "
                    "model or bbagent's test suite changed since its tests passed, until `review verify` tests it "
                    "again. An approval covers what was judged: a kernel.py edited since its tests is 'modified', "
                    "never served, and `review approve` judges it first. Earlier versions stay in "
                    "generated_kernels/<op>/versions/<n>/. Only approved, non-stale kernels are served by "
                    "bbagent.enable() unless asked.")
    actions = review.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("list", help="one line per operator: status, tests, speedup, cost, flags")
    ls.add_argument("--status", choices=STATUSES, help="only kernels in this state")
    ls.add_argument("--family", help="only operators of this prompt family")
    ls.add_argument("--sort", choices=SORT_KEYS, default="op",
                    help="order (numbers largest first; default op)")
    ls.add_argument("--json", action="store_true", help="print one JSON list")
    _add_root(ls)
    show = actions.add_parser("show", help="the kernel's code, verdict, per-shape speed, flags and transcript")
    show.add_argument("op")
    show.add_argument("--version", type=int, help="an earlier version (default: the current one)")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    _add_root(show)
    for name, what in (("approve", "approve a version (default: the current one); a kernel.py changed since its "
                                   "tests is judged first, and approved as a new version only if it passes"),
                       ("reject", "reject a version; --note says why")):
        p = actions.add_parser(name, help=what)
        p.add_argument("op")
        p.add_argument("--note", default="", help="why (required to reject); kept in meta.json's history")
        p.add_argument("--version", type=int, help="an earlier version (default: the current one)")
        p.add_argument("--json", action="store_true", help="print the new review record as JSON")
        _add_root(p)
        if name == "approve":  # a kernel.py changed since its tests is judged before it is approved
            _add_eval_options(p, fields=("device", "timeout_s"))
        else:
            p.set_defaults(device=None, timeout=None)
    df = actions.add_parser("diff", help="the kernel against the previously accepted version")
    df.add_argument("op")
    df.add_argument("--version", type=int, help="the newer side (default: the current one)")
    df.add_argument("--against", type=int, help="the older side (default: the version before)")
    _add_root(df)
    vf = actions.add_parser("verify", help="re-test approved kernels whose environment changed (stale)",
                            description="Re-run the tests (and on a GPU the timing) of every stale approved kernel "
                                        "of OP, or of all with --all, and of every current kernel.py edited since its "
                                        "tests (modified). Passing renews its environment and keeps it approved (an "
                                        "edit is recorded as a new version that needs review); failing puts it back "
                                        "to needs_review. Exit 0 all passed, 1 some failed, 2 usage error.")
    vf.add_argument("op", nargs="?")
    vf.add_argument("--all", action="store_true", help="every operator")
    vf.add_argument("--force", action="store_true", help="re-test approved kernels that are not stale too")
    vf.add_argument("--json", action="store_true", help="print one JSON list of outcomes")
    _add_root(vf)
    _add_eval_options(vf)


def _at_least(low: int, flag: str):
    """An argparse type: a whole number of at least ``low``, else a usage error naming ``flag``."""
    def whole(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            number = low - 1
        if number < low:
            raise argparse.ArgumentTypeError(f"{flag} takes a whole number of at least {low} (got '{text}')")
        return number
    return whole


def _gpu_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU numbers separated by commas, e.g. 0,1 (got '{text}')") from None


def _add_generate_options(p: argparse.ArgumentParser, one_op: bool = True, problem: bool = False) -> None:
    """What generate takes, one flag per ``GenerateOptions`` field (``agent.options.option_flags``:
    its help and default are the field's); prompt takes the same (``problem``: --op or --problem),
    so that it shows what generate would send (batch too, less --op, with each operator's budgets as --max-cost-per-op and
    --max-tokens-per-op beside the batch's own)."""
    from bbagent.agent.options import option_flags
    if problem:  # an operator or a program, one of them
        asked = p.add_mutually_exclusive_group(required=True)
        asked.add_argument("--op", help="exact aten overload, e.g. aten.relu.default")
        asked.add_argument("--problem", type=Path, metavar="FILE",
                           help="a PyTorch program in KernelBench's format (Model, get_inputs, get_init_inputs)")
    elif one_op:
        p.add_argument("--op", required=True, help="exact aten overload, e.g. aten.relu.default")
    else:  # a batch: its own budgets, besides each operator's
        p.add_argument("--max-cost-usd", type=float, help="start nothing new once the batch's calls cost this much")
        p.add_argument("--max-tokens", type=int, help="start nothing new once the batch used this many tokens")
        p.add_argument("--deadline", metavar="HH:MM", help="start nothing new after this local time (the next one)")
    for flag in option_flags(batch=not one_op):
        p.add_argument(flag.name, **flag.arguments)
    _add_root(p)


def _add_kernel_options(p: argparse.ArgumentParser, default_note: str = "") -> None:
    """--kernel and --kernel-for, read by ``_kernel_to_evaluate``."""
    p.add_argument("--kernel", help="Python file defining kernel(...) (default: the accepted kernel in "
                                    f"ROOT/generated_kernels that serves OP{default_note})")
    p.add_argument("--kernel-for", metavar="OVERLOAD",
                   help="the overload whose calling convention the file's kernel has (default: the written_for of "
                        "an accepted kernel's meta.json, else OP); the functional overload of OP's family is "
                        "served as OP through bbagent's adapter")


EVALUATION_FIELDS = ("dsl", "device", "timeout_s", "seed", "channels_last", "allow_no_opinfo")
TIMING_FIELDS = ("no_cache", "max_shapes", "target_ms", "baseline", "inductor_mode")


def _add_eval_options(p: argparse.ArgumentParser, fields: tuple[str, ...] = EVALUATION_FIELDS) -> None:
    """How a kernel is evaluated: GenerateOptions' fields of it (``fields``), with their defaults."""
    from bbagent.agent.options import option_flags
    for flag in option_flags(fields=fields, defaults={}):
        p.add_argument(flag.name, **flag.arguments)


def _add_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=None,
                   help="folder holding runs/ and generated_kernels/ (default: $BBAGENT_ROOT, else the current "
                        "directory)")


def _add_timing_options(p: argparse.ArgumentParser, target_ms: float, max_shapes: int) -> None:
    """How a kernel is timed: GenerateOptions' fields of it, with these defaults for the shapes."""
    from bbagent.agent.options import option_flags
    for flag in option_flags(fields=TIMING_FIELDS, defaults={"target_ms": target_ms, "max_shapes": max_shapes}):
        p.add_argument(flag.name, **flag.arguments)
