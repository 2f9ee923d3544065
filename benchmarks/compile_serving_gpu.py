"""Issue 63 on the GPU: regions of real models, hand-written answers to some of them judged and
approved the way a model's answers are, and the models compiled with and without them.

    python benchmarks/compile_serving_gpu.py regions --out $OUT
    python benchmarks/compile_serving_gpu.py judge --out $OUT --answer REGION=ANSWER.py [--answer ...]
    python benchmarks/compile_serving_gpu.py check --out $OUT

A REGION is a hash, or ``MODEL|OPS|TEXT``: the most frequent region of MODEL whose operators'
packet names are OPS (comma-separated) and whose problem file holds TEXT (a convolution's stride
and padding), for a region whose hash is not known before it is found.

``regions``: ``bbagent regions --json`` of the built-in transformer and of resnet18 (default
settings), in ``OUT/regions-<model>-json.txt``.

``judge``: the same regions found again (their hashes are the same on the same machine and
stack), then each ``--answer`` given to ``bbagent generate --problem`` through the real OpenAI
client from a fake server on 127.0.0.1 (``tests/fake_llm.py``) that answers with the file: judged
(the program verdict, timed against eager and torch.compile) and, when accepted, approved with
``bbagent review approve``, under ``/tmp/compile-serving/root``. ``check``: ``bbagent check-model
--compile`` of each model on them (``--gates``): served as each answer's own measurement allows (at
least as fast as torch.compile), with ``--include-slower``, or as the whole-model gate decides
(``--gate``, its plan's set then measured again alone), in each of ``--modes``. Every command's
output goes to ``OUT/commands.log``; ``OUT/summary.json`` gathers the verdicts, speedups and end-to-end tables.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MODELS = {"transformer": [], "resnet18": []}  # default settings for both
TESTS = Path(__file__).resolve().parent.parent / "tests"


def bbagent(out: Path, step: str, *argv: str, cwd: Path, env: dict | None = None, timeout: float = 1500,
            program: tuple = ("-m", "bbagent")) -> subprocess.CompletedProcess:
    """One command (``program``: bbagent, or a script) in ``cwd``, its output appended to
    ``OUT/commands.log``."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *program, *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    with (out / "commands.log").open("a") as log:  # one file: a device call brings back only a few
        log.write(f"=== {step}\n$ {' '.join(program)} {' '.join(argv)}\n# exit {done.returncode}, "
                  f"{time.perf_counter() - started:.1f} s\n{done.stdout[-20000:]}\n--- stderr ---\n{done.stderr[-6000:]}\n")
    print(f"{step}: exit {done.returncode} in {time.perf_counter() - started:.1f} s", flush=True)
    return done


def find_regions(out: Path, work: Path) -> dict[str, dict]:
    """Each model's survey (``bbagent regions --json``), its table printed beside."""
    surveys = {}
    for model, settings in MODELS.items():
        found = bbagent(out, f"regions-{model}-json", "regions", "--model", model, *settings, "--device", "cuda",
                        "--json", "--out", str(work / "problems" / model), cwd=work)
        if found.returncode == 0:
            surveys[model] = json.loads(found.stdout)
    return surveys


def judge(out: Path, work: Path, answers: dict[str, Path]) -> dict:
    """The regions found again, each answer generated (through the fake server), judged and approved."""
    sys.path.insert(0, str(TESTS))
    from fake_llm import FakeLLMServer
    surveys = find_regions(out, work)
    files = {r["hash"]: (model, f) for model, s in surveys.items() for r, f in zip(s["regions"], s["files"])}
    root = work / "root"
    judged = []
    for wanted, answer in answers.items():
        region_hash = _region_hash(wanted, surveys)
        if region_hash not in files:
            judged.append({"region": wanted, "answer": answer.name, "error": "no such region found"})
            continue
        model, problem = files[region_hash]
        text = f"```python\n{answer.read_text()}```\n"
        with FakeLLMServer().answer(text) as server:
            env = {**os.environ, "OPENAI_API_KEY": "sk-fake"}
            done = bbagent(out, f"generate-{region_hash}", "generate", "--problem", problem, "--rounds", "1",
                           "--provider", "openai", "--model", "gpt-fake", "--base-url", server.url + "/v1",
                           "--root", str(root), "--device", "cuda", "--seed", "1", cwd=work, env=env)
        row = {"hash": region_hash, "model": model, "answer": answer.name, "problem": Path(problem).name,
               "generate_exit": done.returncode}
        key = f"kernelbench/other/{Path(problem).stem}"
        meta_file = root / "generated_kernels" / key / "meta.json"
        if meta_file.is_file():
            meta = json.loads(meta_file.read_text())
            row["performance"] = meta.get("performance")
            approved = bbagent(out, f"approve-{region_hash}", "review", "approve", key, "--root", str(root), cwd=work)
            row["approved"] = approved.returncode == 0
        judged.append(row)
    return {"surveys": _surveyed(surveys), "judged": judged}


def check(out: Path, work: Path, gates: list[str], modes: list[str], models: list[str]) -> dict:
    """``check-model --compile`` of each model on the kernels ``judge`` approved under ``work``."""
    root = work / "root"
    if not (root / "generated_kernels").is_dir():
        return {"error": f"nothing judged under {root}: run the judge stage first on this machine"}
    judged = {}
    for meta_file in sorted((root / "generated_kernels").rglob("meta.json")):
        if "versions" in meta_file.parts:
            continue
        meta = json.loads(meta_file.read_text())
        judged[meta["op"]] = {"review": meta.get("review", {}).get("status"), "performance": meta.get("performance")}
    checks = {}
    for model in models:
        settings = MODELS[model]
        for mode in modes:
            for gate in gates:
                step = f"check-{model}-{mode}-{gate}"
                extra = {"gated": [], "include-slower": ["--include-slower"], "whole-model": ["--gate"]}[gate]
                checks[step] = _checked(out, step, work, model, settings, mode, extra)
                served = (checks[step].get("gate") or {}).get("served")
                if served:  # the plan's set measured again, on its own, as enable(model=..., mode=...) serves it
                    checks[f"{step}-plan"] = _checked(out, f"{step}-plan", work, model, settings, mode,
                                                      ["--include-slower", "--ops", ",".join(served)])
                (out / "summary.json").write_text(json.dumps({"judged": judged, "checks": checks}, indent=1))  # so far
    return {"judged": judged, "checks": checks}


def _checked(out: Path, step: str, work: Path, model: str, settings: list, mode: str, extra: list[str]) -> dict:
    """One ``check-model --compile MODE --json`` of ``model``, what it served and how fast."""
    done = bbagent(out, f"{step}-json", "check-model", "--model", model, *settings, "--device", "cuda",
                   "--compile", mode, *extra, "--root", str(work / "root"), "--repeats", "10", "--iterations", "20",
                   "--json", cwd=work)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        return {"exit": done.returncode, "stdout": done.stdout[-2000:], "stderr": done.stderr[-2000:]}
    compiled = result.get("compiled") or {}
    gate = compiled.get("gate")
    return {"exit": done.returncode, "status": result.get("status"), "timing": compiled.get("timing"),
            "compiled_calls": compiled.get("compiled_calls"), "compiled_sites": compiled.get("compiled_sites"),
            "regions": compiled.get("regions"), "gpu": result.get("gpu"),
            "max_abs_error": result.get("max_abs_error"),
            "compile_alone_max_abs_error": (compiled.get("compile_alone") or {}).get("max_abs_error"),
            "gate": gate and {"served": gate["served"], "left_out": gate["left_out"],
                              "sets": [{k: s[k] for k in ("members", "speedup", "low", "high")} for s in gate["sets"]]}}


def _surveyed(surveys: dict) -> dict:
    return {m: {"gpu_us": s["gpu_us"], "regions": [{k: r[k] for k in ("hash", "kind", "ops", "count", "gpu_us", "share")}
                                                   for r in s["regions"]]}
            for m, s in surveys.items()}


def _region_hash(wanted: str, surveys: dict) -> str | None:
    """``wanted``'s hash (module docstring)."""
    if "|" not in wanted:
        return wanted
    model, ops, text = wanted.split("|", 2)
    packets = ops.split(",")
    survey = surveys.get(model) or {"regions": [], "files": []}
    for region, file in zip(survey["regions"], survey["files"]):  # the most frequent first
        if [op.split(".")[1] for op in region["ops"]] == packets and text in Path(file).read_text():
            return region["hash"]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["regions", "judge", "check"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--answer", action="append", default=[], metavar="REGION=ANSWER.py")
    parser.add_argument("--gates", default="gated,include-slower",
                        help="check, comma-separated: served as each answer's own measurement allows (gated), every "
                             "approved one (include-slower), the whole-model gate's plan (whole-model: check-model "
                             "--gate, then the set it serves measured again on its own)")
    parser.add_argument("--modes", default="default,reduce-overhead", help="check: torch.compile modes, comma-separated")
    parser.add_argument("--models", default=",".join(MODELS), help="check: the models, comma-separated")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/compile-serving")
    work.mkdir(parents=True, exist_ok=True)
    if args.stage == "regions":
        summary = {"surveys": _surveyed(find_regions(args.out, work))}
    elif args.stage == "judge":
        answers = {pair.rsplit("=", 1)[0]: Path(pair.rsplit("=", 1)[1]).resolve() for pair in args.answer}
        summary = judge(args.out, work, answers)
    else:
        summary = check(args.out, work, args.gates.split(","), args.modes.split(","), args.models.split(","))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1)[:6000])


if __name__ == "__main__":
    main()
