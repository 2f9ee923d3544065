"""What the parent asks of the timing phase (``harness.timing.phase``; GPU only, after every
test passed), and the rows of the timing cache that travel with the request."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bbagent.harness.timing.reference_cache import ReferenceCache


@dataclass
class TimingOptions:
    """Ask for the timing phase (``harness.timing.phase``; GPU only, after every test passed).
    ``cache``: eager timings and device yardsticks already measured are read from it (unless
    ``reuse`` is False, as with ``--no-cache``) and new ones are written to it. ``keep_raw``
    keeps every repetition's time in the Verdict (``bbagent bench`` writes them to its records)."""
    target_ms: float = 25.0
    max_cases: int = 24
    cache: ReferenceCache | None = None
    reuse: bool = True
    keep_raw: bool = False
    rows: dict | None = None  # the cached rows, read by the machine that holds the cache (see remote)
    baselines: tuple[str, ...] = ("eager",)  # harness.timing.baselines.ENGINES; eager always
    inductor_mode: str = "default"  # a key of harness.timing.baselines.INDUCTOR_MODES
    profile: int = 0  # profile this many timed shapes (harness.timing.profile) ...
    profile_dir: Path | None = None  # ... into this directory (local evaluations only)
    ncu: int = 0  # Nsight Compute metrics on this many timed shapes (harness.timing.ncu)
    pick: str = "largest"  # which shapes both profile: the largest, or those "furthest" from their roofline
    autotune_s: float = 0.0  # a Helion kernel's tuning budget, spent on the timed shapes first (harness.helion_configs)

    def request(self, op: str) -> dict:
        asked = {"target_ms": self.target_ms, "max_cases": self.max_cases, "profile": self.profile, "pick": self.pick,
                 "autotune_s": self.autotune_s}
        if self.rows is not None:
            return {**asked, **self.rows}
        import torch  # the child's version is the parent's (same environment)
        return {**asked, **self._cached(op, torch.__version__)}

    def _cached(self, op: str, torch_version: str) -> dict:
        if self.cache is None or not self.reuse:
            return {"reference": [], "device": []}
        return {"reference": self.cache.reference_rows(op, torch_version),
                "device": self.cache.device_rows(torch_version)}

    def remote(self, op: str, torch_version: str) -> dict:
        """These options as plain data for an evaluation on another machine (whose torch is
        ``torch_version``): the cached rows travel, the cache stays; raw times are kept, for
        ``finish_timing`` on this side to store and strip."""
        return {"target_ms": self.target_ms, "max_cases": self.max_cases, "keep_raw": True, "autotune_s": self.autotune_s,
                "rows": self._cached(op, torch_version), "baselines": tuple(self.baselines),
                "inductor_mode": self.inductor_mode}
