"""The configs a Helion kernel runs: tuned once for an accepted kernel, then pinned.

A Helion kernel runs one config (block sizes, loop orders, warps, stages) per specialization of its
arguments (Helion's key: dtypes, shapes, strides, device). Judged, it runs its untuned config: the
one its decorator names, else Helion's default, since the autotuner is off while tests run
(``harness.sandbox.parent.run.HELION_JUDGED``). ``--autotune-budget SECONDS`` tunes an accepted
kernel once, in its child's timing phase with the GPU alone (``Tuning``): Helion's own search on
each timed shape in turn, within an even share of what is left of the budget. What it found is a
``ConfigTable``, kept beside the kernel as ``helion_configs.json`` and reviewed with it; the kernel
is judged again with the table pinned (``Pinned``) and served with it pinned
(``harness.kernel_import``). A call whose specialization the table lacks runs the untuned config
and says so, once per specialization: no silent fallback, and no search while serving.

Both policies stand in for the module's ``@helion.kernel`` functions (``install``), which the
module's own code calls by name. Standard library at import; helion only where a kernel uses it.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from importlib import metadata
from types import ModuleType
from typing import Any, Protocol

CONFIGS_FILE = "helion_configs.json"
SCHEMA = "bbagent.helion-configs"
MIN_SEARCH_S = 2.0  # a share of the budget below this is no search: Helion compiles one config in about a second
FULL_SEARCH_S = 300.0  # a share this long runs Helion's full search, a shorter one its quick search
SEARCH_SHARE = 0.6  # of a search's seconds, what Helion's own budget gets; the final timing of its best, the rest
FINALISTS = 8  # the best configs Helion times again at the end of a search


@dataclass(frozen=True)
class TunedConfig:
    """The config the search chose for one specialization of one kernel."""
    kernel: str     # the @helion.kernel function's name in the module
    key: str        # Helion's specialization key of the call, as text
    shapes: str     # the call's arguments in words, for the reviewer
    config: dict    # helion.Config's fields
    search_s: float  # what the search took


@dataclass(frozen=True)
class ConfigTable:
    """What one tuning found: with which Helion release on which GPU, within which budget and in
    how long, the configs, and the calls it left untuned with why."""
    helion: str
    gpu: str
    budget_s: float
    spent_s: float
    configs: tuple[TunedConfig, ...]
    untuned: tuple[str, ...] = ()

    def to_json(self) -> str:
        """One line per field and per config, for a reviewer's diff."""
        head = {"schema": SCHEMA, **{k: v for k, v in asdict(self).items() if k not in ("configs", "untuned")}}
        lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
        return "\n".join(["{", *lines, *_listed("configs", [asdict(row) for row in self.configs], ","),
                          *_listed("untuned", list(self.untuned), "")] + ["}"]) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ConfigTable:
        """The table ``to_json`` wrote; a ValueError saying what is wrong with anything else."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.pop("schema", None) != SCHEMA:
                raise ValueError(f"not a {SCHEMA} document")
            configs = tuple(TunedConfig(**row) for row in data.pop("configs"))
            return cls(**{**data, "configs": configs, "untuned": tuple(data.pop("untuned", ()))})
        except (TypeError, KeyError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a {SCHEMA} document: {exc}") from None

    def find(self, kernel: str, key: str) -> TunedConfig | None:
        return next((row for row in self.configs if row.kernel == kernel and row.key == key), None)


class Policy(Protocol):
    """What runs before a specialization's first call (``Specialized``): True where it is settled,
    False to be asked again at its next call; and what it reports at the end of a judged run
    (``harness.events.HelionConfigs``'s fields)."""
    def first_call(self, name: str, kernel, bound, args: tuple) -> bool: ...

    def report(self) -> dict: ...


class Pinned:
    """Each specialization runs the table's config; one the table lacks (or whose config this
    Helion cannot compile) runs the untuned config, said once through ``say``."""

    def __init__(self, table: ConfigTable, say: Callable[[str], None]):
        self.table, self.say = table, say
        self.pinned = 0
        self.unseen: list[str] = []

    def first_call(self, name: str, kernel, bound, args: tuple) -> bool:
        import helion
        call = f"{name}({shapes_text(args)})"
        found = self.table.find(name, key_text(kernel, args))
        why = f"no tuned config in {CONFIGS_FILE}"
        if found is not None:
            try:
                bound.set_config(helion.Config.from_dict(found.config))
                self.pinned += 1
                return True
            except Exception as exc:  # noqa: BLE001 - said, and the untuned config runs
                why = f"its tuned config does not compile with this Helion ({type(exc).__name__}: {exc})"
        self.unseen.append(call)
        self.say(f"Helion kernel {call}: {why}; it runs its untuned config")
        return True

    def report(self) -> dict:
        return {"pinned": self.pinned, "unseen": self.unseen}


Search = Callable[[Any, Any, tuple, float], Any]  # (kernel, bound kernel, args, seconds) -> helion.Config


def helion_search(kernel, bound, args: tuple, seconds: float):
    """Helion's autotuner on ``bound`` for ``args``, within ``seconds``: its quick search below
    ``FULL_SEARCH_S`` (its first population is a fifth of the full one's, and Helion checks its
    budget only once a population is timed), else its full one; the decorator's configs ignored,
    the local cache only (no network). Helion's budget cuts the search, not the final timing of
    its best configs after it (eight configs, five seconds each, by default): the search gets
    ``SEARCH_SHARE`` of ``seconds`` and the final timing what is left."""
    effort = "full" if seconds >= FULL_SEARCH_S else "quick"
    final_ms = seconds * (1 - SEARCH_SHARE) * 1000 / FINALISTS
    with _settings(kernel.settings, autotune_effort=effort, force_autotune=True, autotune_progress_bar=False,
                   autotune_budget_seconds=max(1, int(seconds * SEARCH_SHARE)), autotune_cache="LocalAutotuneCache"), \
            _environment(HELION_KEEP_CACHE="1",  # compile into the Triton cache the sandbox runs code from
                         HELION_AUTOTUNE_FINAL_REBENCHMARK_TOP_K=str(FINALISTS),
                         HELION_AUTOTUNE_FINAL_REBENCHMARK_TARGET_MS=f"{max(final_ms, 10.0):.0f}"):
        return bound.autotune(list(args), force=True)


class Tuning:
    """While ``active`` (the caller's tuning calls, not the tests), a search on each specialization's
    first call, within an even share of what is left of ``budget_s`` among the shapes still to tune
    (``shapes_left``, set by the caller); the calls the budget does not reach, or whose search
    fails, keep their untuned config, with why."""

    def __init__(self, budget_s: float, gpu: str, search: Search = helion_search):
        self.budget_s, self.gpu, self.search = budget_s, gpu, search
        self.active = False
        self.shapes_left = 1
        self.configs: list[TunedConfig] = []
        self.untuned: list[str] = []

    @property
    def spent_s(self) -> float:
        return round(sum(row.search_s for row in self.configs), 3)

    def first_call(self, name: str, kernel, bound, args: tuple) -> bool:
        if not self.active:
            return False
        call = f"{name}({shapes_text(args)})"
        share = (self.budget_s - self.spent_s) / max(self.shapes_left, 1)
        if share < MIN_SEARCH_S:
            self.untuned.append(f"{call}: the budget was spent")
            return True
        started = time.perf_counter()
        try:
            config = self.search(kernel, bound, args, share)
        except Exception as exc:  # noqa: BLE001 - the call keeps its untuned config, said in the table
            self.untuned.append(f"{call}: the search failed ({_cause(exc)})")
            return True
        bound.set_config(config)
        self.configs.append(TunedConfig(kernel=name, key=key_text(kernel, args), shapes=shapes_text(args),
                                        config=json.loads(config.to_json()),
                                        search_s=round(time.perf_counter() - started, 3)))
        return True

    def table(self) -> ConfigTable:
        return ConfigTable(helion=metadata.version("helion"), gpu=self.gpu, budget_s=self.budget_s,
                           spent_s=self.spent_s, configs=tuple(self.configs), untuned=tuple(self.untuned))

    def report(self) -> dict:
        return {"tuned": self.table().to_json()}


class Specialized:
    """Stands in for a module's ``@helion.kernel`` function: binds each call as Helion's own call
    does, and hands each new specialization to the policy before its first run."""

    def __init__(self, kernel, name: str, policy: Policy):
        self.kernel, self.name, self.policy = kernel, name, policy
        self._seen: dict[int, object] = {}  # the bound kernels met, kept alive so that their ids stay theirs

    def __call__(self, *args, **kwargs):
        args = self.kernel.normalize_args(*args, **kwargs)
        bound = self.kernel.bind(args)
        if id(bound) not in self._seen and self.policy.first_call(self.name, self.kernel, bound, args):
            self._seen[id(bound)] = bound
        return bound(*args)

    def __getattr__(self, attribute: str):
        return getattr(self.kernel, attribute)


def install(module: ModuleType, policy: Policy) -> list[str]:
    """Put ``policy`` in front of every ``@helion.kernel`` function at the top of ``module``;
    their names (none where the module uses no Helion)."""
    if "helion" not in sys.modules:
        return []
    import helion
    names = [name for name, value in vars(module).items() if isinstance(value, helion.Kernel)]
    for name in names:
        setattr(module, name, Specialized(getattr(module, name), name, policy))
    return names


def tuning_in(module: ModuleType | None) -> Tuning | None:
    """The tuning installed in front of ``module``'s Helion kernels, if any."""
    found = [value.policy for value in vars(module).values() if isinstance(value, Specialized)] if module else []
    return next((policy for policy in found if isinstance(policy, Tuning)), None)


def key_text(kernel, args: tuple) -> str:
    """Helion's specialization key of a call (complete once the call is bound), as text."""
    return repr(kernel.specialization_key(args))


def shapes_text(args: tuple) -> str:
    """A call's arguments in words: a tensor's dtype and shape, anything else as it prints."""
    said = []
    for arg in args:
        dtype, shape = getattr(arg, "dtype", None), getattr(arg, "shape", None)
        said.append(f"{str(dtype).replace('torch.', '')}{list(shape)}" if dtype is not None and shape is not None
                    else repr(arg)[:40])
    return ", ".join(said)


def _cause(exc: BaseException) -> str:
    """An exception in words, with the first line of what caused it (Helion wraps its errors)."""
    said = [f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"]
    cause = exc.__cause__ or exc.__context__
    while cause is not None and len(said) < 4:
        said.append(f"{type(cause).__name__}: {str(cause).splitlines()[0][:300] if str(cause) else ''}")
        cause = cause.__cause__ or cause.__context__
    return ", caused by ".join(said)


def _listed(name: str, items: list, end: str) -> list[str]:
    """``"name": [...]`` one item a line (an empty list on one line), then ``end``."""
    if not items:
        return [f" {json.dumps(name)}: []{end}"]
    rows = [f"  {json.dumps(item)}," for item in items]
    return [f" {json.dumps(name)}: [", *rows[:-1], rows[-1][:-1], f" ]{end}"]


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Environment variables set for the block, then put back. Without ``HELION_KEEP_CACHE`` Helion
    compiles a search's configs into a temporary Triton cache, under the sandbox's working
    directory, from which no native code may be loaded."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _settings(settings, **values) -> Iterator[None]:
    """Helion's settings of one kernel changed for the block, then put back."""
    before = {name: getattr(settings, name) for name in values}
    for name, value in values.items():
        setattr(settings, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(settings, name, value)
