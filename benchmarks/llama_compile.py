"""Hugging Face transformers' Llama on one GPU, side by side in one process (issue 76): eager,
torch.compile, Liger-Kernel (``apply_liger_kernel_to_llama``: RMSNorm, RoPE, SwiGLU, fused linear
cross-entropy; installed from the registry as a peer) and torch.compile with bbagent's approved
kernels and region answers under ``--root`` (``bbagent.enable``), for a forward and for a training
step (forward with labels, the model's own loss, backward, AdamW step).

Random weights, bf16, the size users measure (4 layers, d_model 2048, 16 heads, 8 KV heads, MLP
5632, vocab 32000, batch 4 x 1024 by default). Each figure is the median ms of ``--iterations``
calls after a warm-up that compiles; peak memory is the allocator's peak during the timed calls.
torch.compile alone runs twice, before and after bbagent's side, and each "vs compile" divides by
the mean of the two (on an H200 one run of 10 calls put compile alone 15% slower than a bbagent
side serving nothing).
bbagent's column says what it served (its kernels' paths under torch.compile); where nothing
approved applies to Llama it runs inductor's code alone, and the table says so.

    python benchmarks/llama_compile.py --root ROOT [--plan MODEL] --out $OUT [--layers 4 --batch 4 --seq 1024]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def build(args, liger: bool):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    if liger:
        from liger_kernel.transformers import apply_liger_kernel_to_llama
        apply_liger_kernel_to_llama()  # patches transformers' Llama modules: models built after it use them
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.d_model, intermediate_size=args.mlp,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.kv_heads, max_position_embeddings=args.seq,
                         attn_implementation="sdpa")
    return LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)


def timed(step, iterations: int, warm_up: int = 5) -> tuple[float, float]:
    """Median ms per call and the peak GiB allocated while timing."""
    import torch
    for _ in range(warm_up):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    samples = []
    for _ in range(iterations):
        started = time.perf_counter()
        step()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), torch.cuda.max_memory_allocated() / 2 ** 30


def run_side(model, tokens, train: bool, compiled: bool, iterations: int) -> tuple[float, float]:
    import torch
    forward = torch.compile(model) if compiled else model
    if not train:
        model.eval()

        def step():
            with torch.no_grad():
                forward(input_ids=tokens, use_cache=False)
        return timed(step, iterations)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)

    def step():
        loss = forward(input_ids=tokens, labels=tokens, use_cache=False).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return timed(step, iterations)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, help="bbagent's root with the approved kernels (default: none)")
    parser.add_argument("--plan", metavar="MODEL",
                        help="serve what the whole-model gate kept for MODEL in torch.compile's default mode "
                             "(check-model --script MODEL.py --gate, recorded under --root), instead of every "
                             "approved kernel measured at least as fast alone")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--mlp", type=int, default=5632)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--sides", default="eager,compile,bbagent,liger")
    args = parser.parse_args()
    import torch
    import bbagent
    torch.manual_seed(0)
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    sides = args.sides.split(",")
    rows, served = {}, {}
    # Liger patches transformers' Llama classes for the rest of the process: its runs come last;
    # torch.compile alone is run again after the others (its row "compile again"), and the columns
    # "vs compile" divide by the mean of both runs: drift between the runs shows as their difference
    order = [s for s in sides if s != "liger"] + (["compile again"] if "compile" in sides else []) + \
        (["liger"] if "liger" in sides else [])
    for side in order:
        for train in (False, True):
            torch._dynamo.reset()
            model = build(args, liger=side == "liger")
            plan = {"model": args.plan, "mode": "default"} if args.plan else {}
            enabled = bbagent.enable(args.root, device="cuda", **plan) if side == "bbagent" and args.root else None
            try:
                ms, gib = run_side(model, tokens, train, compiled=side in ("compile", "compile again", "bbagent"),
                                   iterations=args.iterations)
            except Exception as exc:  # noqa: BLE001 - a side that cannot run is a row that says why
                ms, gib = None, None
                served[f"{side}/{'train' if train else 'forward'}"] = f"failed: {type(exc).__name__}: {exc}"[:300]
            finally:
                if enabled is not None:
                    report = enabled.report()
                    served[f"bbagent/{'train' if train else 'forward'}"] = {
                        "sites": enabled.compiled_sites(), "calls": enabled.compiled_calls(),
                        "paths": {r["op"]: r["under_compile"] for r in report}, "regions": enabled.regions()}
                    enabled.disable()
            rows[(side, "train" if train else "forward")] = (ms, gib)
            del model
            torch.cuda.empty_cache()
    print(f"transformers Llama, {args.layers} layers, d_model {args.d_model}, {args.heads} heads ({args.kv_heads} KV), "
          f"MLP {args.mlp}, vocab {args.vocab}, bf16, batch {args.batch} x {args.seq}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}: median ms of {args.iterations} calls")
    print(f"{'side':<13} {'forward ms':>11} {'vs compile':>11} {'train ms':>10} {'vs compile':>11} {'peak GiB':>9}")
    for side in order:
        cells = []
        for what in ("forward", "train"):
            ms, _ = rows.get((side, what), (None, None))
            runs = [rows[key][0] for key in (("compile", what), ("compile again", what)) if rows.get(key, (None,))[0]]
            base = statistics.fmean(runs) if runs else None
            cells += [f"{ms:11.2f}" if ms else f"{'-':>11}", f"{base / ms:10.3f}x" if ms and base else f"{'-':>11}"]
        peak = rows.get((side, "train"), (None, None))[1]
        print(f"{side:<13} {cells[0]} {cells[1]} {cells[2][1:]} {cells[3]} {peak if peak is None else round(peak, 2):>9}")
    for key, what in served.items():
        print(f"  {key}: {json.dumps(what)[:600]}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "llama_compile.json").write_text(json.dumps(
            {"args": {k: str(v) for k, v in vars(args).items()}, "gpu": torch.cuda.get_device_name(),
             "torch": torch.__version__, "ms_and_peak_gib": {f"{s}/{w}": v for (s, w), v in rows.items()},
             "served": served}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
