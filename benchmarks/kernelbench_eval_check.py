"""bbagent's KernelBench answers judged by KernelBench's own evaluation, side by side with bbagent's.

Real KernelBench problems that have both a right and a wrong hand-written answer
(``benchmarks/kernelbench_answers/``) go through two ``bbagent batch --kernelbench`` runs against
the tests' fake OpenAI server (one round; the first batch answers right, the second wrong), so each
problem has two first-round answers. ``bbagent export --kernelbench --samples first-round`` writes
them as samples 0 and 1 with bbagent's verdicts (``bbagent-level<L>/eval_results.json``); then
KernelBench's ``scripts/eval_from_generations.py`` (from a snapshot of its repository, never
committed) evaluates the same files on the GPU (``backend=triton``, two samples per problem,
pass@k), and ``scripts/benchmark_eval_analysis.py`` reads both result folders. Each sample's
correctness and runtime, bbagent's against KernelBench's, is written to ``OUT/compare.json`` and
printed.

    python3 benchmarks/kernelbench_eval_check.py --kernelbench-repo .kernelbench-repo --out OUT

KernelBench's scripts import two libraries for remote work that local evaluation never calls
(``modal``, ``litellm``); where they are not installed, stand-ins that fail if called are put on
the path. ``--device cpu`` runs the bbagent half only (KernelBench's evaluation needs CUDA).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSWERS = Path(__file__).parent / "kernelbench_answers"
sys.path.insert(0, str(ROOT / "tests"))
from fake_llm import FakeLLMServer  # noqa: E402 - the tests' fake server, speaking the OpenAI wire format

# Stand-ins for the remote-work libraries KernelBench's scripts import at their top: any attribute,
# call or decoration gives the stand-in back; local evaluation never calls into them.
STAND_IN = '''"""A stand-in for {name}: KernelBench's local evaluation imports it and never calls it."""
class _Anything:
    def __getattr__(self, name):
        return _Anything()

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return _Anything()

    def __iter__(self):
        return iter(())


def __getattr__(name):
    return _Anything()
'''


def problems() -> dict[str, tuple[Path, Path]]:
    """Each problem (``level1/20_LeakyReLU``) that has a right and a wrong answer: (right, wrong)."""
    found: dict[str, dict[bool, Path]] = {}
    for path in sorted(ANSWERS.glob("level*/*.py")):
        problem, _, flaw = path.stem.partition("--")
        found.setdefault(f"{path.parent.name}/{problem}", {})[bool(flaw)] = path
    return {key: (pair[False], pair[True]) for key, pair in found.items() if len(pair) == 2}


def run_batches(repo: Path, work: Path, chosen: dict[str, tuple[Path, Path]], device: str) -> None:
    checkout = work / "checkout" / "KernelBench"
    for key in chosen:
        (checkout / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / "KernelBench" / f"{key}.py", checkout / f"{key}.py")
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake"}
    for wrong in (False, True):
        answers = {f"`{Path(key).name}`": f"Here is ModelNew.\n\n```python\n{pair[wrong].read_text()}```\n"
                   for key, pair in chosen.items()}
        with FakeLLMServer().answer_by_op(answers) as server:
            done = subprocess.run([sys.executable, "-m", "bbagent", "batch", "--kernelbench", str(checkout.parent),
                                   "--provider", "openai", "--model", "fake-kernelbench", "--base-url",
                                   server.url + "/v1", "--rounds", "1", "--device", device, "--seed", "1", "--force",
                                   "--root", str(work / "root")], capture_output=True, text=True, env=env,
                                  timeout=1800)
        print(f"bbagent batch ({'wrong' if wrong else 'right'} answers): exit {done.returncode}", flush=True)
        (work / f"batch-{'wrong' if wrong else 'right'}.stderr").write_text(done.stderr)


def kernelbench_copy(repo: Path, work: Path, chosen: dict) -> Path:
    """KernelBench's scripts and package, and only the chosen problems (its dataset lists what its
    level folders hold); stand-ins for what is missing here."""
    copy = work / "kernelbench"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(repo / "scripts", copy / "scripts")
    shutil.copytree(repo / "src", copy / "src")
    for key in chosen:
        (copy / "KernelBench" / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / "KernelBench" / f"{key}.py", copy / "KernelBench" / f"{key}.py")
    stand_ins = copy / "stand_ins"
    stand_ins.mkdir()
    for name in ("modal", "litellm"):
        if subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True).returncode != 0:
            (stand_ins / name).mkdir()  # a package: modal.experimental is imported too
            for module in ("__init__", "experimental"):
                (stand_ins / name / f"{module}.py").write_text(STAND_IN.format(name=name))
    return copy


def kernelbench_eval(copy: Path, runs: Path, level: int, samples: int, log: Path, perf_trials: int) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy / "src"), str(copy / "stand_ins"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "scripts/eval_from_generations.py", f"run_name=level{level}",
                           f"runs_dir={runs}", f"level={level}", "dataset_src=local", "backend=triton",
                           f"num_samples_per_problem={samples}", "gpu_arch=['Hopper']", "timeout=300",
                           f"num_perf_trials={perf_trials}",
                           f"pass_at_k_values={list(range(1, samples + 1))}"],
                          cwd=copy, capture_output=True, text=True, env=env, timeout=1800)
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    print(f"KernelBench eval_from_generations.py level {level}: exit {done.returncode}", flush=True)
    results = runs / f"level{level}" / "eval_results.json"
    return json.loads(results.read_text()) if results.is_file() else {}


def kernelbench_analysis(copy: Path, runs: Path, level: int, baseline: Path, log: Path) -> dict:
    """benchmark_eval_analysis.py on KernelBench's results and on bbagent's, against one baseline."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy / "src"), str(copy / "stand_ins"),
                                                        os.environ.get("PYTHONPATH", "")])}
    found = {}
    for run_name in (f"level{level}", f"bbagent-level{level}"):
        output = log.parent / f"analysis-{run_name}.json"
        done = subprocess.run([sys.executable, "scripts/benchmark_eval_analysis.py", f"run_name={run_name}",
                               f"level={level}", "hardware=H200", "baseline=eager", f"baseline_file={baseline}",
                               f"eval_results_dir={runs}", f"output_file={output}"],
                              cwd=copy, capture_output=True, text=True, env=env, timeout=600)
        with log.open("a") as f:
            f.write(f"=== {run_name}: exit {done.returncode}\n{done.stdout}\n{done.stderr}\n")
        found[run_name] = json.loads(output.read_text()) if output.is_file() else {"exit": done.returncode}
    return found


def eager_baseline(ours: dict, exported: list[dict], level: int, where: Path) -> Path:
    """A baseline file as KernelBench's analysis reads it (``level<L>: {problem name: {mean}}``), from
    the eager times bbagent measured beside each sample."""
    names = {row["problem"].split("/")[-1].split("_", 1)[0]: row["problem"].split("/")[-1] for row in exported}
    table = {}
    for number, rows in ours.items():
        eager = [r["runtime_stats"]["eager_mean"] for r in rows if "eager_mean" in r.get("runtime_stats", {})]
        if eager and number in names:
            table[f"{names[number]}.py"] = {"mean": sum(eager) / len(eager)}
    path = where / f"baseline-level{level}.json"
    path.write_text(json.dumps({f"level{level}": table}, indent=1))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench-repo", type=Path, required=True, help="a snapshot of KernelBench's repository")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bbagent-kernelbench-eval"))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--levels", default="2,1", help="the levels KernelBench evaluates, in this order")
    parser.add_argument("--perf-trials", type=int, default=100, help="KernelBench's num_perf_trials")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the batches and the export already in --work (KernelBench's evaluation only)")
    args = parser.parse_args()
    repo, work = args.kernelbench_repo.resolve(), args.work.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = problems()
    runs = work / "kb-runs"
    if not (args.reuse and (work / "export.json").is_file()):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        print(f"{len(chosen)} problems with a right and a wrong answer: {', '.join(chosen)}", flush=True)
        run_batches(repo, work, chosen, args.device)
        done = subprocess.run([sys.executable, "-m", "bbagent", "export", "--kernelbench", str(runs), "--samples",
                               "first-round", "--root", str(work / "root"), "--json"], capture_output=True, text=True)
        (work / "export.json").write_text(done.stdout)
    exported = json.loads((work / "export.json").read_text())
    print(f"bbagent export: {len(exported['written'])} samples, levels {exported['levels']}", flush=True)
    compare: dict = {"problems": list(chosen), "export": exported, "levels": {}}
    copy = kernelbench_copy(repo, work, chosen) if args.device == "cuda" else None
    for level in [int(n) for n in args.levels.split(",") if int(n) in exported["levels"]]:
        ours = json.loads((runs / f"bbagent-level{level}" / "eval_results.json").read_text())
        theirs = (kernelbench_eval(copy, runs, level, exported["samples_per_problem"],
                                   args.out / f"eval_from_generations-level{level}.log", args.perf_trials)
                  if copy else {})
        rows = []
        for number, samples in ours.items():
            for ours_row in samples:
                their_row = next((r for r in theirs.get(number, []) if r["sample_id"] == ours_row["sample_id"]), {})
                rows.append({"problem": number, "sample": ours_row["sample_id"],
                             "bbagent_correct": ours_row["correctness"], "kernelbench_correct": their_row.get("correctness"),
                             "bbagent_ms": ours_row["runtime"], "kernelbench_ms": their_row.get("runtime"),
                             "kernelbench_metadata": their_row.get("metadata")})
        level_result = {"samples": rows, "agree": sum(r["bbagent_correct"] == r["kernelbench_correct"] for r in rows)}
        if copy:
            baseline = eager_baseline(ours, exported["written"], level, args.out)
            level_result["analysis"] = kernelbench_analysis(copy, runs, level, baseline,
                                                            args.out / f"analysis-level{level}.log")
            for name in ("pass_at_k_results.json", "eval_results.json"):
                for run_name in (f"level{level}", f"bbagent-level{level}"):
                    if (runs / run_name / name).is_file():
                        shutil.copyfile(runs / run_name / name, args.out / f"{run_name}-{name}")
        compare["levels"][level] = level_result
        print(f"level {level}: {level_result['agree']} of {len(rows)} samples judged alike", flush=True)
        for r in rows:
            print(f"  problem {r['problem']:>3} sample {r['sample']}: bbagent {r['bbagent_correct']!s:5} "
                  f"{r['bbagent_ms']:8.4f} ms | KernelBench {r['kernelbench_correct']!s:5} "
                  f"{r['kernelbench_ms'] if r['kernelbench_ms'] is not None else float('nan'):8.4f} ms", flush=True)
        (args.out / "compare.json").write_text(json.dumps(compare, indent=1) + "\n")  # after each level


if __name__ == "__main__":
    main()
