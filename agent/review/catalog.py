"""The accepted kernels of a root as a reviewer sees them: every operator's current kernel and
earlier versions, each with its review status, and the flags that ask for a closer look."""
from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

from bbagent.agent.errors import ReviewError
from bbagent.agent.families import family_of
from bbagent.agent.review.lifecycle import (SHOWN_STATUSES, changes, configs_beside, install_edit,
                                            not_covered, reviewer, set_status, status_of, unjudged,
                                            version_folders)
from bbagent.agent.review.kinds import StoredKind, stored_kind
from bbagent.agent.review.meta import KernelMeta, read_meta
from bbagent.agent.run_record import read_run
from bbagent.agent.storage import write_atomic
from bbagent.harness.interface import CONFIGS_FILE, PROGRAMS_FOLDER, Verdict

SUSPICIOUS_SPEEDUP = 10.0   # a kernel this much faster than aten usually skips work the tests missed
NEAR_TOLERANCE = 0.9        # a passing error this close to the dtype tolerance (fraction of it)


@dataclass
class KernelVersion:
    """One accepted kernel of an operator: the current one or an earlier version."""
    folder: Path
    meta: KernelMeta
    current: bool

    @property
    def number(self) -> int:
        return self.meta.version

    @cached_property
    def status(self) -> str:
        """Read once (the file's digest is compared with the approved one): a listing asks often."""
        return status_of(self.meta, folder=self.folder)

    @cached_property
    def unusable(self) -> str | None:
        """Why this version may not be served even where approved (its file is missing, is not the one
        approved, or is not the one its tests judged), in words naming the file; else None."""
        if not self.kernel.is_file():
            return f"{self.kernel} is missing"
        return not_covered(self.folder, self.meta)

    @property
    def kernel(self) -> Path:
        return self.folder / "kernel.py"

    @cached_property
    def kind(self) -> StoredKind:
        """What differs by its kind (``agent.review.kinds``), looked up once."""
        return stored_kind(self.meta)

    @property
    def overloads(self) -> list[str]:
        """The aten overloads ``bbagent.enable()`` serves it as (none for a program's answer)."""
        return self.kind.overloads(self.meta)


@dataclass
class Operator:
    """An operator of ``generated_kernels/``: its current kernel and earlier versions, newest first."""
    op: str
    versions: list[KernelVersion] = field(default_factory=list)

    @property
    def current(self) -> KernelVersion:
        return self.versions[0]

    def served(self, include_unreviewed: bool = False) -> KernelVersion | None:
        """The version ``bbagent.enable()`` serves: the newest approved one that is not stale
        (with ``include_unreviewed``, the current one whatever its state, unless rejected)."""
        if include_unreviewed:
            return next((v for v in self.versions if v.status != "rejected"), None)
        return next((v for v in self.versions if v.status == "approved"), None)

    def version(self, number: int | None) -> KernelVersion:
        if number is None:
            return self.current
        for v in self.versions:
            if v.number == number:
                return v
        raise ReviewError(f"{self.op} has no version {number}; it has {', '.join(str(v.number) for v in self.versions)}")


@dataclass
class Broken:
    """A kernel folder that cannot be used: its meta.json unreadable, or its kernel.py missing."""
    folder: Path
    reason: str

    def row(self) -> dict:
        """Its line in ``bbagent review list`` and ``bbagent kernels``: the keys of a kernel's, empty."""
        return {"op": self.folder.name, "written_for": self.folder.name, "serves": [], "family": None, "version": None,
                "status": "broken", "reason": self.reason, "flags": [self.reason], "tests": {}, "tests_passed": None,
                "tests_total": None, "geomean_speedup": None, "cost_usd": None, "cost_complete": True, "answers_paid_by": [], "rounds": None,
                "model": None, "provider": None, "run_id": None, "served_version": None, "versions": 0,
                "performance": None, "dir": str(self.folder), "kernel": str(self.folder / "kernel.py")}


def operators(root: str | Path) -> list[Operator]:
    """Every operator with an accepted kernel under ``root/generated_kernels``, by name (a broken
    folder is left out here: ``catalogue`` lists it too)."""
    return catalogue(root)[0]


def catalogue(root: str | Path) -> tuple[list[Operator], list[Broken]]:
    """Every folder of ``root/generated_kernels`` that looks like a kernel's, read once: the
    operators with their versions, and the folders that cannot be used, with why."""
    found = _scan(Path(root))
    return ([e for e in found if isinstance(e, Operator)], [e for e in found if isinstance(e, Broken)])


def _scan(root: Path) -> list[Operator | Broken]:
    """Operators' folders (``generated_kernels/<op>/``) and programs' (``generated_kernels/kernelbench/level<N>/<problem>/``)."""
    found: list[Operator | Broken] = []
    kept = Path(root) / "generated_kernels"
    folders = [*kept.glob("*"), *kept.glob(f"{PROGRAMS_FOLDER}/*/*")]
    for folder in sorted(p for p in folders if p.is_dir() and not p.name.startswith(".")):
        if not (folder / "meta.json").exists() and not (folder / "kernel.py").exists():
            continue  # not a kernel's folder
        try:
            versions = versions_in(folder)
        except (OSError, ValueError) as exc:
            found.append(Broken(folder, f"meta.json cannot be read ({_first_line(exc)})"))
            continue
        if not versions[0].kernel.is_file():
            found.append(Broken(folder, f"{versions[0].kernel} is missing"))
            continue
        found.append(Operator(versions[0].meta.op, versions))
    return found


def versions_in(folder: Path) -> list[KernelVersion]:
    """The versions kept in one kernel's folder, the current one first, then the earlier ones
    newest first; OSError or ValueError where a meta.json cannot be read."""
    return [KernelVersion(folder, read_meta(folder), True),
            *[KernelVersion(f, read_meta(f), False) for f in reversed(version_folders(folder))]]


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


def close_names(op: str, known: list[str]) -> list[str]:
    """The names of ``known`` that ``op`` may be a slip for: another overload of the same operator,
    or an operator whose name is spelled almost alike (``aten.rel.default``: ``aten.relu.default``).
    The namespace and overload every aten name shares are not compared: ``aten.cat.default`` is
    not close to ``aten.relu.default``."""
    def name(full: str) -> str:
        parts = full.split(".")
        return parts[1] if len(parts) in (2, 3) else full  # aten.relu.default, aten.relu: relu
    same = [k for k in known if name(k) == name(op) and k != op]
    alike = [k for k in known if k not in same and difflib.SequenceMatcher(None, name(op), name(k)).ratio() >= 0.75]
    return (same + alike)[:3]


def find(root: Path, op: str) -> Operator:
    """The operator's kernels: by the name it was accepted under, or by any overload its current
    kernel serves (``aten.relu_.default`` finds relu's kernel)."""
    everything, wrecks = catalogue(root)
    for entry in everything:
        if entry.op == op:
            return entry
    for entry in everything:
        if op in (entry.current.meta.serves or []):
            return entry
    for wreck in wrecks:
        if wreck.folder.name == op:
            raise ReviewError(f"{op}'s kernel folder {wreck.folder} is broken: {wreck.reason}")
    known = [e.op for e in everything]
    close = close_names(op, known)
    hint = f"; did you mean {', '.join(close)}?" if close else (
        f"; the kernels here are for {', '.join(known[:8])}{' ...' if len(known) > 8 else ''} (bbagent review list)"
        if known else ": none is accepted yet (bbagent generate / batch)")
    raise ReviewError(f"no accepted kernel for {op} under {Path(root) / 'generated_kernels'}{hint}"
                      + last_failure(Path(root), op))


def last_failure(root: Path, op: str) -> str:
    """Why the newest run for ``op`` under ``root/runs`` found no kernel, as a sentence to append
    (empty when there is no such run)."""
    runs = sorted((root / "runs").glob(f"*-{op}-*/run.json"), reverse=True)
    for path in runs:
        record = read_run(path.parent)
        if record is None:
            continue
        if record.status in ("failed", "stopped", "error"):
            return f". Its last run, {path.parent.name}, {record.status}: {record.message or '?'}"
        return ""
    return ""


def flags(meta: KernelMeta) -> list[str]:
    """What a reviewer should look at twice, in words."""
    found = []
    speedup = meta.performance.geomean_speedup
    if speedup is not None and speedup > SUSPICIOUS_SPEEDUP:
        found.append(f"speedup {speedup:.3g}x over eager is above {SUSPICIOUS_SPEEDUP:g}x: check that it does "
                     "all the work (a shape or dtype the tests missed?)")
    used = meta.tolerance_used_max
    if used is not None and used >= NEAR_TOLERANCE:
        found.append(f"a passing result used {used:.0%} of the dtype tolerance" + (
            " (it passed only against the float64 run)" if used > 1 else ""))
    for finding in meta.earlier_guard_findings:
        found.append(f"guard finding in round {finding.round}: {finding.message[:160]}")
    speeds = meta.overload_speeds()
    for op, speed in sorted(speeds.items()):
        if speed < 1.0:
            found.append(f"{op} is served at {speed:.3g}x eager (slower): enable() leaves it to aten unless "
                         "include_slower=True")
    unmeasured = [op for op in meta.serves if op not in speeds]
    if unmeasured and speedup is not None:
        found.append(f"not timed as served: {', '.join(unmeasured)} (bbagent bench --op OVERLOAD)")
    return found


def version_flags(version: KernelVersion) -> list[str]:
    """``flags`` of a version's meta.json, after why it may not be served where it may not."""
    return ([version.unusable] if version.unusable else []) + flags(version.meta)


def row(entry: Operator) -> dict:
    """One line of ``bbagent review list`` (its ``--json`` row)."""
    current = entry.current
    meta = current.meta
    served = entry.served()
    return {"op": entry.op, "family": family_of(meta.written_for), "version": current.number,
            "status": current.status, "review": meta.review.model_dump(), "changes": changes(meta),
            "tests_passed": meta.tests.passed if meta.tests else None,
            "tests_total": meta.tests.total if meta.tests else None,
            "tests": meta.tests.model_dump() if meta.tests else {},
            "geomean_speedup": meta.performance.geomean_speedup, "cost_usd": meta.cost_usd, "cost_complete": meta.cost_complete,
            "answers_paid_by": meta.answers_paid_by, "rounds": meta.rounds_used, "model": meta.model, "run_id": meta.run_id, "flags": version_flags(current),
            "served_version": served.number if served else None, "versions": len(entry.versions),
            "dir": str(current.folder)}


SORT_KEYS = ("op", "status", "speedup", "cost", "tests", "rounds", "version")


def listing(root: Path, status: str | None = None, family: str | None = None, sort: str = "op") -> list[dict]:
    if status is not None and status not in SHOWN_STATUSES:
        raise ReviewError(f"--status takes one of {', '.join(SHOWN_STATUSES)} (got '{status}')")
    if sort not in SORT_KEYS:
        raise ReviewError(f"--sort takes one of {', '.join(SORT_KEYS)} (got '{sort}')")
    kernels, wrecks = catalogue(root)
    rows = [row(e) for e in kernels] + [b.row() for b in wrecks]
    rows = [r for r in rows if (status is None or r["status"] == status) and (family is None or r["family"] == family)]
    numeric = {"speedup": "geomean_speedup", "cost": "cost_usd", "tests": "tests_passed", "rounds": "rounds",
               "version": "version"}
    if sort in numeric:  # numbers sort as numbers, largest first; missing values last
        key = numeric[sort]
        return sorted(rows, key=lambda r: (r[key] is None, -(r[key] or 0) if r[key] is not None else 0, r["op"]))
    return sorted(rows, key=lambda r: (r[sort], r["op"]))


def shown(root: Path, op: str, number: int | None = None) -> dict:
    """Everything a reviewer reads about one version of ``op``'s kernel (``bbagent review show``);
    ``unjudged`` says why no Verdict covers its kernel.py where it changed since its tests (its
    tests and speed, in ``meta``, are then another file's)."""
    entry = find(root, op)
    chosen = entry.version(number)
    meta = chosen.meta
    transcript = Path(root) / "runs" / str(meta.run_id)
    served = entry.served()
    try:
        source = chosen.kernel.read_text()
    except OSError as exc:
        source = f"# {chosen.kernel} cannot be read: {_first_line(exc)}\n"
    try:
        tuned = configs_beside(chosen.kernel)
    except (OSError, UnicodeDecodeError) as exc:
        tuned = f"{chosen.folder / CONFIGS_FILE} cannot be read: {_first_line(exc)}"
    return {"op": op, "version": chosen.number, "current": chosen.current, "status": chosen.status,
            "helion_configs": tuned,
            "changes": changes(meta), "flags": version_flags(chosen), "meta": meta.as_json(),
            "unjudged": unjudged(chosen.folder, meta),
            "dir": str(chosen.folder), "kernel_source": source, "transcript": str(transcript) if transcript.is_dir() else None,
            "versions": [{"version": v.number, "status": v.status, "run_id": v.meta.run_id, "dir": str(v.folder)}
                         for v in entry.versions],
            "served_version": served.number if served else None}


@dataclass
class Decision:
    """What a review decision did: the version decided (for an approved edit, the new version that
    records it), the Verdict of a file judged first, and why nothing was approved where it failed."""
    version: KernelVersion
    judged: Verdict | None = None
    refused: str | None = None


JUDGED_FILE = "review-verdict.json"  # beside the kernel.py a review decision judged


def decide(root: Path, op: str, status: str, note: str = "", version: int | None = None,
           judge: Callable[[KernelVersion], Verdict] | None = None,
           judging: Callable[[KernelVersion, str], None] = lambda version, why: None) -> Decision:
    """``approve`` / ``reject`` one version (default: the current one) of ``op``'s kernel. An
    approval covers what was judged: a current kernel.py changed since its tests judged it is judged
    first (``judge``, told first through ``judging(version, why)``), and approved only if it passes,
    as a new version recording that Verdict (``lifecycle.install_edit``); where it fails, nothing
    changes but the Verdict kept beside it (``JUDGED_FILE``) and ``Decision.refused`` says why."""
    if status == "rejected" and not note.strip():
        raise ReviewError("reject needs --note: say why, for whoever writes the next kernel")
    chosen = find(root, op).version(version)
    edited = unjudged(chosen.folder, chosen.meta) if status == "approved" else None
    if edited is None:
        meta = set_status(chosen.folder, status, note)
        return Decision(KernelVersion(chosen.folder, meta, chosen.current))
    if not chosen.current:
        raise ReviewError(f"{edited}. Only the current version is judged as an edit: bring the change into "
                          f"{find(root, op).current.kernel} instead, or restore this file")
    if judge is None:
        raise ReviewError(edited)
    judging(chosen, edited)
    edit = judge_edit(root, chosen, judge, JUDGED_FILE, reviewer())
    if edit.refused:
        return Decision(chosen, edit.verdict, refused=f"{edit.refused}; nothing was approved, version "
                                                      f"{chosen.number} is not served")
    s = edit.verdict.summary
    meta = set_status(chosen.folder, "approved", note or f"edited by hand; judged here: {s.passed}/{s.total} tests passed")
    return Decision(KernelVersion(chosen.folder, meta, True), edit.verdict)


@dataclass
class JudgedEdit:
    """A current kernel.py edited since its tests, judged: its Verdict, and the new version that
    records it (``meta``) or why there is none (``refused``)."""
    verdict: Verdict
    meta: KernelMeta | None = None
    refused: str | None = None


def judge_edit(root: Path, current: KernelVersion, judge: Callable[[KernelVersion], Verdict], verdict_file: str,
               by: str) -> JudgedEdit:
    """Judge the current version's kernel.py, edited since its tests (``judge``), keeping the Verdict
    beside it as ``verdict_file``; where it passes, record it as a new version with that Verdict
    (``lifecycle.install_edit``, needs review) whose folder keeps the Verdict too. The Helion configs
    beside it are read before and after: the table installed is the one ``judge`` pinned."""
    source, configs = current.kernel.read_bytes(), configs_beside(current.kernel)
    verdict = judge(current)
    edit = JudgedEdit(verdict)
    if verdict.kernel.sha256 != hashlib.sha256(source).hexdigest():
        edit.refused = f"{current.kernel} changed while it was judged: judge it again"
    elif configs_beside(current.kernel) != configs:
        edit.refused = (f"{current.kernel.with_name(CONFIGS_FILE)}, the Helion configs it runs, changed while it was "
                        "judged: judge it again")
    elif not verdict.passed:
        s = verdict.summary
        first = (verdict.message or "").strip().splitlines()[0][:300] if verdict.message else verdict.error_kind
        where = verdict.environment.gpu or "CPU (Triton interpreter)"
        edit.refused = (f"{current.kernel} was edited since its tests and fails them now on {where} ({s.failed} of "
                        f"{s.total} tests failed: {first}; the Verdict: {current.folder / verdict_file})")
    else:  # installing replaces the folder whole: the Verdict is written after it
        edit.meta = install_edit(root, current.meta, source.decode(), verdict, by,
                                 problem_text=current.kind.kept_text(current), configs=configs)
    write_atomic(current.folder / verdict_file, verdict.model_dump_json(indent=2) + "\n")
    return edit


def diff(root: Path, op: str, version: int | None = None, against: int | None = None) -> str:
    """A unified diff of a version's kernel (default: the current one) against ``against``, by
    default the approved version a reviewer last passed (the one ``enable()`` serves), else the
    version before it."""
    entry = find(root, op)
    new = entry.version(version)
    if against is not None:
        old = entry.version(against)
    else:
        older = [v for v in entry.versions if v.number < new.number]  # newest first
        approved = [v for v in older if v.status == "approved"]
        if not older:
            raise ReviewError(f"{op} version {new.number} is its first accepted kernel: nothing to diff against")
        old = (approved or older)[0]
    return version_diff(entry.op, old, new)


def version_diff(op: str, old: KernelVersion, new: KernelVersion) -> str:
    """A unified diff of ``new``'s kernel against ``old``'s, each named by its version and status."""
    return "".join(difflib.unified_diff(old.kernel.read_text().splitlines(keepends=True),
                                        new.kernel.read_text().splitlines(keepends=True),
                                        fromfile=f"{op} version {old.number} ({old.status})",
                                        tofile=f"{op} version {new.number} ({new.status})"))


def accepted(root: str | Path) -> list[dict]:
    """One entry per accepted kernel (``bbagent kernels --json``): its current meta.json, with the
    folder (``dir``) and the kernel file (``kernel``)."""
    kernels, wrecks = catalogue(root)
    return ([{**entry.current.meta.as_json(), "status": entry.current.status, "reason": entry.current.unusable,
              "dir": str(entry.current.folder), "kernel": str(entry.current.kernel)} for entry in kernels]
            + [b.row() for b in wrecks])


def written_for_beside(kernel: Path) -> str | None:
    """``written_for`` from the meta.json of an accepted kernel's folder, if the file sits in one."""
    try:
        return read_meta(kernel.parent).written_for
    except (OSError, ValueError):
        return None


def kernel_serving(root: str | Path, op: str) -> KernelVersion | None:
    """The current version of the accepted kernel that serves ``op``, or None."""
    return next((entry.current for entry in operators(root) if op in entry.current.meta.serves), None)
