"""The models ``bbagent check-model`` runs: built from a config with a fixed seed, no downloaded
weights, so that two processes build the same model and inputs bit for bit.

* ``resnet18``: torchvision's ResNet-18 (randomly initialised), input images N x 3 x H x W.
* a program file in KernelBench's format (``build_program``; ``bbagent regions --script``).
* ``transformer``: a small decoder-only transformer written here from plain modules (Linear,
  LayerNorm, an explicit softmax attention with a causal mask, a GELU or ReLU MLP, residual adds),
  so that its aten calls are the ones a real model of that kind makes (mm/addmm, _softmax,
  native_layer_norm, gelu, add). ``nn.TransformerEncoderLayer`` is not used: in eval mode it
  runs one fused aten op and would hide them.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from bbagent.agent.errors import ModelUnavailable, UsageError
from bbagent.harness.interface import ProblemError, program_module, program_problem

MODELS = ("resnet18", "transformer")
DEFAULT_CONFIGS: dict[str, dict[str, int | str]] = {
    "resnet18": {"batch": 8, "image": 224, "classes": 1000},
    "transformer": {"batch": 4, "seq": 128, "vocab": 1000, "d_model": 256, "heads": 4, "layers": 2,
                    "d_ff": 1024, "activation": "gelu"},
}


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, activation: str):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.up, self.down = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.activation = nn.GELU() if activation == "gelu" else nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        q, k, v = (t.reshape(batch, seq, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(width // self.heads)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        attention = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        mixed = (attention @ v).transpose(1, 2).reshape(batch, seq, width)
        x = x + self.proj(mixed)
        return x + self.down(self.activation(self.up(self.norm2(x))))


class SmallTransformer(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, d_ff: int, seq: int, activation: str):
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, d_model), nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(TransformerBlock(d_model, heads, d_ff, activation) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def config_for(name: str, overrides: dict | None = None) -> dict:
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}'; one of {', '.join(MODELS)}")
    unknown = set(overrides or {}) - set(DEFAULT_CONFIGS[name])
    if unknown:
        raise ValueError(f"{name} has no setting {', '.join(sorted(unknown))}; its settings: "
                         f"{', '.join(f'{k}={v}' for k, v in DEFAULT_CONFIGS[name].items())}")
    for key, value in (overrides or {}).items():
        default = DEFAULT_CONFIGS[name][key]
        if type(value) is not type(default) or (isinstance(value, int) and value < 1):
            wanted = "a positive whole number" if isinstance(default, int) else f"a {type(default).__name__}"
            raise ValueError(f"{name}'s setting {key} takes {wanted}, e.g. {key}={default} (got {value!r})")
    return {**DEFAULT_CONFIGS[name], **(overrides or {})}


def build_model(name: str, config: dict, device: str, dtype: torch.dtype, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """The model in eval mode and its input, both from ``seed``."""
    torch.manual_seed(seed)
    if name == "resnet18":
        try:
            from torchvision.models import resnet18
        except Exception as exc:  # noqa: BLE001 - absent, or built for another torch
            raise ModelUnavailable(f"resnet18 needs torchvision, built for this torch ({torch.__version__}): "
                                   f"pip install torchvision ({type(exc).__name__}: {exc})") from None
        model = resnet18(weights=None, num_classes=config["classes"])
        inputs = torch.randn(config["batch"], 3, config["image"], config["image"])
    else:
        model = SmallTransformer(config["vocab"], config["d_model"], config["heads"], config["layers"],
                                 config["d_ff"], config["seq"], config["activation"])
        inputs = torch.randint(0, config["vocab"], (config["batch"], config["seq"]))
    model = model.to(device=device, dtype=dtype).eval()
    inputs = inputs.to(device) if inputs.dtype == torch.int64 else inputs.to(device=device, dtype=dtype)
    return model, inputs


def build_program(path: Path, device: str, dtype: torch.dtype, seed: int = 0) -> tuple[nn.Module, tuple]:
    """A program in KernelBench's format (``Model``, ``get_inputs``, ``get_init_inputs``; the
    user's own model written that way): its ``Model`` in eval mode and its inputs, from ``seed``,
    on ``device``, floating-point tensors in ``dtype``. A ``ProblemError`` where the file is not
    such a program; what its code raises is raised."""
    module = program_module(program_problem(path))
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).to(device=device, dtype=dtype).eval()
    inputs = tuple(value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
                   if isinstance(value, torch.Tensor) else value for value in module.get_inputs())
    return model, inputs


def built(name: str, config: dict, device: str, dtype: str, seed: int = 0,
          script: str | Path | None = None) -> tuple[nn.Module, tuple]:
    """The model (a built-in one from ``config``, or the program file ``script``) and its inputs as
    a tuple, run once forward here: a ``UsageError`` naming the fix where the script is not a
    program in KernelBench's format, or where the model does not run in ``dtype`` on ``device``
    (its own error said)."""
    try:
        if script is not None:
            model, inputs = build_program(Path(script), device, getattr(torch, dtype), seed)
        else:
            model, one = build_model(name, config, device, getattr(torch, dtype), seed)
            inputs = (one,)
        with torch.no_grad():
            model(*inputs)
    except ProblemError as exc:
        raise UsageError(f"--script {script}: {exc}") from None
    except ModelUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - the model's own code, said with the fix
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        settings = f"with the settings {config}" if script is None else f"with its own get_inputs() ({script})"
        fix = " (--dtype float32 runs every model)" if dtype != "float32" else ""
        raise UsageError(f"{name} does not run in {dtype} on {device} {settings}: {type(exc).__name__}: "
                         f"{first[:300]}{fix}") from None
    return model, inputs
