"""What ``generate`` takes beyond the operator: one typed object, checked once.

The command line builds a ``GenerateOptions`` from its flags, the Python API from keyword
arguments; a batch checks it before any operator starts, stores it in its ledger
(``model_dump``) and ``--resume`` reads it back (``model_validate``; an option added after the
batch was started takes its default, as the batch ran with it). Checks that depend on this machine
(CUDA, OpInfo, a model's price, the provider's key) are made where the work starts.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from bbagent.agent.errors import UsageError

PROVIDERS = ("openai", "anthropic", "replay")
DEVICES = ("cuda", "cpu")
TARGET_BASELINES = ("eager", "inductor")
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


class GenerateOptions(BaseModel):
    """Every option of ``bbagent generate`` (and of each operator of a batch); the README lists them."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    replay: str | None = None
    rounds: int = 5
    candidates: int = 1
    retries: int = 5
    max_output_tokens: int = 8192
    temperature: float | None = None
    max_cost_usd: float | None = None  # the run's budget (a batch: each operator's)
    max_tokens: int | None = None
    target_speedup: float | None = None  # optimisation ends once the best kernel reaches it (None: no such target)
    target_baseline: str = "eager"
    target_roof: float = 0.9  # ... or once its geomean roof fraction reaches this (0: no such target)
    patience: int = 2  # ... or once this many rounds in a row did not improve it
    dispatch: bool = True  # compose a per-shape dispatcher where two correct kernels win on different shapes
    profile_feedback: bool = True  # profile each timed kernel (ncu, else the torch profiler) for the speed feedback
    exact_overload: bool = False
    device: str | None = None  # None: cuda where there is one, else cpu (the Triton interpreter)
    timeout_s: float = 300.0
    seed: int | None = None
    allow_no_opinfo: bool = False
    channels_last: bool = False
    max_shapes: int = 24
    target_ms: float = 25.0
    no_cache: bool = False  # measure eager aten again instead of reading the timing cache
    cache: bool = False  # answer a request identical to an earlier one from the call log (default: ask afresh)
    baseline: str = "eager"
    inductor_mode: str = "default"

    @classmethod
    def of(cls, batch: bool = False, **values) -> "GenerateOptions":
        """The options from keyword values (None: the default), checked; a UsageError naming the
        flag of the first wrong one (``batch``: as ``bbagent batch`` spells its flags)."""
        given = {key: str(value) if key == "replay" and value is not None else value
                 for key, value in values.items() if value is not None}
        try:
            return cls(**given)
        except ValidationError as exc:
            raise UsageError(problem_of(exc, batch)) from None

    @model_validator(mode="after")
    def _check(self) -> "GenerateOptions":
        if self.provider not in PROVIDERS:
            raise ValueError(f"unknown provider '{self.provider}'; choose one of {', '.join(PROVIDERS)}")
        if self.provider != "replay" and not self.model:
            example = "gpt-5" if self.provider == "openai" else "claude-sonnet-4-5"
            raise ValueError(f"--model is required with --provider {self.provider} (for example --model {example})")
        for field, minimum in (("rounds", 1), ("candidates", 1), ("retries", 1), ("max_shapes", 1), ("patience", 1),
                               ("max_output_tokens", None), ("max_cost_usd", None), ("max_tokens", None),
                               ("timeout_s", None), ("target_ms", None)):
            positive(flag_of(field), getattr(self, field), minimum)
        if self.target_speedup is not None and self.target_speedup < 0:
            raise ValueError(f"--target-speedup must be 0 or more (got {self.target_speedup})")
        if not 0 <= self.target_roof <= 1:
            raise ValueError(f"--target-roof must be between 0 and 1, a fraction of the roofline (got {self.target_roof})")
        if self.target_baseline not in TARGET_BASELINES:
            raise ValueError(f"--target-baseline must be eager or inductor (got {self.target_baseline!r})")
        if self.device not in (None, *DEVICES):
            raise ValueError(f"device must be 'cuda' or 'cpu' (got {self.device!r})")
        engines_of(self.baseline, self.inductor_mode)
        return self

    @property
    def engines(self) -> tuple[str, ...]:
        """The baselines to time: ``baseline``'s, with inductor where the target is over inductor."""
        engines = engines_of(self.baseline, self.inductor_mode)
        return engines + ("inductor",) if self.target_baseline == "inductor" and "inductor" not in engines else engines

    def differing(self, given: dict, batch: bool = True) -> list[str]:
        """The options in ``given`` (set explicitly, None for unset) that differ from these, as flags."""
        return [f"{flag_of(key, batch)} (the batch's: {getattr(self, key)!r})" for key, value in given.items()
                if value is not None and value != getattr(self, key)]


def problem_of(exc: ValidationError, batch: bool = False) -> str:
    """The first problem of a ValidationError in the words of the command line."""
    first = exc.errors()[0]
    if first["type"] == "value_error":  # ours: the message says it all
        return str(first["msg"]).removeprefix("Value error, ")
    field = str(first["loc"][0]) if first["loc"] else ""
    if first["type"] == "extra_forbidden":
        return f"unknown option '{field}'; the options are: {', '.join(GenerateOptions.model_fields)}"
    return f"{flag_of(field, batch)}: {first['msg'].lower()} (got {first.get('input')!r})"
