"""Issue 81's GPU check: Helion answers judged, timed and served as Triton ones are.

On the GPU machine, with bbagent and Helion importable (``PYTHONPATH``):

1. per family (elementwise, reduction, normalization, matmul): the Helion worked example
   (``prompts/helion/examples/<family>.py``) benched with ``--dsl helion --baseline eager,inductor``, beside
   the Triton worked example of the same operator (``prompts/examples/<family>.py``) in the same run; and a
   wrong Helion answer made from the example (the mutations of ``tests/test_helion.py``), whose failure
   kind must be the one expected;
2. a KernelBench-format level-2 program (``tests/problems/level2/1_Gemm_ReLU_BiasAdd.py``) answered in
   Helion: right (benched against eager and torch.compile) and wrong;
3. ``generate --dsl helion --autotune-budget SECONDS`` of sigmoid through the replay provider (the wrong
   answer, then the right one), tuned by Helion's autotuner within the budget and judged again with the
   configs found pinned; the kernel approved, then served by ``bbagent.enable`` in a small model, eager
   and under torch.compile (where inductor's code must launch its Triton kernel), compared with eager
   PyTorch (the warnings it gave: a shape without a config);
4. the Helion layer_norm (the normalization example) generated through the replay provider, approved
   and served in the small transformer of ``check-model`` under torch.compile: its calls launched by
   inductor's code, the outputs as eager's, and the model timed: eager, torch.compile, torch.compile
   with the Helion layer_norm.

    python3 benchmarks/helion_check.py --out DIR

Writes ``DIR/helion-check.json`` (every verdict's summary) and prints a table; exit 1 if any
expectation failed.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CHECKOUT / "tests"))
from test_helion import FAMILIES  # noqa: E402 - the wrong answers the CPU tests use, the same here

PROBLEM = CHECKOUT / "tests" / "problems" / "level2" / "1_Gemm_ReLU_BiasAdd.py"
ANSWER = CHECKOUT / "tests" / "problems" / "answers" / "gemm_relu_bias_helion.py"
WRONG_PROGRAM = ("torch.where(v < 0, torch.zeros_like(v), v) + bias[tile_n][None, :]",
                 "torch.relu(v + bias[tile_n][None, :])")
SERVE_SCRIPT = """
import json, sys, warnings, torch, bbagent
said = []  # the warnings serving gave: a Helion call whose shape has no tuned config says so
warnings.simplefilter("always")
warnings.showwarning = lambda message, *rest, **more: said.append(str(message))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Sigmoid(), torch.nn.Linear(512, 256)).cuda()
x = torch.randn(64, 256, device="cuda")
with torch.no_grad():
    expected = model(x)
    with bbagent.enable(sys.argv[1], include_slower=True, device="cuda") as served:
        eager = model(x)
        eager_calls = dict(served.calls())
        compiled = torch.compile(model)(x)
        compiled_calls = {op: count - eager_calls.get(op, 0) for op, count in served.calls().items()}
        under_compile = {row["op"]: row["under_compile"] for row in served.report() if row.get("under_compile")}
        sites = served.compiled_sites()  # calls traced into the compiled graph as the kernel's launches
print(json.dumps({"eager_equal": bool(torch.allclose(eager, expected, atol=1e-5, rtol=1e-5)),
                  "compiled_equal": bool(torch.allclose(compiled, expected, atol=1e-5, rtol=1e-5)),
                  "eager_calls": eager_calls, "compiled_calls": compiled_calls,
                  "compiled_sites": sites, "under_compile": under_compile,
                  "warned": [text[:200] for text in said if "Helion" in text]}))
"""


def bbagent(*argv: str, cwd: Path, timeout: float = 900) -> tuple[int, dict | None, str]:
    done = subprocess.run([sys.executable, "-m", "bbagent", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    try:
        parsed = json.loads(done.stdout) if done.stdout.strip().startswith("{") else None
    except json.JSONDecodeError:
        parsed = None
    return done.returncode, parsed, done.stderr[-3000:]


def speed(bench: dict | None) -> dict:
    """The geomean speedups of a ``bench --json`` document: over eager, and over each compiled baseline."""
    summary = (bench or {}).get("performance") or {}
    over = {"over_eager": summary.get("geomean_speedup"), "shapes": summary.get("counted")}
    for name, baseline in ((bench or {}).get("baselines") or {}).items():
        over[f"over_{name}"] = baseline.get("geomean_speedup") if baseline.get("measured") else baseline.get("reason")
    return over


def checks(root: Path, max_shapes: int, budget: float) -> list[tuple[str, callable]]:
    """Every check as (label, run): ``run()`` gives (as expected, what was seen)."""
    timing = ["--baseline", "eager,inductor", "--max-shapes", str(max_shapes), "--root", str(root), "--json"]
    found = []

    def timed(*argv: str) -> tuple[bool, dict]:
        started = time.time()
        code, bench, err = bbagent("bench", *argv, *timing, cwd=root)
        return code == 0, {"s": round(time.time() - started), **speed(bench), "err": err[-600:] if code else ""}

    def failing(expected: str, *argv: str) -> tuple[bool, dict]:
        code, verdict, err = bbagent("eval", *argv, "--json", "--root", str(root), cwd=root)
        groups = (verdict or {}).get("failure_groups") or [{}]
        got = groups[0].get("error_kind") or (verdict or {}).get("error_kind")
        return code == 1 and got == expected, {"got": got}

    for family, op, (text, instead), kind in FAMILIES:
        helion = CHECKOUT / "prompts" / "helion" / "examples" / f"{family}.py"
        triton = CHECKOUT / "prompts" / "examples" / f"{family}.py"
        wrong = root / f"wrong_{family}.py"
        wrong.write_text(helion.read_text().replace(text, instead))
        found += [(f"{family} right Helion ({op})", functools.partial(timed, "--op", op, "--kernel", str(helion),
                                                                     "--dsl", "helion")),
                  (f"{family} right Triton, the peer ({op})", functools.partial(timed, "--op", op, "--kernel", str(triton))),
                  (f"{family} wrong Helion fails as {kind}", functools.partial(failing, kind, "--op", op, "--kernel",
                                                                              str(wrong), "--dsl", "helion"))]
    wrong = root / "wrong_program.py"
    wrong.write_text(ANSWER.read_text().replace(*WRONG_PROGRAM))
    found += [("level-2 program, right Helion answer", functools.partial(timed, "--problem", str(PROBLEM), "--kernel",
                                                                        str(ANSWER), "--dsl", "helion")),
              ("level-2 program, wrong Helion answer fails as mismatch",
               functools.partial(failing, "mismatch", "--problem", str(PROBLEM), "--kernel", str(wrong), "--dsl",
                                 "helion")),
              (f"generate --dsl helion --autotune-budget {budget:g}: wrong, then right accepted, tuned within "
               "the budget", functools.partial(generated, root, budget, max_shapes)),
              ("the approved Helion sigmoid served in a model, eager and compiled (launched by inductor's code), "
               "equal to eager",
               functools.partial(served, root)),
              ("the Helion layer_norm approved and served in the transformer under torch.compile, launched by "
               "inductor's code, against torch.compile", functools.partial(compiled_model, root, max_shapes))]
    return found


def generated(root: Path, budget: float, max_shapes: int) -> tuple[bool, dict]:
    family, op, (text, instead), _ = FAMILIES[0]
    right = (CHECKOUT / "prompts" / "helion" / "examples" / f"{family}.py").read_text()
    replay = root / "replay.json"
    replay.write_text(json.dumps({"model": "helion-check", "exchanges": [
        {"response": f"```python\n{right.replace(text, instead)}```"}, {"response": f"```python\n{right}```"}]}))
    code, _, err = bbagent("generate", "--op", op, "--dsl", "helion", "--provider", "replay", "--replay", str(replay),
                           "--rounds", "2", "--no-dispatch", "--root", str(root), "--autotune-budget", f"{budget:g}",
                           "--max-shapes", str(max_shapes), cwd=root, timeout=1200 + 3 * budget)
    meta = next((root / "generated_kernels").rglob("meta.json"), None)
    dsl = json.loads(meta.read_text()).get("dsl") if meta else None
    run = next((root / "runs").glob("*/run.json"), None)
    tuning = (json.loads(run.read_text()).get("tuning") if run else None) or {}
    configs = meta.parent / "helion_configs.json" if meta else None
    table = json.loads(configs.read_text()) if configs is not None and configs.is_file() else {}
    within = tuning.get("spent_s") is not None and tuning["spent_s"] <= 1.5 * budget
    # kept (tuned) or refused by the speed gate (slower): either way searched within the budget and judged pinned
    kept = tuning.get("outcome") == "tuned" and bool(table.get("configs"))
    return (code == 0 and dsl == "helion" and (kept or tuning.get("outcome") == "slower") and within,
            {"dsl": dsl, "tuning": tuning, "configs": [(row["shapes"], row["config"].get("block_sizes"), row["search_s"])
                                                     for row in table.get("configs", [])],
             "untuned": table.get("untuned"), "err": err[-600:] if code else ""})


def served(root: Path) -> tuple[bool, dict]:
    op = FAMILIES[0][1]
    bbagent("review", "approve", op, "--root", str(root), cwd=root)
    done = subprocess.run([sys.executable, "-c", SERVE_SCRIPT, str(root)], cwd=root, capture_output=True, text=True,
                          timeout=900, env=os.environ)
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        result = {"error": done.stderr[-1500:]}
    ok = bool(result.get("eager_equal") and result.get("compiled_equal") and result.get("eager_calls", {}).get(op, 0) > 0
              and result.get("under_compile", {}).get(op) == "launched by inductor's code"
              and result.get("compiled_sites", {}).get(op, 0) > 0)
    return ok, result


def compiled_model(root: Path, max_shapes: int) -> tuple[bool, dict]:
    op = "aten.native_layer_norm.default"
    right = (CHECKOUT / "prompts" / "helion" / "examples" / "normalization.py").read_text()
    replay = root / "replay-layer-norm.json"
    replay.write_text(json.dumps({"model": "helion-check", "exchanges": [{"response": f"```python\n{right}```"}]}))
    code, _, err = bbagent("generate", "--op", op, "--dsl", "helion", "--provider", "replay", "--replay", str(replay),
                           "--rounds", "1", "--no-dispatch", "--root", str(root), "--max-shapes", str(max_shapes),
                           cwd=root, timeout=1200)
    if code != 0:
        return False, {"generate": code, "err": err[-600:]}
    approved, _, approve_err = bbagent("review", "approve", op, "--root", str(root), cwd=root)
    if approved != 0:
        return False, {"approve": approved, "err": approve_err[-600:]}
    code, checked, err = bbagent("check-model", "--model", "transformer", "--device", "cuda", "--compile", "default",
                                 "--ops", op, "--include-slower", "--json", "--root", str(root), cwd=root, timeout=1200)
    compiled = (checked or {}).get("compiled") or {}
    timing = compiled.get("timing") or {}
    said = (compiled.get("kernels") or {}).get(op, {}).get("under_compile")
    detail = {"match": (checked or {}).get("match"), "under_compile": said,
              "compiled_sites": (compiled.get("compiled_sites") or {}).get(op),
              "ms": {side: timing.get(f"{side}_ms") for side in ("eager", "compile", "bbagent")},
              "exit": code, "err": err[-600:] if code else "",
              "said": {k: v for k, v in (checked or {}).items() if k in ("status", "crashed", "stderr_tail")}}
    return (code == 0 and bool(detail["match"]) and said == "launched by inductor's code"
            and (detail["compiled_sites"] or 0) > 0), detail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-shapes", type=int, default=8)
    parser.add_argument("--autotune-budget", type=float, default=60.0, metavar="SECONDS",
                        help="the generated kernel's tuning budget")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only the checks whose label contains TEXT (repeatable; the approval needs generate)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="helion-check-"))
    rows = []
    for label, run in checks(root, args.max_shapes, args.autotune_budget):
        if args.only and not any(text in label for text in args.only):
            continue
        ok, detail = run()
        rows.append({"check": label, "ok": ok, "detail": detail})
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {json.dumps(detail)[:400]}", flush=True)
        (args.out / "helion-check.json").write_text(json.dumps(rows, indent=2) + "\n")  # kept as it goes
    failed = [row["check"] for row in rows if not row["ok"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} checks as expected" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
