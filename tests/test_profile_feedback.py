"""Profile-guided feedback (issue 34): the shapes furthest from their roofline are profiled, and the
next prompt states Nsight Compute's figures (or the torch profiler's kernel list) with a diagnosis.
Scripted Verdicts here; tests/test_gpu.py profiles a real kernel."""
import json
import types

from bbagent.agent.generate.profile_feedback import diagnose_launches, diagnose_ncu, profile_part, profiling_cost
from bbagent.harness.timing.profile import launches_per_call, pick
from bbagent.harness.verdict import Launch, NcuSide, Performance
from test_optimise import answer, run_agent, scripted_verdict


def _side(time_us, dram_pct, sm_pct, occupancy=60.0, kernels=(("_add_kernel", None, 32),)):
    return {"time_us": time_us, "dram_gbs": dram_pct * 48, "dram_pct": dram_pct, "sm_pct": sm_pct,
            "occupancy_pct": occupancy,
            "kernels": [{"name": name, "block": "(256, 1, 1)", "grid": "(64, 1, 1)", "registers": registers,
                         "time_us": share if share is not None else time_us} for name, share, registers in kernels]}


COPY = "void at::native::elementwise_kernel<128, 2, direct_copy_kernel_cuda>(int, T1)"


def _performance(shapes=None, profiles=None, wall_s=12.0) -> Performance:
    tests = [{"id": "t1", "input": "(T([64, 1], f32), T([64, 4096], f32))", "roof_fraction": 0.31},
             {"id": "t2", "input": "(T([8192, 8192], f16),)", "roof_fraction": 0.55}]
    ncu = None if shapes is None else {"measured": True, "shapes": shapes, "wall_s": wall_s}
    return Performance.model_validate({"measured": True, "gpu": "H200", "tests": tests, "ncu": ncu,
                                       "profiles": profiles})


def test_the_diagnosis_names_copies_launches_registers_and_bandwidth():
    eager = NcuSide.model_validate(_side(20.0, 85.0, 30.0))
    copies = NcuSide.model_validate(_side(40.0, 50.0, 20.0, kernels=((COPY, 25.0, 16), ("_add_kernel", 15.0, 32))))
    assert diagnose_ncu(copies, eager).startswith("extra copies: 1 of the call's 2 launches only copy data")
    assert "62%" in diagnose_ncu(copies, eager)  # 25 of 40 us
    tiny = NcuSide.model_validate(_side(3.0, 5.0, 4.0))
    assert diagnose_ncu(tiny, eager).startswith("launch-bound")
    registers = NcuSide.model_validate(_side(40.0, 40.0, 20.0, occupancy=12.0, kernels=(("_k", None, 168),)))
    assert diagnose_ncu(registers, eager).startswith("low occupancy from registers: 12%")
    far = NcuSide.model_validate(_side(40.0, 41.0, 20.0))
    assert diagnose_ncu(far, eager) == ("memory-bound far from peak: DRAM at 41% of peak (eager 85%), SM throughput "
                                        "20%; more bytes in flight (larger blocks, more programs, wider contiguous "
                                        "loads)")
    assert diagnose_ncu(NcuSide.model_validate(_side(40.0, 88.0, 20.0)), eager).startswith("memory-bound near peak")
    assert diagnose_ncu(NcuSide.model_validate(_side(40.0, 20.0, 75.0)), eager).startswith("compute-bound")
    tiny_programs = _side(495.0, 1.0, 48.0)
    tiny_programs["kernels"][0]["grid"] = "(802816, 1, 1)"
    assert diagnose_ncu(NcuSide.model_validate(tiny_programs), eager, bytes_moved=51380224).startswith(
        "many small programs: 802816 programs of (256, 1, 1) threads, 64 bytes each (SM 48%, DRAM 1% of peak)")
    # from the torch profiler alone
    launches = [Launch(name=COPY, us=9.0, per_call=1), Launch(name="_add_kernel", us=6.0, per_call=1)]
    assert diagnose_launches(launches, [Launch(name="eager_add", us=10.0, per_call=1)]).startswith(
        "extra copies: void at::native")
    two = [Launch(name="_a", us=20.0, per_call=1), Launch(name="_b", us=20.0, per_call=1)]
    assert diagnose_launches(two, [Launch(name="e", us=30.0, per_call=1)]).startswith("more launches than eager: 2")


def test_the_prompt_part_lists_each_profiled_shape_beside_eager():
    shapes = [{"id": "t1", "input": "(T([64, 1], f32), T([64, 4096], f32))",
               "kernel": _side(40.0, 50.0, 20.0, kernels=((COPY, 25.0, 16), ("_add_kernel", 15.0, 32))),
               "eager": _side(20.0, 85.0, 30.0, kernels=(("vectorized_elementwise_kernel<add>", None, 24),))}]
    part = profile_part(_performance(shapes))
    assert part.startswith("Nsight Compute on the shapes furthest from their roofline")
    assert "profiling took 12 s" in part
    assert "- `(T([64, 1], f32), T([64, 4096], f32))`, 31% of its roofline: extra copies" in part
    assert "| your kernel | 2: void at::native::elementwise_kernel<128, 2, direct_copy_kernel_cuda... (copy); " \
           "_add_kernel | 40.0 | 2400 | 50 | 20 | 60 | 16/32 |" in part
    assert "| eager | 1: vectorized_elementwise_kernel<add> | 20.0 | 4080 | 85 | 30 | 60 | 24 |" in part
    # no ncu: the torch profiler's lists
    profiles = [{"id": "t2", "input": "(T([8192, 8192], f16),)", "wall_s": 0.8,
                 "launches": {"kernel": [{"name": "_k", "us": 900.0, "per_call": 1},
                                         {"name": "_k2", "us": 300.0, "per_call": 1}],
                              "eager": [{"name": "eager_k", "us": 700.0, "per_call": 1}]}}]
    part = profile_part(_performance(profiles=profiles))
    assert "Nsight Compute was not available; profiling took 0.8 s" in part
    assert "55% of its roofline: more launches than eager: 2 per call against 1" in part
    assert "  your kernel: _k 900.0 us; _k2 300.0 us" in part and "  eager: eager_k 700.0 us" in part
    assert profile_part(_performance()) is None
    assert profiling_cost(types.SimpleNamespace(performance=_performance(profiles=profiles))) == 0.8


def test_the_shapes_furthest_from_their_roofline_are_profiled():
    def timed(name, size, floor_us, us, **more):
        return {"id": name, "bytes": size, "floor_ms": floor_us / 1e3, "candidate": {"median_ms": us / 1e3}, **more}
    results = [timed("a", 10, 90.0, 100.0), timed("b", 5, 20.0, 100.0),  # 10% above its floor; 80 us
               timed("c", 50, 0.1, 9.0, overhead_dominated=True), timed("tiny", 1, 0.0, 8.0),  # 0%, 8 us
               timed("d", 2, 40.0, 100.0), {"id": "e", "bytes": 99, "error_kind": "timeout"}]
    assert pick(results, 2, "furthest") == ["b", "d"]  # launch-bound 'c' left out, 'tiny' has 8 us to give
    assert pick(results, 2) == ["c", "a"]  # largest
    assert pick([{"id": "x", "bytes": 3}], 1, "furthest") == ["x"]  # no floor known: the largest


def test_the_torch_profilers_events_become_launches_per_call():
    def event(name, us, device="DeviceType.CUDA"):
        return types.SimpleNamespace(name=name, device_type=device,
                                     time_range=types.SimpleNamespace(elapsed_us=lambda: us))
    recorded = [event("aten::add", 50.0, "DeviceType.CPU")] + [event("_k", 4.0)] * 5 + [event("Memcpy DtoD", 3.0)] * 10
    assert launches_per_call(recorded, 5) == [{"name": "Memcpy DtoD", "us": 6.0, "per_call": 2.0},
                                              {"name": "_k", "us": 4.0, "per_call": 1.0}]


def profiled_verdict(op, kernel_path, profile: bool = True):
    """The scripted evaluator, with Nsight Compute's figures (where asked for): one copy launch
    before the kernel."""
    verdict = scripted_verdict(op, kernel_path)
    if not verdict.passed or not profile:
        return verdict
    shapes = [{"id": "trace-0", "input": "(T([1024], f16),)", "eager": _side(5.0, 60.0, 10.0),
               "kernel": _side(30.0, 30.0, 10.0, kernels=((COPY, 20.0, 16), ("_relu", 10.0, 20)))}]
    performance = verdict.performance.model_copy(update={"ncu": _performance(shapes, wall_s=21.0).ncu})
    return verdict.model_copy(update={"performance": performance})


def test_the_optimisation_prompt_carries_the_figures_and_the_round_their_cost(tmp_path, monkeypatch):
    import test_optimise
    monkeypatch.setattr(test_optimise, "scripted_verdict", profiled_verdict)
    run_agent(tmp_path, [answer("speed 1.1"), answer("speed 1.2")], rounds=2, target=None, target_roof=0)
    run = tmp_path / "runs" / "run-1"
    prompt = (run / "round-2" / "prompt.md").read_text()
    assert "Nsight Compute on the shapes furthest from their roofline" in prompt
    assert "extra copies: 1 of the call's 2 launches only copy data" in prompt
    state = json.loads((run / "run.json").read_text())
    assert state["rounds"][0]["profiling_s"] == 21.0
    assert "profiling_s" not in state["rounds"][1]  # the last round: no later round would read a profile


def test_the_evaluator_leaves_the_profiles_out_where_asked(tmp_path):
    from bbagent.agent.judging import Evaluations, evaluation_request, problem_of, timing_options
    seen = []

    class Executor:
        def evaluate(self, request, kernel):
            seen.append(request.timing)
    timing = timing_options(tmp_path, max_shapes=4, target_ms=10, no_cache=True, profile=2, ncu=2)
    problem = problem_of("aten.relu.default", exact_overload=True)
    run = Evaluations(evaluation_request(problem, tmp_path, device="cuda", seed=0, timeout_s=60, timing=timing),
                      Executor())
    run.evaluate(tmp_path / "k.py")
    run.evaluate(tmp_path / "k.py", profile=False)
    assert (seen[0].profile, seen[0].ncu) == (2, 2) and (seen[1].profile, seen[1].ncu) == (0, 0)
    assert seen[1].cache is timing.cache and seen[1].max_cases == 4
