"""Which operators a batch runs: named (``--ops``, ``--ops-file``), a suite or prompt family
(``--suite``, ``--family``), or a published operator dataset (``--dataset``: the BackendBench
test-suite format, parquet or JSON); or which programs: a KernelBench checkout's problems
(``--kernelbench DIR --level 1,2 --problems 1-20``), each named by its key
(``kernelbench/level1/19_ReLU``) where an operator is named by its overload.

A selection is the operators in order, those skipped with the reason, and a dataset's inputs per
operator (``harness.suite.build`` adds them to the operator's trace tests). Overloads of one
variant family are asked for once: ``generate`` asks for the functional overload and serves the
in-place and ``out=`` ones from it, so a later member of the family is skipped, naming the first.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bbagent.agent.errors import SelectionError
from bbagent.harness.interface import (ProblemError, TraceFormatError, UnknownOpError, parse_call_line, problem_number,
                                       program_key, program_problem, resolve_op)

DATASET_FIELDS = ("uuid", "op_name", "args", "runnable", "included_in_benchmark", "why_excluded", "is_synthetic",
                  "runtime_ms", "relative_runtime_to_kernel_launch", "is_overhead_dominated_op", "count",
                  "in_models", "in_models_count")
REQUIRED_FIELDS = ("op_name", "args")


@dataclass
class Selection:
    ops: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # op -> why it does not run
    extra_traces: dict[str, list[dict]] = field(default_factory=dict)  # op -> [{"line", "timed"}]
    dataset: dict | None = None  # what a dataset gave: counts, skipped pairs with why_excluded
    programs: dict[str, str] = field(default_factory=dict)  # a program's key -> its problem file


def by_name(names: list[str]) -> Selection:
    names = list(dict.fromkeys(n.strip() for n in names if n and n.strip()))
    for name in names:
        try:
            resolve_op(name)
        except UnknownOpError as exc:
            raise SelectionError(str(exc)) from None
    return Selection(ops=names)


def read_ops_file(path: str | Path) -> list[str]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SelectionError(f"cannot read --ops-file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return [line.split("#", 1)[0].strip() for line in text.splitlines()]


def by_suite(suite: str, family: str | None, rows: list[dict]) -> Selection:
    """The testable overloads of ``suite`` (``bbagent ops`` rows), of prompt ``family`` if given;
    those without any test are skipped with the reason."""
    if family and not rows:
        raise SelectionError(f"no operator of family '{family}' in suite '{suite}' (see `bbagent ops --json`)")
    selection = Selection()
    for row in rows:
        if row["why_none"]:
            selection.skipped[row["op"]] = f"no tests: {row['why_none']}"
        else:
            selection.ops.append(row["op"])
    return selection


def one_per_family(selection: Selection, family_of) -> Selection:
    """Later members of a variant family are skipped: the first one's kernel serves them.
    ``family_of(op)`` is ``harness.variants.variant_family`` of the op (``functional``, ``serves``)."""
    asked: dict[str, str] = {}  # functional overload -> the op that asks for it
    kept = []
    for op in selection.ops:
        family = family_of(op)
        computation = family["functional"] or op
        if computation in asked:
            selection.skipped[op] = f"the kernel asked for {asked[computation]} serves it (same variant family)"
            continue
        asked[computation] = op
        kept.append(op)
    selection.ops = kept
    return selection


# --- KernelBench ------------------------------------------------------------------------------

def numbers_of(text: str | None, flag: str) -> set[int] | None:
    """``{1, 2, 3, 7}`` of ``"1-3,7"``; None for no text; a SelectionError naming ``flag`` otherwise."""
    if text is None:
        return None
    found: set[int] = set()
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise SelectionError(f"{flag} takes numbers and ranges, e.g. 1-20,25 (got '{text}')") from None
        if first < 0 or last < first:
            raise SelectionError(f"{flag}: '{part}' is no range of numbers from low to high")
        found.update(range(first, last + 1))
    if not found:
        raise SelectionError(f"{flag} names no number (got '{text}')")
    return found


def by_kernelbench(folder: str | Path, levels: str | None = None, problems: str | None = None) -> Selection:
    """The problems of a KernelBench checkout (``folder`` holds ``KernelBench/level<N>/``, or is
    that ``KernelBench`` folder), of ``levels`` and numbered ``problems`` (``"1-20,25"``; default:
    all), ordered by level and number; or of a folder of numbered problem files with no levels
    (``bbagent regions``' output: ``1_matmul_3f2a9c1b.py`` ...). A file that is no problem is
    skipped with why."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise SelectionError(f"--kernelbench {folder}: no such folder (pass a KernelBench checkout or a folder of "
                             "problem files)")
    base = folder / "KernelBench" if (folder / "KernelBench").is_dir() else folder
    found = {int(p.name[5:]): p for p in base.glob("level*") if p.is_dir() and p.name[5:].isdigit()}
    if not found:
        if not any(problem_number(p.stem) is not None for p in base.glob("*.py")):
            raise SelectionError(f"--kernelbench {folder}: no level<N> folders and no numbered problem files "
                                 f"(<n>_<name>.py) in {base} (a KernelBench checkout has KernelBench/level1/ ... "
                                 "level4/; bbagent regions writes numbered files)")
        if levels is not None:
            raise SelectionError(f"--level {levels}: {base} holds problem files, not level<N> folders; drop --level")
        return _numbered_problems([(None, base)], numbers_of(problems, "--problems"), folder, levels, problems)
    wanted_levels = numbers_of(levels, "--level") or set(found)
    missing = sorted(wanted_levels - set(found))
    if missing:
        raise SelectionError(f"--level {levels}: {base} has no level {', '.join(map(str, missing))} (it has "
                             f"{', '.join(map(str, sorted(found)))})")
    return _numbered_problems([(level, found[level]) for level in sorted(wanted_levels)],
                              numbers_of(problems, "--problems"), folder, levels, problems)


def _numbered_problems(folders: list[tuple[int | None, Path]], wanted: set[int] | None, folder: Path,
                       levels: str | None, problems: str | None) -> Selection:
    """The numbered problem files of ``folders`` (each with its level; None: a folder with no
    level), of ``wanted`` numbers (None: all), in order and by number."""
    selection = Selection()
    for level, where in folders:
        numbered = sorted((number, p.name, p) for p in where.glob("*.py")
                          if (number := problem_number(p.stem)) is not None)
        for number, _, path in numbered:
            if wanted is not None and number not in wanted:
                continue
            try:
                problem = program_problem(path)
            except ProblemError as exc:
                selection.skipped[program_key(level, path.stem)] = str(exc)
                continue
            selection.ops.append(problem.key)
            selection.programs[problem.key] = problem.path
    if not selection.ops and not selection.skipped:
        raise SelectionError(f"--kernelbench {folder}: no problem of level {levels or 'any'} numbered "
                             f"{problems or 'any'}")
    return selection


# --- datasets ---------------------------------------------------------------------------------

def read_dataset(path: str | Path) -> list[dict]:
    """The rows of a BackendBench-format dataset: ``.parquet`` (needs pyarrow) or ``.json`` (a list
    of row objects, or an object of equal-length column lists), each checked and brought to plain
    Python values (``agent.batch.selection.dataset_row``)."""
    path = Path(path)
    if not path.is_file():
        raise SelectionError(f"--dataset {path}: no such file")
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise SelectionError("reading a parquet dataset needs pyarrow: pip install 'bbagent[dataset]' "
                                 "(or pip install pyarrow), or pass the dataset as .json") from None
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds for a bad file
            raise SelectionError(f"--dataset {path} is not a readable parquet file: {exc}") from None
    elif path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SelectionError(f"--dataset {path} is not readable JSON: {exc}") from None
        if isinstance(data, dict) and all(isinstance(v, list) for v in data.values()):
            lengths = {len(v) for v in data.values()}
            if len(lengths) > 1:
                raise SelectionError(f"--dataset {path}: its columns have different lengths {sorted(lengths)}")
            data = [dict(zip(data, values)) for values in zip(*data.values())]
        if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
            raise SelectionError(f"--dataset {path}: expected a list of rows (objects) or an object of columns")
        rows = data
    else:
        raise SelectionError(f"--dataset {path}: expected a .parquet or .json file")
    checked = []
    for number, row in enumerate(rows):
        try:
            checked.append(dataset_row(row))
        except ValueError as exc:
            uuid = _plain(row.get("uuid"))
            raise SelectionError(f"--dataset {path}: row {number}{f' (uuid {uuid})' if uuid else ''} {exc} "
                                 f"(fields of the format: {', '.join(DATASET_FIELDS)})") from None
    return checked


FLAG_FIELDS = {"runnable": True, "included_in_benchmark": True, "is_synthetic": False,
               "is_overhead_dominated_op": False}  # and their value when a row leaves them out
TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes", "t", "y"), ("false", "0", "no", "f", "n", "")


def dataset_row(row: dict) -> dict:
    """One row as plain values: flags as booleans (``True``, ``"false"``, ``0``, numpy's bools all
    read), ``why_excluded`` as one text (the format writes a list of reasons), ``count`` as an int,
    list-like columns (numpy arrays, from pandas) as lists. Raises ValueError saying what is wrong."""
    row = {key: _plain(value) for key, value in row.items()}
    for name in REQUIRED_FIELDS:
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise ValueError(f"has no {name}")
    row["op_name"] = row["op_name"].strip()
    row["args"] = row["args"].strip().strip("'\"").strip()  # BackendBench strips quotes around the args too
    for name, default in FLAG_FIELDS.items():
        row[name] = _flag(row.get(name), name, default)
    reasons = row.get("why_excluded")
    if isinstance(reasons, (list, tuple)):
        reasons = "; ".join(str(r).strip() for r in reasons if r is not None and str(r).strip())
    row["why_excluded"] = str(reasons).strip() if reasons not in (None, "") else None
    count = row.get("count")
    try:
        row["count"] = 0 if count is None or count != count else int(count)  # None or NaN: not given
    except (TypeError, ValueError):
        raise ValueError(f"has a count that is not a number: {count!r}") from None
    return row


def _plain(value):
    """numpy scalars and arrays (a parquet read through pandas) as Python values and lists."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def _flag(value, name: str, default: bool) -> bool:
    if value is None or (isinstance(value, float) and value != value):
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise ValueError(f"has {name} = {value!r}, which is not true or false")


def by_dataset(rows: list[dict], include_synthetic: bool = False) -> Selection:
    """Operators with at least one usable (operator, inputs) pair, in the dataset's order. A pair
    not ``included_in_benchmark`` or not ``runnable`` is skipped and listed with ``why_excluded``;
    a synthetic pair only runs with ``include_synthetic``; an overhead-dominated pair runs as a
    correctness canary (tested, never timed); a pair whose arguments are not in the trace format
    is skipped and listed. A usable pair naming an operator this torch does not have stops the
    selection (``SelectionError``, with the rows' uuids): a misspelled name is the dataset's error."""
    selection = Selection()
    skipped_pairs: list = []
    per_op: dict = {}
    uuids: dict = {}
    for row in rows:
        op, args = row["op_name"], row["args"]
        pair = {"uuid": row.get("uuid"), "op": op, "args": args}
        if not row["included_in_benchmark"] or not row["runnable"]:
            reason = row["why_excluded"] or ("not runnable" if not row["runnable"] else "not included in the benchmark")
            skipped_pairs.append({**pair, "why": reason})
            continue
        if row["is_synthetic"] and not include_synthetic:
            skipped_pairs.append({**pair, "why": "synthetic inputs (--include-synthetic to run them)"})
            continue
        line = f"cnt: {row['count']}, {args}"
        try:
            parse_call_line(op, line)
        except TraceFormatError as exc:
            skipped_pairs.append({**pair, "why": f"arguments bbagent cannot read: {exc}"})
            continue
        timed = not row["is_overhead_dominated_op"]
        per_op.setdefault(op, []).append({"line": line, "timed": timed})
        uuids.setdefault(op, []).append(row.get("uuid"))
    unknown = []
    for op in per_op:
        try:
            resolve_op(op)
        except UnknownOpError as exc:
            unknown.append(f"{exc} (rows {', '.join(str(u) for u in uuids[op][:5])}"
                           f"{f' and {len(uuids[op]) - 5} more' if len(uuids[op]) > 5 else ''})")
    if unknown:  # a misspelled name would otherwise drop its rows without a word
        raise SelectionError("the dataset names operators this torch does not have: " + "; ".join(unknown)
                             + ". Correct the op_name of those rows, or mark them included_in_benchmark = false")
    selection.ops = list(per_op)
    selection.extra_traces = {op: per_op[op] for op in selection.ops}
    for op in dict.fromkeys(p["op"] for p in skipped_pairs):
        if op not in per_op and op not in selection.skipped:
            reasons = sorted({p["why"] for p in skipped_pairs if p["op"] == op})
            selection.skipped[op] = "every input excluded: " + "; ".join(reasons)
    selection.dataset = {
        "rows": len(rows), "ops": len(selection.ops),
        "pairs_used": sum(len(v) for v in selection.extra_traces.values()),
        "canaries": sum(1 for v in selection.extra_traces.values() for e in v if not e["timed"]),
        "skipped_pairs": skipped_pairs}
    return selection


def dataset_inputs_run(run_dir: Path) -> dict | None:
    """How many of a dataset's inputs the run's last evaluation ran as tests, and those it did not
    with why (the CPU interpreter's caps, for one), from its Verdict; None where it has none."""
    verdicts = sorted(Path(run_dir).glob("round-*/**/verdict.json"), key=lambda p: p.stat().st_mtime)
    if not verdicts:
        return None
    verdict = json.loads(verdicts[-1].read_text())
    def given(record: dict) -> str:  # an out= test describes its input with " out=<...>" after it
        return (record.get("input") or record["id"]).split(" out=")[0]
    # an input is counted once, though a family's kernel runs it as each overload (in-place, out=)
    ran = {given(test) for test in verdict.get("tests") or [] if "dataset-" in test.get("id", "")}
    not_run: dict[str, list[str]] = {}
    for skip in verdict.get("skipped") or []:
        given_input = given(skip)
        listed = {i for inputs in not_run.values() for i in inputs}
        if "dataset-" in skip.get("id", "") and given_input not in ran and given_input not in listed:
            not_run.setdefault(skip.get("reason") or "not run", []).append(given_input)
    return {"ran": len(ran), "not_run": sum(len(v) for v in not_run.values()),
            "why_not": "; ".join(f"{len(inputs)} {reason}: {', '.join(inputs[:3])}"
                                 f"{', ...' if len(inputs) > 3 else ''}" for reason, inputs in not_run.items())}
