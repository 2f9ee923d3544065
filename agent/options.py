"""What ``generate`` takes beyond the operator: one typed object, checked once.

The command line builds a ``GenerateOptions`` from its flags, the Python API from keyword
arguments; a batch checks it before any operator starts, stores it in its ledger
(``model_dump``) and ``--resume`` reads it back (``model_validate``; an option added after the
batch was started takes its default, as the batch ran with it). Checks that depend on this machine
(CUDA, OpInfo, a model's price, the provider's key) are made where the work starts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bbagent.agent.errors import UsageError
from bbagent.harness.interface import DSLS, LIBRARY_POLICIES

PROVIDERS = ("openai", "anthropic", "replay")
DSL_NAMES = tuple(DSLS)  # the kernel languages the harness judges (harness.dsl)
DEVICES = ("cuda", "cpu")
TARGET_BASELINES = ("eager", "inductor")
INDUCTOR_MODES = ("default", "max-autotune")  # harness.timing.baselines.INDUCTOR_MODES, checked by engines_of
# The command-line flag of a field, where it is not --<field-with-dashes>
FLAGS = {"timeout_s": "--timeout"}
BATCH_FLAGS = {**FLAGS, "max_cost_usd": "--max-cost-per-op", "max_tokens": "--max-tokens-per-op"}


def flag_of(field: str, batch: bool = False) -> str:
    return (BATCH_FLAGS if batch else FLAGS).get(field, "--" + field.replace("_", "-"))


def positive(name: str, value, minimum=None) -> None:
    """A UsageError unless ``value`` is None, positive, or at least ``minimum``."""
    if value is None:
        return
    if (minimum is None and value <= 0) or (minimum is not None and value < minimum):
        rule = "positive" if minimum is None else f"at least {minimum}"
        raise UsageError(f"{name} must be {rule} (got {value})")


def engines_of(baseline: str, inductor_mode: str = "default") -> tuple[str, ...]:
    """The engines named by ``--baseline`` ("eager,inductor"); a UsageError for an unknown one or mode."""
    from bbagent.harness.interface import INDUCTOR_MODES, parse_engines
    try:
        engines = parse_engines(baseline)
    except ValueError as exc:
        raise UsageError(f"--baseline: {exc}") from None
    if inductor_mode not in INDUCTOR_MODES:
        raise UsageError(f"--inductor-mode: {inductor_mode!r} is not one of {', '.join(INDUCTOR_MODES)}")
    return engines


def _option(default, help: str, **extra):
    """A field of GenerateOptions with its command-line help (``option_flags``); ``extra``:
    ``choices``, ``metavar``, ``batch_help`` (a batch's help, where its flag means another thing)."""
    return Field(default, description=help, json_schema_extra=extra or None)


MOST_ROUNDS, MOST_CANDIDATES, MOST_RETRIES = 1000, 64, 100  # beyond them a number is a slip of the keyboard


class GenerateOptions(BaseModel):
    """Every option of ``bbagent generate`` (and of each operator of a batch); the command line's
    flags, their defaults and their help are made from these fields (``option_flags``)."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = _option("openai", "LLM provider", choices=PROVIDERS)
    model: str | None = _option(None, "model name, e.g. gpt-5 or claude-sonnet-4-5 (required for openai/anthropic)")
    base_url: str | None = _option(None, "OpenAI-compatible server URL (vLLM, Ollama); default OPENAI_BASE_URL")
    replay: str | None = _option(None, "replay source for --provider replay: a JSON file, a runs/<id> directory or a "
                                       "run id (default: the one shipped for OP)")
    dsl: str = _option("triton", "the kernel language answers are asked in: triton, or helion (PyTorch's tiled "
                                 "kernel language, compiled to Triton; needs the helion package)", choices=DSL_NAMES)
    autotune_budget: float = _option(
        0.0, "with --dsl helion on a GPU: once the run ends, tune its accepted kernel with Helion's autotuner for at "
             "most this many seconds, on the timed shapes with the GPU alone; the configs found are kept beside the "
             "kernel (helion_configs.json), judged with it and served pinned (0: no tuning)", metavar="SECONDS")
    rounds: int = _option(5, "most rounds to try")
    candidates: int = _option(1, "answers asked per round, in parallel; all are evaluated and the best moves on")
    retries: int = _option(5, "attempts per LLM call on 429/5xx/timeouts")
    max_output_tokens: int = _option(8192, "most tokens an answer may have")
    temperature: float | None = _option(None, "sampling temperature (default: the provider's)")
    max_cost_usd: float | None = _option(
        None, "stop between rounds once the run's LLM calls cost this much (prices: the shipped list, overlaid by "
              "~/.config/bbagent/prices.json or $BBAGENT_PRICES)",
        batch_help="each operator's run stops between rounds at this cost")
    max_tokens: int | None = _option(None, "stop between rounds once the run used this many tokens (in + out)",
                                     batch_help="each operator's run stops between rounds at this many tokens")
    target_speedup: float | None = _option(
        None, "once a kernel is correct, optimisation ends when the best reaches this geomean speedup over eager on "
              "the GPU (default: no such target; 0 accepts the first correct kernel)")
    target_baseline: str | None = _option(
        None, "what --target-speedup is measured against: eager, or torch.compile's inductor (timed on the GPU; "
              "implies --baseline eager,inductor; where inductor compiles no shape the target holds against eager); "
              "default eager for an operator, inductor for a program (--problem)", choices=TARGET_BASELINES)
    target_roof: float = _option(0.9, "... or when the best reaches this fraction of the roofline, as a geomean over "
                                      "its timed shapes (0: no such target)")
    patience: int = _option(2, "... or when this many rounds in a row did not improve the best; run.json's "
                               "stopped_because says which ended it")
    dispatch: bool = _option(True, "compose per-shape dispatchers: where two correct kernels of a run are each faster "
                                   "on some timed shapes, bbagent composes a kernel that calls each where it is "
                                   "faster, evaluates it, and keeps it when it beats both")
    profile_feedback: bool = _option(True, "profile correct kernels for the speed feedback: each one, with eager, on "
                                           "the 2 timed shapes furthest from their roofline (Nsight Compute where ncu "
                                           "is found, else the torch profiler); the next prompt states the figures "
                                           "and a diagnosis")
    exact_overload: bool = _option(False, "ask for OP's own calling convention and test OP alone; by default an "
                                          "in-place or out= overload asks for its functional overload's computation "
                                          "once, and the kernel is tested and served as every overload of the family "
                                          "(functional, in-place, out=)")
    device: str | None = _option(None, "where candidates run (default: cuda if available, else cpu, the Triton "
                                       "interpreter)", choices=DEVICES)
    timeout_s: float = _option(300.0, "wall-clock seconds per evaluation", metavar="SECONDS")
    seed: int | None = _option(None, "input seed (default: fresh per evaluation; recorded in the Verdict)")
    allow_no_opinfo: bool = _option(False, "evaluate even where PyTorch's OpInfo database cannot be imported "
                                           "(expecttest missing): the tests are then the real-model traces and edge "
                                           "cases only")
    channels_last: bool = _option(False, "also run every trace input with a contiguous 4-d or 5-d tensor with those "
                                         "tensors in channels-last layout (NHWC; NDHWC), as models using "
                                         "torch.channels_last pass them; for convolution, pooling, normalization and "
                                         "elementwise operators (a batch applies it to those among its operators)")
    allow_library: str = _option("gemm", "for a program (--problem, --kernelbench): what the answer may leave to "
                                         "torch: none; gemm (matrix products and convolutions, cuBLAS and cuDNN); "
                                         "all. The rest it computes in Triton", choices=LIBRARY_POLICIES)
    max_shapes: int = _option(24, "most trace shapes to time, spread from smallest to largest")
    target_ms: float = _option(25.0, "GPU time per function and shape, the L2 flush before each call included, in ms")
    no_cache: bool = _option(False, "measure eager aten again instead of reading ROOT/runs/reference_timings.sqlite "
                                    "(the new numbers replace the cached ones)")
    cache: bool = _option(False, "answer a request identical to an earlier one (same provider, model, endpoint, "
                                 "messages) from ROOT/runs/llm_calls.sqlite instead of asking again (default: every "
                                 "request is asked afresh; a batch's --resume reuses the answers that batch already "
                                 "paid for)")
    baseline: str = _option("eager", "what to compare the kernel with, comma-separated: eager (always) and inductor "
                                     "(the op compiled by torch.compile, timed on the GPU in a child of its own after "
                                     "the kernel passed; cached like eager)", metavar="ENGINES")
    inductor_mode: str = _option("default", "torch.compile mode of the inductor baseline (max-autotune without "
                                            "inductor's own CUDA graphs: bbagent captures every side in a CUDA graph "
                                            "itself)", choices=INDUCTOR_MODES)

    @classmethod
    def of(cls, batch: bool = False, **values) -> "GenerateOptions":
        """The options from keyword values (None: the default), checked; a UsageError naming the
        flag of the first wrong one (``batch``: as ``bbagent batch`` spells its flags)."""
        given = {key: str(value) if key == "replay" and value is not None else value
                 for key, value in values.items() if value is not None}
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            raise UsageError(validation_message(exc, batch)) from None

    def __init__(self, **values):
        """As pydantic builds it, but a wrong value is a ``UsageError`` naming the flag, as
        everywhere in bbagent's API (docs/python-api.md)."""
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise UsageError(validation_message(exc)) from None

    @model_validator(mode="after")
    def _check(self) -> "GenerateOptions":
        """Every problem of these options at once, in one message (a user fixes them in one go)."""
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def problems(self) -> list[str]:
        """What is wrong with these values, each in the words of the command line; [] when nothing is."""
        problems = []

        def check(wrong: bool, message: str) -> None:
            if wrong:
                problems.append(message)

        def usage(rule, *arguments) -> None:  # a check that raises UsageError, its message kept
            try:
                rule(*arguments)
            except UsageError as exc:
                problems.append(str(exc))

        check(self.provider not in PROVIDERS, f"unknown provider '{self.provider}'; choose one of {', '.join(PROVIDERS)}")
        example = "gpt-5" if self.provider == "openai" else "claude-sonnet-4-5"
        check(self.provider in PROVIDERS and self.provider != "replay" and not self.model,
              f"--model is required with --provider {self.provider} (for example --model {example})")
        for field, minimum in (("rounds", 1), ("candidates", 1), ("retries", 1), ("max_shapes", 1), ("patience", 1),
                               ("max_output_tokens", None), ("max_cost_usd", None), ("max_tokens", None),
                               ("timeout_s", None), ("target_ms", None)):
            usage(positive, flag_of(field), getattr(self, field), minimum)
        for field, most in (("rounds", MOST_ROUNDS), ("candidates", MOST_CANDIDATES), ("retries", MOST_RETRIES)):
            check(getattr(self, field) > most, f"{flag_of(field)} must be at most {most} (got {getattr(self, field)})")
        if self.base_url is not None:
            from urllib.parse import urlsplit
            parts = urlsplit(self.base_url)
            check(parts.scheme not in ("http", "https") or not parts.netloc,
                  f"--base-url must be an http:// or https:// URL with a host, e.g. http://localhost:8000/v1 "
                  f"(got {self.base_url!r})")
        check(self.target_speedup is not None and self.target_speedup < 0,
              f"--target-speedup must be 0 or more (got {self.target_speedup})")
        check(not 0 <= self.target_roof <= 1,
              f"--target-roof must be between 0 and 1, a fraction of the roofline (got {self.target_roof})")
        check(self.target_baseline not in (None, *TARGET_BASELINES),
              f"--target-baseline must be eager or inductor (got {self.target_baseline!r})")
        check(self.dsl not in DSL_NAMES, f"--dsl must be one of {', '.join(DSL_NAMES)} (got {self.dsl!r})")
        check(self.autotune_budget < 0, f"--autotune-budget must be 0 or more seconds (got {self.autotune_budget:g})")
        check(self.autotune_budget > 0 and self.dsl != "helion",
              f"--autotune-budget tunes Helion kernels: it needs --dsl helion (got --dsl {self.dsl})")
        check(self.device not in (None, *DEVICES), f"device must be 'cuda' or 'cpu' (got {self.device!r})")
        check(self.allow_library not in LIBRARY_POLICIES,
              f"--allow-library must be one of {', '.join(LIBRARY_POLICIES)} (got {self.allow_library!r})")
        usage(engines_of, self.baseline, self.inductor_mode)
        return problems

    @property
    def engines(self) -> tuple[str, ...]:
        """The baselines to time: ``baseline``'s, with inductor where the target is over inductor."""
        engines = engines_of(self.baseline, self.inductor_mode)
        return engines + ("inductor",) if self.target_baseline == "inductor" and "inductor" not in engines else engines

    def differing(self, given: dict, batch: bool = True) -> list[str]:
        """The options in ``given`` (set explicitly, None for unset) that differ from these, as flags."""
        return [f"{flag_of(key, batch)} (the batch's: {getattr(self, key)!r})" for key, value in given.items()
                if value is not None and value != getattr(self, key)]


def validation_message(exc: ValidationError, batch: bool = False) -> str:
    """The first problem of a ValidationError in the words of the command line."""
    first = exc.errors()[0]
    if first["type"] == "value_error":  # ours: the message says it all
        return str(first["msg"]).removeprefix("Value error, ")
    field = str(first["loc"][0]) if first["loc"] else ""
    if first["type"] == "extra_forbidden":
        return f"unknown option '{field}'; the options are: {', '.join(GenerateOptions.model_fields)}"
    return f"{flag_of(field, batch)}: {first['msg'].lower()} (got {first.get('input')!r})"


@dataclass(frozen=True)
class Flag:
    """One command-line flag of a GenerateOptions field: ``add_argument(name, **arguments)``."""
    field: str
    name: str
    arguments: dict


def option_flags(batch: bool = False, fields=None, defaults: dict | None = None) -> list[Flag]:
    """The flags of GenerateOptions' fields (``fields``: those alone), named by ``flag_of`` (a
    field on by default is turned off by ``--no-<field>``), their help from the field's, with its
    default. Without ``defaults`` each flag's value is None unless given (GenerateOptions.of then
    takes the field's default), so that what was given can be told from what was not; with
    ``defaults`` (a command that passes the values on itself) each takes the field's default, or
    the one ``defaults`` gives it (bench times more shapes)."""
    flags = []
    for name, info in GenerateOptions.model_fields.items():
        if fields is not None and name not in fields:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        help_text = str(extra["batch_help"] if batch and "batch_help" in extra else info.description)
        default = (defaults or {}).get(name, info.default)
        kind = next((t for t in get_args(info.annotation) if t is not type(None)), info.annotation)
        flag = flag_of(name, batch)
        arguments = {"dest": flag.removeprefix("--").replace("-", "_"),
                     "default": None if defaults is None else default}
        if kind is bool and info.default:
            flag = "--no-" + flag.removeprefix("--")
            arguments.update(action="store_false", help=f"do not {help_text}")
        elif kind is bool:
            arguments.update(action="store_true", help=help_text)
        else:
            arguments.update(type=kind, help=help_text + _default_said(name, default))
            arguments.update({key: extra[key] for key in ("choices", "metavar") if key in extra})
        flags.append(Flag(name, flag, arguments))
    return flags


def _default_said(name: str, default) -> str:
    if default is None or name == "replay":  # its help says what None means
        return ""
    return f" (default {default:g})" if isinstance(default, float) else f" (default {default})"
