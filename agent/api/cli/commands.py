"""The commands of ``bbagent``: each parses nothing and checks nothing itself; it calls the API
(``bbagent``) and prints, results on stdout and diagnostics on stderr.

Exit codes: 0 success (kernel accepted / verdict pass); 1 the kernel failed (every round failed /
verdict fail); 2 usage error; 3 provider error; 4 check-model served nothing (nothing was checked);
70 internal error; 74 the machine refused (a full disk, a quota, an unwritable folder); 130
interrupted (Ctrl-C or SIGTERM).
"""
from __future__ import annotations

import contextlib
import json
import shlex
import signal
import sys
import time
from pathlib import Path

import bbagent as api
from bbagent.agent.errors import Terminated
from bbagent.agent.money import cost_text
from bbagent import UsageError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_PROVIDER, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 70, 130
EXIT_MACHINE = 74  # sysexits' EX_IOERR: a full disk, a quota, an unwritable folder
EXIT_NOTHING_CHECKED = 4  # check-model: no generated kernel served a call, so nothing was checked
PER_OP = {"max_cost_usd": "max_cost_per_op", "max_tokens": "max_tokens_per_op"}  # a batch's per-operator budgets
def _evaluation_options(args) -> dict:
    return {"device": args.device, "seed": args.seed, "timeout_s": args.timeout, "dsl": args.dsl,
            "allow_no_opinfo": args.allow_no_opinfo, "channels_last": args.channels_last}


def _waiting(err, text: str):
    from bbagent.agent.reports.console import Waiting
    return Waiting(err, text)


def cmd_eval(args, out, err) -> int:
    if args.problem is not None:
        if args.kernel is None:
            raise UsageError("eval --problem needs --kernel ANSWER.py, a module defining ModelNew")
        from bbagent.agent.judging import refuse_operator_flags
        refuse_operator_flags({"--variants": args.variants, "--kernel-for": args.kernel_for,
                               "--channels-last": args.channels_last, "--allow-no-opinfo": args.allow_no_opinfo})
        with _waiting(err, f"evaluating {args.kernel} on {args.problem}"):
            verdict = api.evaluate_program(args.problem, args.kernel, root=args.root, device=args.device,
                                           seed=args.seed, timeout_s=args.timeout, allow_library=args.allow_library,
                                           dsl=args.dsl)
        return _print_verdict(args, out, verdict)
    with _waiting(err, f"evaluating {args.kernel or 'the accepted kernel'} on {args.op}"):
        verdict = api.evaluate(args.op, args.kernel, kernel_for=args.kernel_for, variants=args.variants, root=args.root,
                               **_evaluation_options(args))
    code = _print_verdict(args, out, verdict)
    if not verdict.passed and args.kernel and not args.kernel_for:
        _suggest_kernel_for(args.op, err)
    return code


def _suggest_kernel_for(op: str, err) -> None:
    """A kernel tested as an in-place or out= overload that fails may simply be its functional
    sibling's (the usual file): say how to test it as that."""
    from bbagent.harness.interface import functional_of, op_name, resolve_op
    try:
        functional = functional_of(resolve_op(op))
    except Exception:  # noqa: BLE001 - only a hint: no hint where the overload cannot be read
        return
    if functional is not None and op_name(functional) != op:
        err.print(f"hint: {op} writes its result into an argument; if the file's kernel computes "
                  f"{op_name(functional)} (returns a new tensor), pass --kernel-for {op_name(functional)} and it is "
                  f"tested as {op} through bbagent's adapter")


def _print_verdict(args, out, verdict) -> int:
    if args.json:
        print(verdict.model_dump_json(indent=2))
    else:
        from bbagent.agent.reports.console import print_verdict
        print_verdict(out, verdict)
    return EXIT_OK if verdict.passed else EXIT_FAIL


def cmd_bench(args, out, err) -> int:
    from bbagent.agent.reports.bench import print_bench, summary_line
    from bbagent.agent.reports.console import print_verdict

    def started(run_dir: Path) -> None:
        what = ("testing, then timing on the problem's inputs" if args.problem
                else f"testing, then timing up to {args.max_shapes} trace shapes")
        err.print(f"bbagent bench {args.op or args.problem}: {what}; run directory {run_dir}")
    with _waiting(err, "evaluating and timing"):
        if args.op and args.allow_library != "gemm":
            raise UsageError("--allow-library applies to a program's answer (--problem), not to an operator's kernel")
        program = {"allow_library": args.allow_library} if args.problem else {}
        result = api.bench(args.op, args.kernel, problem=args.problem, kernel_for=args.kernel_for, root=args.root,
                           max_shapes=args.max_shapes, **program,
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
        print(json.dumps({"op": args.op or str(args.problem), "verdict": verdict.verdict, "run_dir": str(result.run_dir),
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
    from bbagent.agent.families import families
    if args.family and args.family not in families():
        err.print(f"[yellow]warning:[/yellow] no prompt family '{args.family}'; the families are: "
                  f"{', '.join(sorted(families()))}")
    shown = api.ops(args.suite, pattern=args.pattern, family=args.family)
    if args.pattern and not shown:
        err.print(f"[yellow]warning:[/yellow] no overload name contains '{args.pattern}'")
    if args.json:
        print(json.dumps(shown, indent=1))
        return EXIT_OK
    from bbagent.agent.reports.console import print_ops
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
    from bbagent.agent.reports.console import print_kernels
    print_kernels(out, entries)
    return EXIT_OK


def cmd_logs(args, out, err) -> int:
    from bbagent.agent.providers.call_log import FILE_NAME, LLMLog
    root = api.resolve_root(args.root)
    if args.op:
        from bbagent.agent.judging import check_op
        try:
            check_op(args.op)
        except UsageError as exc:
            err.print(f"[yellow]warning:[/yellow] {exc}")
    calls = []
    if not (root / "runs" / FILE_NAME).exists():
        err.print(f"[yellow]warning:[/yellow] no call log at {root / 'runs' / FILE_NAME}: no LLM call was made "
                  "there (pass --root DIR or set BBAGENT_ROOT to read another folder)")
    else:
        calls = LLMLog(root / "runs" / FILE_NAME).calls(op=args.op, run_id=args.run, model=args.model,
                                                        search=tuple(args.query), last=args.count, call_id=args.id)
        asked = [(flag, value) for flag, value in (("--op", args.op), ("--run", args.run), ("--model", args.model),
                                                   *(("-q", text) for text in args.query), ("--id", args.id))
                 if value is not None]
        if not calls and asked:
            err.print("[yellow]warning:[/yellow] no recorded call matches "
                      + " and ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in asked))
    from bbagent.agent.reports.console import call_as_json, print_call, print_calls
    if args.id is not None:
        if not calls:
            raise UsageError(f"no recorded call numbered {args.id}{' matches' if len(asked) > 1 else ''} in "
                             f"{root / 'runs' / FILE_NAME}: `bbagent logs` lists the calls with their ids")
        if args.json:
            print(json.dumps(call_as_json(calls[0]), indent=1))
        else:
            print_call(out, calls[0])
        return EXIT_OK
    if args.json:
        print(json.dumps([call_as_json(call) for call in calls], indent=1))
        return EXIT_OK
    print_calls(out, calls)
    return EXIT_OK


def cmd_schema(args, out, err) -> int:
    if args.document == "kernel-meta":
        from bbagent.agent.review.meta import kernel_meta_schema
        print(json.dumps(kernel_meta_schema(), indent=2))
    else:
        print(json.dumps(api.verdict_schema(), indent=2))
    return EXIT_OK


def cmd_prompt(args, out, err) -> int:
    if args.problem is not None:
        return _program_prompt(args, err)
    from bbagent.agent.generate.posed import posed_operator
    from bbagent.agent.generate.prompting import render_feedback
    options = _generate_options(args, with_defaults=True)
    operator = posed_operator(args.op, options["exact_overload"])
    computation, serves = operator.key, list(operator.serves)
    if args.round_feedback is None:
        from bbagent.agent.generate.start import probe_the_gpu
        from bbagent.agent.reports.console import RoundReporter
        from bbagent.harness.interface import default_device
        probe_the_gpu(args.device or default_device(), RoundReporter(err))  # told on stderr, as generate tells it
        text, template = api.prompt(args.op, exact_overload=options["exact_overload"], device=args.device,
                                    channels_last=options["channels_last"], dsl=options["dsl"]), operator.prompt_template
    else:
        verdict = _read_verdict(args.round_feedback)
        if verdict.op not in (args.op, computation, *serves):
            raise UsageError(f"--round-feedback {args.round_feedback} is a Verdict of {verdict.op}, not of {args.op}: "
                             f"pass a verdict.json of a run of {computation}")
        if verdict.passed and verdict.geomean_speedup() is not None:
            baseline = options["target_baseline"] or operator.problem.default_baseline
            text = operator.performance_feedback(verdict, target=options["target_speedup"], target_baseline=baseline,
                                                 target_roof=options["target_roof"])
            template = operator.performance_template
        else:
            text, template = render_feedback(verdict), "feedback.j2"
    if operator.variant_of is not None:
        err.print(f"{args.op} is a calling convention of {computation}: this is the prompt for {computation}, "
                  "as generate sends it (--exact-overload asks for the overload itself)")
    from bbagent.agent.generate.testable import listed_without_tests
    untested = listed_without_tests([computation, *serves])
    if untested:
        err.print(f"note: the shipped listing has no test for {computation} ({untested}); generate builds its "
                  "suite before asking the model and refuses it if the suite is empty (`bbagent ops` lists what "
                  "can be tested)")
    if args.json:
        print(json.dumps({"op": computation, "requested": args.op, "serves": serves, "family": operator.family,
                          "template": template, "prompt": text}, indent=2))
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _program_prompt(args, err) -> int:
    """``prompt --problem FILE``: the first message for a program problem."""
    from bbagent.agent.judging import program_of
    from bbagent.agent.generate.program_prompting import program_families, render_program_prompt
    if args.round_feedback is not None:
        raise UsageError("--round-feedback reads an operator's Verdict; a program's feedback comes with its verdict "
                         "(bbagent eval --problem), which this bbagent does not have yet")
    from bbagent.agent.generate.start import probe_the_gpu
    from bbagent.agent.reports.console import RoundReporter
    from bbagent.harness.interface import default_device
    problem, facts = program_of(args.problem)
    device = args.device or default_device()
    probe_the_gpu(device, RoundReporter(err))  # told on stderr, as generate tells it
    text = render_program_prompt(problem, facts, device=device, library=args.allow_library or "gemm",
                                 dsl=args.dsl or "triton")
    if facts.trace_error:
        err.print(f"note: the shape-only run of {problem.name}'s forward stopped early ({facts.trace_error}); the "
                  "prompt lists the operators found before it")
    if args.json:
        print(json.dumps({"problem": problem.name, "path": problem.path, "level": problem.level,
                          "template": "program.j2", "families": program_families(facts),
                          "facts": facts.model_dump(), "prompt": text}, indent=2))
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _read_verdict(path: Path):
    from pydantic import ValidationError

    from bbagent.harness.interface import Verdict
    try:
        return Verdict.model_validate_json(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the Verdict {path}: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise UsageError(f"{path} is not a Verdict ({exc.error_count()} problem(s); first: {where}: {first['msg']}); "
                         "pass a verdict.json from a run or `bbagent eval --json` output") from None


def _generate_options(args, with_defaults: bool = False) -> dict:
    """The GenerateOptions fields given on the command line, each read from its own flag
    (``agent.options.option_flags``; a batch's per-operator budgets are the run's); a field not
    given is None, or with ``with_defaults`` its default."""
    from bbagent.agent.options import GenerateOptions, option_flags
    values = {}
    for flag in option_flags(batch=args.command == "batch"):
        value = getattr(args, flag.arguments["dest"])
        if value is None and with_defaults:
            value = GenerateOptions.model_fields[flag.field].default
        values[flag.field] = value
    return values


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (a scheduler's stop, a closed session) ends the command as Ctrl-C does
    (``agent.errors.Terminated``) instead of killing it mid-write."""
    def terminated(signum, frame):
        raise Terminated("stopped by SIGTERM")
    try:
        previous = signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread (the API called from a thread): leave it as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def cmd_batch(args, out, err) -> int:
    from rich.markup import escape

    from bbagent.agent.batch.display import BatchDisplay
    from bbagent.agent.options import GenerateOptions
    fields = _generate_options(args)
    plan = dict(jobs=args.jobs, gpus=args.gpus, evals_per_gpu=args.evals_per_gpu, llm_concurrency=args.llm_concurrency, force=args.force,
                retry_failed=args.retry_failed,
                lease_s=args.lease, max_cost_usd=args.max_cost_usd, max_tokens=args.max_tokens, deadline=args.deadline,
                executor=args.executor, ray_address=args.ray_address, ray_resource=args.ray_resource)
    with BatchDisplay(err) as display:
        if args.resume:  # the batch's own options; only those given here are passed, to be refused where they differ
            given = {PER_OP.get(k, k): v for k, v in fields.items() if v is not None}
            result = api.batch(root=args.root, resume=args.resume, report=display.hear, **plan, **given)
        else:
            result = api.batch(args.ops, GenerateOptions.of(batch=True, **fields), root=args.root, ops_file=args.ops_file,
                               suite=args.suite, family=args.family, dataset=args.dataset,
                               include_synthetic=args.include_synthetic, kernelbench=args.kernelbench,
                               level=args.level, problems=args.problems, report=display.hear, **plan)
    c = result.counts
    resume = f"bbagent batch --resume {result.batch_id} --root {shlex.quote(str(result.path.parent.parent))}"
    if args.json:
        print(json.dumps({"batch_id": result.batch_id, "path": str(result.path), "counts": c,
                          "interrupted": result.interrupted, "nothing_to_do": result.nothing_to_do}))
    elif result.nothing_to_do:
        out.print(f"{result.batch_id}: nothing to do ({c['accepted']} accepted, {c['failed']} failed, "
                  f"{c['skipped']} skipped of {c['total']}); nothing changed"
                  + (f"; run the failed ones again with: {resume} --retry-failed"
                     if c["failed"] and not args.retry_failed else ""))
    else:
        out.print(f"{result.batch_id}: {c['accepted']} accepted, {c['failed']} failed, {c['skipped']} skipped, "
                  f"{c['interrupted']} interrupted of {c['total']}; summary in {result.path / 'summary.md'}")
    if result.ended_by:
        err.print(f"stopped early: {escape(result.ended_by)}; continue with: {escape(resume)}")
    if result.interrupted:
        err.print(f"interrupted; continue with: {escape(resume)}")
        return EXIT_INTERRUPTED
    return EXIT_FAIL if c["failed"] or c["pending"] or c["running"] else EXIT_OK


def cmd_cache(args, out, err) -> int:
    from bbagent.agent.caches import caches, clear
    root = api.resolve_root(args.root)
    if args.action == "list":
        if args.names or args.dry_run:
            raise UsageError("names and --dry-run go with `bbagent cache clear NAME...`")
        found = caches(root)
        if args.json:
            print(json.dumps([c.row() for c in found]))
            return EXIT_OK
        for c in found:
            out.print(f"{c.name:<9} {c.entries:>6} entries {c.bytes / 2**20:>10.1f} MiB  {c.path}  ({c.what})",
                      markup=False)
        return EXIT_OK
    if not args.names:
        raise UsageError("cache clear needs what to clear: suites, triton, timing, devices, workdirs or all")
    removed = clear(root, args.names, dry_run=args.dry_run)
    if args.json:
        print(json.dumps([c.row() for c in removed]))
        return EXIT_OK
    verb = "would remove" if args.dry_run else "removed"
    for c in removed:
        out.print(f"{verb} {c.name}: {c.entries} entries, {c.bytes / 2**20:.1f} MiB ({c.path})", markup=False)
    return EXIT_OK


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
        left = result["workdirs"]
        if left["folders"]:
            out.print(f"{verb} {left['folders']} working folder(s) of ended bbagent processes "
                      f"({left['bytes'] / 2**20:.1f} MiB)")
        return EXIT_OK
    if args.older_than is not None or args.dry_run:
        raise UsageError("--older-than and --dry-run go with `bbagent runs prune`")
    entries = api.runs(args.root)
    if args.json:
        print(json.dumps(entries, default=str))
        return EXIT_OK
    if not entries:
        err.print(f"no runs under {api.resolve_root(args.root) / 'runs'}")
    else:
        out.print(f"{'run':<52} {'kind':<5} {'status':<11} {'op':<34} cost", markup=False)
    for e in entries:
        why = "a call in flight, or lost in flight at a kill" if e.get("call_in_flight") else "no price for the model"
        cost = cost_text(e["cost_usd"], e.get("cost_complete", True), why=why) if e.get("cost_usd") is not None else ""
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
    how = "compiled by torch.compile, alone and" if args.compile or args.train or args.gate else "eagerly and"
    what = f"{args.steps} training steps of " if args.train else ""
    with _waiting(err, f"running {what}{args.model or args.script} {how} with the kernels enabled"):
        result = api.check_model(args.model, script=args.script, root=args.root, device=args.device, dtype=args.dtype,
                                 config=_settings(args.set), ops=ops, include_unreviewed=args.include_unreviewed,
                                 include_slower=args.include_slower, atol=args.atol, rtol=args.rtol,
                                 repeats=args.repeats, iterations=args.iterations, seed=args.seed,
                                 compile=args.compile is not None, mode=args.compile or "default",
                                 train=args.train, steps=args.steps, gate=args.gate, timeout_s=args.timeout)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        from bbagent.agent.reports.console import print_check_model
        print_check_model(out, result)
    if result.get("status") == "nothing_served":
        return EXIT_NOTHING_CHECKED
    return EXIT_OK if result["match"] else EXIT_FAIL


def cmd_regions(args, out, err) -> int:
    with _waiting(err, f"compiling {args.model or args.script} and searching the graphs inductor receives"):
        found = api.regions(args.model, script=args.script, root=args.root, device=args.device,
                            config=_settings(args.set), dtype=args.dtype, out=args.out, backward=args.backward)
    if args.json:
        print(found.model_dump_json(indent=1))
        return EXIT_OK
    from bbagent.agent.reports.console import print_regions
    print_regions(out, found)
    return EXIT_OK


def cmd_report(args, out, err) -> int:
    from bbagent.agent.reports.html import NO_MATPLOTLIB, can_draw
    with _waiting(err, "drawing the report"):
        path = api.report(args.ident, root=args.root, out=args.out)
    if not can_draw():
        from rich.markup import escape
        err.print(escape(NO_MATPLOTLIB))
    print(path)
    return EXIT_OK


def cmd_review(args, out, err) -> int:
    from bbagent.cli.review import run
    return run(args, out, err)


def cmd_status(args, out, err) -> int:
    from rich.markup import escape

    from bbagent.agent.run_record import one_line
    status = api.batch_status(args.batch_id, root=args.root)
    if args.json:
        print(json.dumps(status, default=str))
        return EXIT_OK
    c, alive = status["counts"], status["liveness"]
    from bbagent.agent.batch.ledger import LIVENESS
    colour = dict(zip(LIVENESS, ("green", "red", "yellow", "bold")))[alive["state"]]  # a colour per state
    out.print(f"{status['batch_id']}: [{colour}]{alive['state']}[/{colour}]"
              + (f" ({escape(alive['reason'])})" if alive["reason"] else ""))
    was = "running when it died" if alive["state"] == "dead" else "running"
    out.print(f"{c['accepted']} accepted, {c['failed']} failed, {c['running']} {was}, {c['pending']} pending, "
              f"{c['skipped']} skipped, {c['interrupted']} interrupted of {c['total']}")
    if status["activity"]:
        from bbagent.agent.batch.display import panel
        age = time.time() - status["activity"]["at"]
        out.print(f"as of {age:.0f} s ago:")
        out.print(panel(status["activity"]))
    elif (status.get("last_activity") or {}).get("gpus"):  # a batch no longer running: its last session's GPUs
        from bbagent.agent.batch.display import gpu_lines
        for line in gpu_lines(status["last_activity"]["gpus"]):
            out.print(escape(line))
    for row in status["ops"]:
        why = f"  {row['error_class']}: {escape(one_line(row['error']))}" if row["error_class"] else ""
        out.print(f"  {row['op']:<40} {row['state']:<11} attempts {row['attempts']}{why}")
    if status["resume"]:
        out.print(f"continue it with: {escape(status['resume'])}")
    return EXIT_OK


def cmd_generate(args, out, err) -> int:
    from rich.markup import escape

    from bbagent.agent.reports.console import round_reporter
    report = round_reporter(err)
    outcome = api.generate(args.op, problem=args.problem, root=args.root, report=report, **_generate_options(args))
    report.stop_waiting()
    message = escape(outcome.message)
    if outcome.run_dir is None:  # refused before it began: nothing was asked or written
        err.print(f"[red]error:[/red] {message}" if outcome.status == "error" else message)
        return _exit_of(outcome)
    if outcome.status == "interrupted":
        err.print(f"[yellow]interrupted[/yellow]; the run is recorded as interrupted in {outcome.run_dir}")
        return EXIT_INTERRUPTED
    spent = outcome.spent
    err.print(f"spent: {spent.input_tokens} input + {spent.output_tokens} output tokens, "
              f"{cost_text(spent.cost_usd, spent.cost_complete)}"
              f"; {spent.cached_calls} answer(s) from the call log")
    if outcome.status == "accepted":
        out.print(f"[green]accepted[/green] after {outcome.rounds_used} round(s): {outcome.accepted_dir}\n{message}")
        return EXIT_OK
    if outcome.status == "stopped":
        out.print(f"[yellow]stopped:[/yellow] {message}; nothing written to generated_kernels/. "
                  f"Transcript: {outcome.run_dir}")
        return EXIT_FAIL
    if outcome.status == "error":
        err.print(f"[red]error:[/red] {message}\nrun recorded in {outcome.run_dir}")
        return _exit_of(outcome)
    out.print(f"[red]not accepted:[/red] {message}; nothing written to generated_kernels/. "
              f"Transcript: {outcome.run_dir}")
    return EXIT_FAIL


def _exit_of(outcome) -> int:
    """The exit code of a run that ended in error or never started, by why: input it cannot take,
    the provider, Ctrl-C, the machine refusing a write; the rest (a bug, the machine that runs
    evaluations failing) is internal."""
    from bbagent.agent.run_record import StoppedBecause  # here: loading the command line loads no pydantic
    exits = {StoppedBecause.USAGE: EXIT_USAGE, StoppedBecause.SETUP: EXIT_PROVIDER,
             StoppedBecause.PROVIDER_ERROR: EXIT_PROVIDER, StoppedBecause.INTERRUPTED: EXIT_INTERRUPTED,
             StoppedBecause.MACHINE: EXIT_MACHINE}
    return exits.get(outcome.stopped_because, EXIT_INTERNAL)


def cmd_export(args, out, err) -> int:
    if args.kernelbench is None:
        return _export_package(args, out, err)
    result = api.export_kernelbench(args.kernelbench, root=args.root, include_unreviewed=args.include_unreviewed,
                                    samples=args.samples)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for row in result["written"]:
            what = (f"v{row['version']}, {row['status']}" if "version" in row
                    else f"{row['run_id']}, {'passed' if row['passed'] else 'failed'}")
            out.print(f"{row['problem']} sample {row['sample']} ({what}) -> {args.kernelbench / row['file']}",
                      markup=False)
        for row in result["left_out"]:
            err.print(f"left out {row['problem']}: {row['why']}", markup=False)
        runs_dir = shlex.quote(str(args.kernelbench.expanduser().absolute()))
        for level in result["levels"]:
            out.print(f"KernelBench evaluates level {level} with: uv run python scripts/eval_from_generations.py "
                      f"runs_dir={runs_dir} run_name=level{level} level={level} dataset_src=local backend=triton "
                      f"num_samples_per_problem={result['samples_per_problem']}; bbagent's verdicts: "
                      f"{runs_dir}/bbagent-level{level}/eval_results.json", markup=False)
    if not result["written"]:
        err.print("nothing written: no " + ("first-round answer to a KernelBench problem under runs/"
                                             if args.samples == "first-round" else
                                             "accepted answer to a KernelBench problem" + (
                                                 "" if args.include_unreviewed else
                                                 " is approved (bbagent review approve KEY, or --include-unreviewed)")))
        return EXIT_FAIL
    return EXIT_OK


def _export_package(args, out, err) -> int:
    """export --package / --hf-kernels / --backendbench."""
    target, folder = next((name, getattr(args, name.replace("-", "_"))) for name in ("package", "hf-kernels",
                                                                                     "backendbench")
                          if getattr(args, name.replace("-", "_")) is not None)
    if target != "backendbench" and not args.name:
        raise UsageError(f"export --{target} needs --name NAME, the Python package's name")
    result = api.export_package(folder, args.name or "", root=args.root, include_unreviewed=args.include_unreviewed,
                                target=target)
    if args.json:
        print(json.dumps(result, indent=1))
        return EXIT_OK
    for row in result["written"]:
        out.print(f"{row['kernel']} (v{row['version']}, {row['status']}, sha256 {row['sha256'][:12]}) -> "
                  f"{folder / row['file']}")
    for row in result["left_out"]:
        err.print(f"left out {row.get('overload') or row['kernel']}: {row['why']}")
    if result.get("wheel"):
        out.print(f"wheel: {result['wheel']} (pip install it; python -m {args.name} check runs the self-tests)")
    out.print(f"manifest: {result['manifest']}")
    return EXIT_OK


COMMANDS = {"generate": cmd_generate, "batch": cmd_batch, "status": cmd_status, "prompt": cmd_prompt, "eval": cmd_eval,
            "bench": cmd_bench, "ops": cmd_ops, "kernels": cmd_kernels, "logs": cmd_logs, "schema": cmd_schema,
            "runs": cmd_runs, "cache": cmd_cache, "review": cmd_review, "check-model": cmd_check_model,
            "regions": cmd_regions, "report": cmd_report,
            "export": cmd_export}
