"""The roofline arithmetic (harness.timing.roofline) on shapes whose FLOPs and bytes are known by
hand, its use on real aten calls (harness.timing.phase.shape_roofline), and the speed feedback
that names the shapes furthest from their ceiling."""
import pytest
import torch

from bbagent.harness.ops import resolve_op
from bbagent.harness.timing.phase import bytes_moved, shape_roofline
from bbagent.harness.timing.roofline import flops_of, roofline

N = 4096


@pytest.mark.parametrize("name, inputs, outputs, transposed, expected", [
    ("mm", [(N, N), (N, N)], [(N, N)], False, 2 * N ** 3),
    ("mm", [(128, 64), (64, 32)], [(128, 32)], False, 2 * 128 * 64 * 32),
    ("bmm", [(8, 128, 64), (8, 64, 32)], [(8, 128, 32)], False, 2 * 8 * 128 * 64 * 32),
    ("addmm", [(32,), (128, 64), (64, 32)], [(128, 32)], False, 2 * 128 * 64 * 32),
    ("addbmm", [(128, 32), (8, 128, 64), (8, 64, 32)], [(128, 32)], False, 2 * 8 * 128 * 64 * 32),
    ("linear", [(2, 16, 64), (32, 64)], [(2, 16, 32)], False, 2 * 2 * 16 * 32 * 64),
    # ResNet-50's first convolution: 118,013,952 multiply-adds
    ("convolution", [(1, 3, 224, 224), (64, 3, 7, 7)], [(1, 64, 112, 112)], False, 2 * 118_013_952),
    ("convolution", [(1, 16, 8, 8), (16, 8, 3, 3)], [(1, 8, 10, 10)], True, 2 * (16 * 64) * (8 * 9)),
    ("_scaled_dot_product_flash_attention", [(2, 4, 128, 64), (2, 4, 256, 64), (2, 4, 256, 32)], [(2, 4, 128, 32)],
     False, 2 * 2 * 4 * 128 * 256 * 64 + 2 * 2 * 4 * 128 * 256 * 32),
    ("relu", [(1024, 1024)], [(1024, 1024)], False, 1024 * 1024),
    ("_softmax", [(8, 1000)], [(8, 1000)], False, 5 * 8000),
])
def test_flops_of_known_shapes(name, inputs, outputs, transposed, expected):
    assert flops_of(name, inputs, outputs, transposed) == expected


def test_the_bound_is_the_ceiling_that_sets_the_floor():
    # fp16 mm 4096^3 on a 4000 GB/s, 800 TFLOP/s device: 100.7 MB take 25.2 us, 137.4 GFLOP 171.8 us
    mm = roofline(2 * N ** 3, 3 * N * N * 2, 200e-6, copy_gbs=4000.0, matmul_tflops=800.0)
    assert mm["bound"] == "compute" and mm["floor_ms"] == pytest.approx(2 * N ** 3 / 800e12 * 1e3)
    assert mm["roof_fraction"] == pytest.approx((2 * N ** 3 / 800e12) / 200e-6)
    assert mm["achieved_tflops"] == pytest.approx(2 * N ** 3 / 200e-6 / 1e12)
    assert mm["intensity"] == pytest.approx(2 * N ** 3 / (3 * N * N * 2))
    # relu on 4 MB in, 4 MB out: 2.1 us at the copy bandwidth; 1M FLOPs are nothing at 800 TFLOP/s
    relu = roofline(1 << 20, 8 << 20, 4e-6, copy_gbs=4000.0, matmul_tflops=800.0)
    assert relu["bound"] == "memory" and relu["roof_fraction"] == pytest.approx((8 << 20) / 4000e9 / 4e-6)
    # no matmul yardstick for the dtype (float64, integers): the bandwidth alone
    assert roofline(2 * N ** 3, 3 * N * N * 8, 1e-3, copy_gbs=4000.0, matmul_tflops=None)["bound"] == "memory"


def test_shape_roofline_reads_real_calls():
    device = {"copy_gbs": 4000.0, "matmul_tflops": {"float16": 800.0, "float32": 60.0}}
    mm = resolve_op("aten.mm.default")
    a, b = torch.randn(64, 32, dtype=torch.float16), torch.randn(32, 16, dtype=torch.float16)
    out = torch.mm(a, b)
    roof = shape_roofline(mm, (a, b), {}, out, "float16", bytes_moved(mm, (a, b), {}, out), device)
    assert roof == {"flops": 2 * 64 * 32 * 16, "bytes": (64 * 32 + 32 * 16 + 64 * 16) * 2, "copy_gbs": 4000.0,
                    "matmul_tflops": 800.0}
    conv = resolve_op("aten.convolution.default")
    x, w = torch.randn(1, 16, 8, 8), torch.randn(16, 8, 3, 3)
    args = (x, w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1)
    out = conv(*args)
    roof = shape_roofline(conv, args, {}, out, "float32", 1, device)
    assert roof["flops"] == 2 * x.numel() * 8 * 9 and roof["matmul_tflops"] == 60.0
    assert shape_roofline(conv, args, {}, out, "bfloat16", 1, device)["matmul_tflops"] is None


def test_speed_feedback_names_the_shapes_furthest_from_their_ceiling():
    from bbagent.agent.generate.prompting import render_performance_feedback
    from bbagent.harness.timing.metrics import summarize_performance
    from bbagent.harness.verdict import Verdict

    def stats(ms):
        return {"median_ms": ms, "mean_ms": ms, "std_ms": 0.0, "p20_ms": ms, "p80_ms": ms, "min_ms": ms, "reps": 10}
    tests = []
    for i, (size, fraction) in enumerate([(1 << 20, 0.9), (1 << 22, 0.2), (1 << 24, 0.6), (1 << 26, 0.95)]):
        floor_ms = 8 * size / 4000e9 * 1e3
        tests.append({"id": f"trace-{i}", "input": f"(T([{size}], f32),)", "mode": "graph", "speedup": 1.0,
                      "overhead_dominated": False, "bytes": 8 * size, "aten_gbs": 3000.0, "candidate_gbs": 3000.0,
                      "aten": stats(floor_ms / 0.8), "candidate": stats(floor_ms / fraction), "flops": size,
                      "bound": "memory", "floor_ms": floor_ms, "roof_fraction": fraction, "aten_roof_fraction": 0.8})
    device = {"copy_gbs": 4000.0, "empty_launch_ms": 0.004, "empty_graph_launch_ms": 0.002,
              "matmul_tflops": {"float32": 60.0}}
    performance = {"measured": True, "gpu": "H200", "device": device, "tests": tests,
                   "summary": summarize_performance("aten.relu.default", tests, device, correct=True)}
    summary = {"planned": 4, "passed": 4, "total": 4, "skipped": 0, "not_run": 0, "failed": 0, "reference_errors": 0}
    verdict = Verdict.model_validate({"op": "aten.relu.default", "kernel": {"path": "k.py", "sha256": "0"}, "seed": 0,
                                      "verdict": "pass", "summary": summary, "performance": performance})
    text = render_performance_feedback(verdict, target=2.0)
    part = text.split("Furthest from their ceiling")[1]
    lines = [line for line in part.splitlines() if line.startswith("- ")]
    # by time above the floor: 2^22 at 20% loses 4x its floor, 2^24 at 60% 0.67x, 2^26 at 95% 0.05x
    # of a floor 16 times longer; 2^20 at 90% loses least
    assert [line.split("`")[1] for line in lines] == ["(T([4194304], f32),)", "(T([16777216], f32),)",
                                                      "(T([67108864], f32),)"]
    assert "memory-bound" in lines[0] and "(20% of the ceiling; eager 80%)" in lines[0]


def test_a_programs_timing_record_has_the_floor_of_its_reference():
    """``time_program``'s roofline fields (``harness.timing.program_timing._roofline``): the
    reference's FLOPs counted as it runs (a linear layer: 2 x M x N x K, then its ReLU per element),
    against the bytes of its inputs and outputs; the answer's and eager's fractions of the floor;
    none for a reference that a dispatch mode cannot run."""
    import torch
    from bbagent.harness.timing.program_timing import _roofline

    class Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(48, 64))

        def forward(self, x):
            return torch.relu(x @ self.weight.t())
    device = {"copy_gbs": 1000.0, "matmul_tflops": {"float32": 1.0}}
    fields = _roofline(Linear(), [torch.randn(32, 64)], 10_000, device, {"median_ms": 0.8}, {"median_ms": 1.6})
    flops = 2 * 32 * 48 * 64 + 32 * 48
    assert fields["flops"] == flops and fields["bound"] == "compute"
    assert fields["floor_ms"] == pytest.approx(flops / 1e12 * 1e3)
    assert fields["roof_fraction"] == pytest.approx(fields["floor_ms"] / 0.8)
    assert fields["aten_roof_fraction"] == pytest.approx(fields["floor_ms"] / 1.6)
    memory = _roofline(Linear(), [torch.randn(32, 64)], 10_000, {"copy_gbs": 1000.0}, {"median_ms": 1.0},
                       {"median_ms": 1.0})
    assert memory["bound"] == "memory" and memory["floor_ms"] == pytest.approx(10_000 / 1e12 * 1e3)

    class Refusing(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("not under a dispatch mode")
    assert _roofline(Refusing(), [torch.randn(2)], 8, device, {"median_ms": 1.0}, {"median_ms": 1.0}) == {}
