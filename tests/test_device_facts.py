"""The device probe (harness.device_probe) and the prompt's section on the GPU (prompts/device.j2):
rendered from the probe's facts, nothing on a device that was not probed."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from bbagent.harness.problem import operator_problem
from bbagent.agent import gpu_facts
from bbagent.agent.generate.prompting import render_prompt
from bbagent.harness.device_probe.facts import DeviceFacts, GpuFacts, TritonFacts

SECTION = "## The GPU your kernel is judged on"


def _probe_process(device: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bbagent.harness.device_probe", "--device", device],
                          capture_output=True, text=True, timeout=300)


def test_the_probe_runs_under_the_interpreter():
    done = _probe_process("cpu")
    assert done.returncode == 0, done.stderr
    facts = DeviceFacts.model_validate_json(done.stdout)
    assert facts.interpreter and facts.gpu is None
    found = facts.triton_facts
    assert found.max_drops_nan is True  # the trap the prompt states, as the interpreter does it
    assert set(found.dot_min_k) == {"float16", "float32", "int8"} and all(k in (8, 16, 32) for k in found.dot_min_k.values())
    assert found.exp_error_at_56 is not None and found.exp_error_at_56 < 1e-6  # the interpreter computes exp exactly
    assert found.dot_float32_ieee_error < 1e-5


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal without a GPU; the GPU test probes one")
def test_the_probe_says_why_it_cannot_run_without_a_gpu():
    done = _probe_process("cuda")
    assert done.returncode == 1
    assert "no CUDA device" in done.stderr and "Traceback" not in done.stderr


H100 = DeviceFacts(
    torch="2.11.0", triton="3.6.0", interpreter=False, probe_s=20.0,
    gpu=GpuFacts(name="NVIDIA H100 80GB HBM3", capability="9.0", multiprocessors=132, memory_gib=79.2, l2_mib=50.0,
                 shared_memory_per_block_kib=227.0, registers_per_block=65536, copy_gbs=2950.0,
                 matmul_tflops={"float32": 51.0, "float16": 720.0, "bfloat16": 700.0}, empty_launch_us=5.1),
    triton_facts=TritonFacts(dot_min_k={"float16": 16, "float32": 16, "int8": 32}, exp_error_at_56=2.1e-6,
                             libdevice_exp_error_at_56=6e-8, dot_float32_error=3.5e-4, dot_float32_ieee_error=1.2e-7,
                             max_drops_nan=True))


@pytest.fixture(autouse=True)
def gpu_asked_afresh():
    """Each test's own visible GPU: the model is asked once per process (``gpu_facts._gpu``)."""
    gpu_facts._gpu.cache_clear()
    yield
    gpu_facts._gpu.cache_clear()


@pytest.fixture
def device_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BBAGENT_DEVICE_CACHE", str(tmp_path))
    gpu_facts._failed.clear()
    gpu_facts._uncached.clear()
    yield tmp_path
    gpu_facts._failed.clear()
    gpu_facts._uncached.clear()


def test_the_prompt_states_the_probed_gpu(device_cache, monkeypatch):
    monkeypatch.setattr(gpu_facts, "visible_gpu", lambda: H100.gpu.name)
    gpu_facts.cache_file(H100.gpu.name).parent.mkdir(parents=True, exist_ok=True)
    gpu_facts.cache_file(H100.gpu.name).write_text(H100.model_dump_json())
    prompt = render_prompt(problem("aten.relu.default"), device="cuda")
    section = prompt[prompt.index(SECTION):prompt.index("## Triton traps")]
    for said in ("NVIDIA H100 80GB HBM3 (compute capability 9.0), probed by bbagent with triton 3.6.0",
                 "132 multiprocessors", "50 MiB of L2", "227 KiB of shared memory per block", "copy bandwidth 2950 GB/s",
                 "float16 720 TFLOPS", "float32 51 TFLOPS (no TF32)", "5.1 us",
                 "K of at least 16 for float16, 16 for float32, 32 for int8", "2.1e-06 at x = 56, `libdevice.exp` 6e-08",
                 "0.00035 at its default precision"):
        assert said in section, said
    traps = prompt[prompt.index("## Triton traps"):]
    assert "on this GPU 2.1e-06 at x = 56, beyond float32's rtol" in traps
    assert "named under \"The GPU your kernel is judged on\"" in traps
    # the CPU's prompt never describes a GPU, even on a machine that has one probed
    assert SECTION not in render_prompt(problem("aten.relu.default"), device="cpu")


def test_a_device_never_probed_gets_no_section(device_cache, monkeypatch):
    monkeypatch.setattr(gpu_facts, "visible_gpu", lambda: "Some Other GPU")
    if torch.cuda.is_available():  # where a GPU is there, the probe would succeed: ask for the cache only
        assert gpu_facts.facts_for("cuda", probe=False) is None
        return
    prompt = render_prompt(problem("aten.relu.default"), device="cuda")  # the probe runs, and fails without CUDA
    assert SECTION not in prompt
    assert "no CUDA device" in gpu_facts.probe_failure("cuda")
    traps = prompt[prompt.index("## Triton traps"):]
    assert "H100" not in traps and "H200" not in traps and "keep K >= 16" in traps
    # an unreadable cache entry counts as never probed
    gpu_facts.cache_file("Some Other GPU").write_text("{not json")
    assert gpu_facts.cached_facts("Some Other GPU") is None


def test_no_gpu_visible_means_no_probe(device_cache, monkeypatch):
    monkeypatch.setattr(gpu_facts, "visible_gpu", lambda: None)
    monkeypatch.setattr(gpu_facts, "_probe", lambda path: pytest.fail("probed without a GPU"))
    assert gpu_facts.facts_for("cuda") is None and gpu_facts.facts_for("cpu") is None


@pytest.mark.gpu
def test_the_gpu_is_probed_once_and_its_facts_are_sane(device_cache):
    facts = gpu_facts.facts_for("cuda")
    assert facts is not None, gpu_facts.probe_failure("cuda")
    g = facts.gpu
    assert g.multiprocessors >= 1 and g.shared_memory_per_block_kib >= 48 and 50 < g.copy_gbs < 20000
    assert g.matmul_tflops["float16"] > g.matmul_tflops["float32"] > 0
    assert facts.triton_facts.dot_min_k["float16"] in (8, 16, 32) and facts.triton_facts.max_drops_nan is not None
    assert facts.triton_facts.dot_float32_ieee_error < 1e-5
    assert gpu_facts.cached_facts(gpu_facts.visible_gpu()) == facts
    assert SECTION in render_prompt(problem("aten.relu.default"), device="cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a failing probe; the GPU test probes one that succeeds")
def test_a_failed_probe_is_told_once_and_the_run_goes_on(device_cache, monkeypatch):
    from bbagent.agent.batch.display import event_line
    from bbagent.agent.generate.progress import DeviceProbed, ProbingDevice
    from bbagent.agent.generate.start import probe_the_gpu
    monkeypatch.setattr(gpu_facts, "visible_gpu", lambda: "Some Other GPU")
    heard = []
    probe_the_gpu("cuda", heard.append)
    assert [type(e) for e in heard] == [ProbingDevice, DeviceProbed]
    assert heard[1].gpu is None and "no CUDA device" in heard[1].failure
    assert "could not be probed" in event_line(heard[1]) and "says nothing of the device" in heard[1].line()
    probe_the_gpu("cuda", heard.append)  # the failure is remembered: no second probe, nothing told
    probe_the_gpu("cpu", heard.append)
    assert len(heard) == 2


def test_a_cache_folder_that_cannot_be_written_still_gets_the_facts(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("BBAGENT_DEVICE_CACHE", str(blocker / "cache"))  # under a file: mkdir fails
    monkeypatch.setattr(gpu_facts, "visible_gpu", lambda: H100.gpu.name)
    probed = []
    monkeypatch.setattr(gpu_facts, "_probe", lambda path, keep=True: probed.append(keep) or H100)
    gpu_facts._failed.clear()
    gpu_facts._uncached.clear()
    try:
        assert gpu_facts.facts_for("cuda") == H100 and gpu_facts.facts_for("cuda") == H100
        assert probed == [False]  # probed once, kept in this process
        assert gpu_facts.facts_for("cuda", probe=False) == H100  # so a run's probe step has nothing to tell
    finally:
        gpu_facts._uncached.clear()


def problem(name: str):
    """The problem of ``name`` alone (as ``generate --exact-overload`` asks for it)."""
    return operator_problem(name, exact_overload=True)
