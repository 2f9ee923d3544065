"""Regions across matrix products on transformers' Llama: found, answered by hand, judged, gated and
timed against torch.compile and Liger-Kernel, in stages that can run in separate device calls.

    python benchmarks/llama_regions.py --out $OUT --work DIR [--stages regions,judge,gate,table]
        [--device cuda] [--layers 4 --d-model 2048 --heads 16 --kv-heads 8 --mlp 5632 --vocab 32000
         --batch 4 --seq 1024]

``regions``: the model (random weights, bf16, attention through sdpa as users run it) written as a
program in KernelBench's format (``DIR/llama_bench.py``), and ``bbagent regions --script`` of it,
with each region's share of the compiled forward's GPU time and its roofline floor. ``judge``:
each hand-written answer of ``HAND`` (``tests/problems/answers/``) given to ``bbagent generate --problem`` for the most
frequent region of its kind, through the real OpenAI client and a fake server on 127.0.0.1 that
answers with the file (``tests/fake_llm.py``), judged (timed against eager and torch.compile alone)
and approved under ``DIR/root``. ``gate``: ``bbagent check-model --script --compile default --gate``
on that root, the whole model deciding what is served. ``table``: ``benchmarks/llama_compile.py``
with eager, torch.compile, Liger-Kernel and torch.compile with what the gate kept. Every command's
output goes to ``OUT/commands.log``; ``OUT/summary.json`` gathers the regions, verdicts, the plan
and the table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from compile_serving_gpu import bbagent  # the same command log, beside this script

HERE = Path(__file__).resolve().parent
ANSWERS = HERE.parent / "tests" / "problems" / "answers"
HAND = [  # (region kind, matrix products in it, the answer's file)
    ("gated MLP", 3, "region_gated_mlp_right.py"),
    ("norm + matmul", 2, "region_norm_gate_up_right.py"),
    ("attention", 2, "region_attention_right.py"),  # only where the model runs eager attention
]
SCRIPT = '''"""transformers' Llama at the benchmark's size, random weights (written by llama_regions.py)."""
import torch
import torch.nn as nn
from transformers import LlamaConfig, LlamaForCausalLM


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = LlamaConfig(vocab_size={vocab}, hidden_size={d_model}, intermediate_size={mlp},
                             num_hidden_layers={layers}, num_attention_heads={heads}, num_key_value_heads={kv_heads},
                             max_position_embeddings={seq}, attn_implementation="sdpa")
        self.llama = LlamaForCausalLM(config)

    def forward(self, tokens):
        return self.llama(input_ids=tokens, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, {vocab}, ({batch}, {seq}))]


def get_init_inputs():
    return []
'''


def regions(args, out: Path, work: Path) -> dict:
    script = work / "llama_bench.py"
    script.write_text(SCRIPT.format(**{k: getattr(args, k) for k in
                                       ("vocab", "d_model", "mlp", "layers", "heads", "kv_heads", "seq", "batch")}))
    found = bbagent(out, "regions", "regions", "--script", str(script), "--device", args.device, "--dtype", "bfloat16",
                    "--json", "--out", str(work / "problems"), cwd=work)
    if found.returncode != 0:
        return {"error": found.stderr[-2000:]}
    survey = json.loads(found.stdout)
    (work / "survey.json").write_text(json.dumps(survey))
    kept = ("hash", "kind", "ops", "count", "gpu_us", "floor_us", "share")
    return {"gpu_us": survey["gpu_us"], "regions": [{k: r[k] for k in kept} for r in survey["regions"]]}


def judge(args, out: Path, work: Path) -> dict:
    """Each hand answer for the most frequent region of its kind, generated, judged and approved."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from fake_llm import FakeLLMServer
    survey = json.loads((work / "survey.json").read_text())
    root, judged = work / "root", []
    for kind, products, answer in HAND:
        chosen = next(((r, f) for r, f in zip(survey["regions"], survey["files"]) if r["kind"] == kind and
                       sum(op.split(".")[1] in ("mm", "bmm", "addmm") for op in r["ops"]) == products), None)
        if chosen is None:
            judged.append({"kind": kind, "answer": answer, "error": "no such region in this model"})
            continue
        region, problem = chosen
        with FakeLLMServer().answer(f"```python\n{(ANSWERS / answer).read_text()}```\n") as server:
            done = bbagent(out, f"generate-{region['hash']}", "generate", "--problem", problem, "--rounds", "1",
                           "--provider", "openai", "--model", "gpt-fake", "--base-url", server.url + "/v1", "--root",
                           str(root), "--device", args.device, "--seed", "1", cwd=work,
                           env={**os.environ, "OPENAI_API_KEY": "sk-fake"})
        key = f"kernelbench/other/{Path(problem).stem}"
        row = {"kind": kind, "answer": answer, "hash": region["hash"], "share": region["share"],
               "compiled_us": region["gpu_us"], "floor_us": region["floor_us"], "generate_exit": done.returncode,
               "key": key}
        meta_file = root / "generated_kernels" / key / "meta.json"
        if meta_file.is_file():
            performance = json.loads(meta_file.read_text()).get("performance") or {}
            row["over_eager"] = (performance.get("summary") or {}).get("geomean_speedup")
            row["over_compile"] = ((performance.get("baselines") or {}).get("inductor") or {}).get("geomean_speedup")
            row["approved"] = bbagent(out, f"approve-{region['hash']}", "review", "approve", key, "--root", str(root),
                                      cwd=work).returncode == 0
        judged.append(row)
    return {"judged": judged}


def gate(args, out: Path, work: Path) -> dict:
    done = bbagent(out, "gate", "check-model", "--script", str(work / "llama_bench.py"), "--dtype", "bfloat16",
                   "--device", args.device, "--compile", "default", "--gate", "--root", str(work / "root"),
                   "--repeats", "10", "--iterations", "10", "--atol", "0.05", "--rtol", "0.05", "--json", cwd=work)
    try:
        compiled = json.loads(done.stdout).get("compiled") or {}
    except ValueError:
        return {"exit": done.returncode, "stderr": done.stderr[-2000:]}
    return {"exit": done.returncode, "gate": compiled.get("gate"), "all_served_timing": compiled.get("timing"),
            "compiled_calls": compiled.get("compiled_calls"), "compiled_sites": compiled.get("compiled_sites"),
            "regions": compiled.get("regions")}


def table(args, out: Path, work: Path) -> dict:
    sizes = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
             ("layers", "d_model", "heads", "kv_heads", "mlp", "vocab", "batch", "seq")]
    done = bbagent(out, "table", "--root", str(work / "root"), "--plan", "llama_bench", "--out", str(out / "table"),
                   *sizes, cwd=work, timeout=3000, program=(str(HERE / "llama_compile.py"),))
    print(done.stdout[-4000:])
    return {"exit": done.returncode, "printed": done.stdout[-4000:]}


STAGES = {"regions": regions, "judge": judge, "gate": gate, "table": table}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/llama-regions"))
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--device", default="cuda")
    for name, default in (("layers", 4), ("d-model", 2048), ("heads", 16), ("kv-heads", 8), ("mlp", 5632),
                          ("vocab", 32000), ("batch", 4), ("seq", 1024)):
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()
    unknown = set(args.stages.split(",")) - set(STAGES)
    if unknown:
        parser.error(f"--stages takes {', '.join(STAGES)} (got {', '.join(sorted(unknown))})")
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    summary_file = args.out / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    for stage in args.stages.split(","):
        summary[stage] = STAGES[stage](args, args.out, args.work.resolve())
        summary_file.write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "regions"}, indent=1)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
