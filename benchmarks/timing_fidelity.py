"""Does bbagent's GPU timing agree with the tools engineers trust, and does it repeat?

For (op, input) pairs from the shipped real-model traces (the largest and a middle-sized call of
each op), the eager aten call is timed three ways:

* ``bbagent``: ``harness.timing.clock.time_interleaved`` (L2 flush, events per repetition), median;
* ``do_bench``: ``triton.testing.do_bench(fn, return_mode="median")``;
* ``loop``: a plain loop written here: zero a 256 MiB buffer, record an event, call, record an
  event, 200 times, median.

Then ``--repeats`` independent bbagent timings of the same call give the run-to-run spread
((max - min) / median). Last, the hand-written Triton relu of the test corpus runs on every relu
trace shape: achieved bandwidth (input + output bytes / median time) against the device's copy
bandwidth (a 1 GiB ``copy_``, timed the same way; the kernel's time from CUDA-graph replay, which
leaves out the host's launch cost), with the shapes whose eager time is within 1.3x of an empty
launch flagged as overhead-dominated. Every timing is also repeated as graph replay.

    python benchmarks/timing_fidelity.py --json results.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bbagent.harness.inputs import materialize  # noqa: E402
from bbagent.harness.ops import resolve_op  # noqa: E402
from bbagent.harness.timing.clock import empty_launch_ms, graphed, overhead_dominated, timing_stats, time_interleaved  # noqa: E402
from bbagent.harness.traces import load_calls  # noqa: E402

OPS = ["aten.relu.default", "aten.add.Tensor", "aten.mul.Tensor", "aten.mm.default", "aten.bmm.default",
       "aten._softmax.default", "aten.sum.dim_IntList", "aten.native_layer_norm.default",
       "aten.gelu.default", "aten.addmm.default", "aten.convolution.default", "aten.cat.default"]


def pairs() -> list[tuple[str, object]]:
    chosen = []
    for name in OPS:
        calls = sorted(load_calls(name), key=lambda c: c.numel())
        if calls:
            chosen += [(name, calls[-1]), (name, calls[len(calls) // 2])]
    return chosen


def plain_loop_ms(fn, reps: int = 200) -> float:
    buffer = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    fn()
    times = []
    for _ in range(reps):
        buffer.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def bbagent_ms(fn) -> float:
    return timing_stats(time_interleaved({"f": fn})["f"])["median_ms"]


def spread(times: list[float]) -> float:
    return (max(times) - min(times)) / statistics.median(times)


def graph_times(fn, repeats: int) -> list[float] | None:
    """Medians of ``repeats`` timings of fn's CUDA-graph replay (None: not capturable)."""
    replays = graphed({"f": fn})
    return None if replays is None else [bbagent_ms(replays["f"]) for _ in range(repeats)]


def fidelity(repeats: int) -> list[dict]:
    import triton.testing
    rows = []
    for name, call in pairs():
        op = resolve_op(name)
        gen = torch.Generator(device="cuda").manual_seed(0)
        args, kwargs = materialize(call.args, "cuda", gen), materialize(call.kwargs, "cuda", gen)

        def fn():
            return op(*args, **kwargs)
        ours = bbagent_ms(fn)
        row = {"op": name, "input": call.describe(), "bbagent_ms": ours,
               "do_bench_ms": triton.testing.do_bench(fn, return_mode="median"),
               "loop_ms": plain_loop_ms(fn)}
        again = [ours] + [bbagent_ms(fn) for _ in range(repeats - 1)]
        row["repeat_spread"] = spread(again)
        graph = graph_times(fn, repeats)
        row["graph_ms"] = statistics.median(graph) if graph else None
        row["graph_repeat_spread"] = spread(graph) if graph else None
        row["vs_do_bench"] = ours / row["do_bench_ms"] - 1
        row["vs_loop"] = ours / row["loop_ms"] - 1
        rows.append(row)
        print(f"{name:<34} {call.describe()[:60]:<60} bbagent {ours:8.4f} ms  do_bench {row['do_bench_ms']:8.4f}"
              f"  loop {row['loop_ms']:8.4f}  ({row['vs_do_bench']:+.1%}, {row['vs_loop']:+.1%})  "
              f"repeat spread {row['repeat_spread']:.1%}; graph "
              + (f"{row['graph_ms']:8.4f} ms spread {row['graph_repeat_spread']:.1%}" if graph else "n/a"),
              flush=True)
    return rows


def copy_bandwidth_gbs() -> float:
    src = torch.empty(1 << 30, dtype=torch.int8, device="cuda")
    dst = torch.empty_like(src)
    ms = bbagent_ms(lambda: dst.copy_(src))
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def relu_bandwidth(copy_gbs: float, empty_ms: float, repeats: int) -> list[dict]:
    spec = importlib.util.spec_from_file_location("relu_triton", ROOT / "tests/kernels/relu_triton.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = []
    for call in sorted(load_calls("aten.relu.default"), key=lambda c: c.numel()):
        gen = torch.Generator(device="cuda").manual_seed(0)
        (x,) = materialize(call.args, "cuda", gen)
        times = [bbagent_ms(lambda: module.kernel(x)) for _ in range(repeats)]
        graph = graph_times(lambda: module.kernel(x), repeats)
        ms = statistics.median(times)
        graph_ms = statistics.median(graph) if graph else ms
        moved = 2 * x.numel() * x.element_size()
        gbs = moved / (graph_ms * 1e-3) / 1e9
        rows.append({"input": call.describe(), "bytes": moved, "median_ms": ms, "graph_ms": graph_ms,
                     "gbs": gbs, "of_copy": gbs / copy_gbs, "overhead_dominated": overhead_dominated(ms, empty_ms),
                     "repeat_spread": spread(times), "graph_repeat_spread": spread(graph) if graph else None})
        print(f"relu {call.describe()[:56]:<56} {moved / 1e6:9.2f} MB eager {ms:8.4f} ms graph {graph_ms:8.4f} ms "
              f"{gbs:7.0f} GB/s ({gbs / copy_gbs:5.1%} of copy)"
              f"{'  overhead-dominated' if rows[-1]['overhead_dominated'] else ''}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("timing_fidelity needs a CUDA GPU")
    rows = fidelity(options.repeats)
    within = statistics.median(abs(r["vs_do_bench"]) for r in rows), statistics.median(abs(r["vs_loop"]) for r in rows)
    graphs = [r["graph_repeat_spread"] for r in rows if r["graph_repeat_spread"] is not None]
    print(f"\n{len(rows)} pairs; median |bbagent/do_bench - 1| = {within[0]:.2%}, median |bbagent/loop - 1| = "
          f"{within[1]:.2%}; repeat spread eager: median {statistics.median(r['repeat_spread'] for r in rows):.2%}, "
          f"worst {max(r['repeat_spread'] for r in rows):.2%}; graph replay ({len(graphs)} capturable): median "
          f"{statistics.median(graphs):.2%}, worst {max(graphs):.2%}")
    empty = empty_launch_ms()
    copy_gbs = copy_bandwidth_gbs()
    print(f"\nempty Triton launch {empty * 1000:.1f} us; copy bandwidth {copy_gbs:.0f} GB/s (1 GiB copy_)")
    relu = relu_bandwidth(copy_gbs, empty, options.repeats)
    big = [r for r in relu if r["bytes"] >= max(r["bytes"] for r in relu) / 4]
    print(f"relu on its {len(relu)} trace shapes: {sum(r['overhead_dominated'] for r in relu)} overhead-dominated; "
          f"largest shapes at {min(r['of_copy'] for r in big):.1%}..{max(r['of_copy'] for r in big):.1%} of copy bandwidth")
    if options.json:
        options.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                            "fidelity": rows, "empty_launch_ms": empty,
                                            "copy_gbs": copy_gbs, "relu": relu}, indent=1))


if __name__ == "__main__":
    main()
