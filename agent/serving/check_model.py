"""``bbagent check-model``, the parent side: a real model's forward with the generated kernels
enabled against eager, run in a child process (``agent.serving.check_model_child``), since
registrations are process-wide and a kernel that crashes takes only the child down.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from bbagent.agent.errors import UsageError
from bbagent.agent.options import positive

DTYPES = ("float32", "float16", "bfloat16")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CHILD_USAGE_ERROR = 3


@dataclass
class ModelCheck:
    """What the child is asked to do (sent to it as JSON)."""
    model: str
    config: dict
    device: str
    dtype: str = "float32"
    ops: list[str] | None = None
    seed: int = 0
    root: str = "."
    include_unreviewed: bool = False
    include_slower: bool = False
    atol: float = 1e-3
    rtol: float = 1e-3
    repeats: int = 5
    iterations: int = 10
    compile: bool = False  # compiled by torch.compile, alone and with the kernels (``check_model_compiled``)
    mode: str = "default"  # torch.compile's mode, with ``compile``
    script: str | None = None  # a program file in KernelBench's format, in a built-in model's place (``model``: its stem)
    train: bool = False  # training steps (forward, loss, backward, optimizer step) instead of forwards
    steps: int = 5  # training steps per side, with ``train``
    gate: bool = False  # the whole-model gate (``agent.serving.gate``): each candidate measured in the model


def checked(model: str | None, config: dict | None, device: str | None, script: str | Path | None = None,
            **settings) -> ModelCheck:
    """The check asked for, with the model's full config (a built-in ``model``, or the program file
    ``script``); a UsageError naming what is wrong."""
    from bbagent.agent.models import config_for
    from bbagent.harness.interface import default_device
    device = device or default_device()
    if device == "cuda" and default_device() != "cuda":
        raise UsageError("--device cuda: no CUDA device is visible here")
    if (model is None) == (script is None):
        raise UsageError("give a model (--model) or a program file (--script), one of them")
    if script is not None:
        path = Path(script).expanduser().absolute()
        if config:
            raise UsageError("--set applies to a built-in --model, not to a --script (its sizes are in its code)")
        if not path.is_file():
            raise UsageError(f"--script {script}: no such file")
        model, full_config, script = path.stem, {}, str(path)
    else:
        assert model is not None  # one of the two, checked above
        try:
            full_config = config_for(model, config)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    check = ModelCheck(model=model, config=full_config, device=device, script=script, **settings)
    if check.dtype not in DTYPES:
        raise UsageError(f"--dtype takes {', '.join(DTYPES[:-1])} or {DTYPES[-1]} (got '{check.dtype}')")
    if check.mode not in COMPILE_MODES:
        raise UsageError(f"--compile takes a torch.compile mode: {', '.join(COMPILE_MODES)} (got '{check.mode}')")
    positive("--repeats", check.repeats, minimum=1)
    positive("--iterations", check.iterations, minimum=1)
    positive("--steps", check.steps, minimum=2)
    if check.train or check.gate:
        check.compile = True  # measured against torch.compile's, as a forward is
    if check.train and check.gate:
        raise UsageError("--gate measures forwards; leave out --train (a plan for training steps is not measured yet)")
    if check.gate:
        check.include_slower = True  # the whole model decides, not each kernel's own measurement
    return check


def run_check(check: ModelCheck, timeout_s: float) -> dict:
    """Run the check in a child process; its result, or why the child ended without one."""
    spec = asdict(check)
    env = dict(os.environ, TRITON_INTERPRET="1") if check.device == "cpu" else dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="bbagent-check-model-") as scratch:
        spec_file, result_file = Path(scratch) / "spec.json", Path(scratch) / "result.json"
        spec_file.write_text(json.dumps(spec))
        try:
            done = subprocess.run([sys.executable, "-m", "bbagent.agent.serving.check_model_child", str(spec_file),
                                   str(result_file)], capture_output=True, text=True, timeout=timeout_s, env=env,
                                  cwd=scratch)
        except subprocess.TimeoutExpired:
            return {**spec, "match": False, "status": "crashed", "crashed": f"stopped after {timeout_s:g} s (--timeout)"}
        result = json.loads(result_file.read_text()) if result_file.is_file() else None
    if done.returncode == CHILD_USAGE_ERROR and result:
        raise UsageError(result["usage_error"])
    if done.returncode != 0 or result is None:  # a kernel (or the model) took the child down
        return {**spec, "match": False, "status": "crashed", "crashed": f"the child process exited with {done.returncode}",
                "stderr_tail": done.stderr[-3000:]}
    result["child_stdout_tail"] = done.stdout[-2000:]
    gate = (result.get("compiled") or {}).get("gate")
    if gate is not None:  # the whole-model gate's decision, recorded for enable(model=..., mode=...)
        from bbagent.agent.serving.gate import ServingPlan, save_plan
        try:
            gate["saved_to"] = str(save_plan(Path(check.root), ServingPlan(**gate)))
        except OSError as exc:  # a full disk, a read-only root: the measurement is still printed
            gate["not_saved"] = f"the plan could not be recorded under {check.root}: {exc.strerror or exc}"
    return result
