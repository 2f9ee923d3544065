"""bbagent.harness.timing.clock: statistics everywhere; measurement only on a GPU (the CPU refuses to time)."""
import pytest
import torch

from bbagent.harness.timing.clock import TimingUnavailable, overhead_dominated, timing_stats, time_interleaved


def test_summary_statistics():
    stats = timing_stats([4.0, 1.0, 3.0, 2.0, 5.0])
    assert stats["median_ms"] == 3.0 and stats["mean_ms"] == 3.0 and stats["min_ms"] == 1.0
    assert stats["p20_ms"] == 2.0 and stats["p80_ms"] == 4.0 and stats["reps"] == 5
    assert stats["std_ms"] == pytest.approx(2 ** 0.5)
    with pytest.raises(ValueError):
        timing_stats([])


def test_overhead_dominated_within_1_3x_of_an_empty_launch():
    assert overhead_dominated(0.0050, empty_ms=0.0040)
    assert not overhead_dominated(0.0060, empty_ms=0.0040)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU twin: on a GPU machine timing runs")
def test_cpu_refuses_to_time():
    with pytest.raises(TimingUnavailable, match="only correctness"):
        time_interleaved({"f": lambda: None})


@pytest.mark.gpu
def test_interleaved_timing_on_gpu():
    x = torch.randn(1 << 24, device="cuda")
    samples = time_interleaved({"small": lambda: x[:1024].relu(), "large": lambda: x.relu()}, reps=50)
    assert len(samples["small"]) == len(samples["large"]) == 50
    small, large = timing_stats(samples["small"])["median_ms"], timing_stats(samples["large"])["median_ms"]
    assert 0 < small < large  # 16M elements take longer than 1024


@pytest.mark.gpu
def test_a_small_shape_counts_its_flushes_toward_the_target():
    """A 1024-element relu takes microseconds, the 256 MiB flush before each call about 0.1 ms on an
    H100: repetitions are chosen from both, so target_ms=25 gives a few hundred of them, not
    MAX_REPS (2000) flushes while every other evaluation on the GPU waits."""
    from bbagent.harness.timing.clock import MAX_REPS, MIN_REPS
    x = torch.randn(1024, device="cuda")
    samples = time_interleaved({"aten": lambda: torch.relu(x), "candidate": lambda: x.clamp_min(0)}, target_ms=25)
    assert MIN_REPS < len(samples["aten"]) == len(samples["candidate"]) < MAX_REPS // 2


@pytest.mark.gpu
def test_graph_replay_on_gpu_all_or_none():
    from bbagent.harness.timing.clock import graphed
    x = torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    replays = graphed({"relu": lambda: torch.clamp(x, min=0.0, out=out)})
    assert replays is not None
    x.fill_(-1.0)
    replays["relu"]()
    torch.cuda.synchronize()
    assert float(out.max()) == 0.0  # the replay computed on the current values

    def fails_when_captured():
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("not capturable")
        return x.relu()
    assert graphed({"relu": lambda: x.relu(), "host": fails_when_captured}) is None


@pytest.mark.gpu
def test_a_graph_that_does_not_recompute_is_refused():
    from bbagent.harness.timing.clock import graphed
    x = torch.randn(1 << 16, device="cuda")

    def host_side():  # the work happens on the host: a captured graph would replay nothing
        return torch.from_numpy(x.cpu().numpy() + 1.5).to("cuda") if not torch.cuda.is_current_stream_capturing() \
            else torch.empty_like(x)
    assert graphed({"host": host_side}) is None


@pytest.mark.gpu
def test_a_capture_that_syncs_on_a_random_seed_leaves_random_ops_usable():
    """A correct bernoulli_ that reads its seed on the host cannot be captured; before, the failed
    capture left the CUDA generator mid-capture and eager aten's bernoulli_ then raised "Offset
    increment outside graph capture", so the kernel failed its timing phase."""
    from bbagent.harness.timing.clock import graphed
    x = torch.empty(4096, device="cuda")

    def seeds_on_host():
        seed = int(torch.randint(2**31 - 1, (1,), device="cuda"))
        return x.fill_(seed % 2)
    assert graphed({"aten": lambda: torch.ops.aten.bernoulli_.float(x, 0.5), "candidate": seeds_on_host}) is None
    assert torch.ops.aten.bernoulli_.float(x, 0.5).sum() > 0
    assert torch.randint(10, (1,), device="cuda").item() < 10
