"""``bbagent``, the command line: ``main`` parses the arguments, runs the command
(``bbagent.cli.commands``) and turns every error into a message and an exit code.

Results go to stdout, diagnostics (progress, warnings, errors) to stderr. Exit codes: 0 success
(kernel accepted / verdict pass); 1 the kernel failed (every round failed / verdict fail); 2 usage
error (unknown op, missing file, bad option, unusable --root, no CUDA for --device cuda, OpInfo
unavailable); 3 provider error (missing or rejected key, retries exhausted); 70 internal error (a
bug in bbagent: the message names the file holding the traceback); 74 the machine refused (a full
disk or quota, an unwritable folder: the message names the path); 130 interrupted (Ctrl-C, or
SIGTERM, which every command takes as Ctrl-C: its temporary folders removed). No traceback
reaches a user; a closed stdout or stderr ends that output quietly, and the command runs on as it would have.

Imports are lazy: ``bbagent --help`` and ``--version`` never load torch. ``run`` (the console
script and ``python -m bbagent``) ends the process without the interpreter's teardown.
"""
from __future__ import annotations

import atexit
import json
import os
import sys

from bbagent import ProviderError, UsageError, version
from bbagent.agent.errors import refused_by_machine
from bbagent.cli.commands import (COMMANDS, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_MACHINE, EXIT_PROVIDER, EXIT_USAGE,
                                  sigterm_as_interrupt)
from bbagent.cli.parser import BadArguments, build_parser


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.markup import escape

    from bbagent.agent.reports.console import pipe_safe
    sys.stdout, sys.stderr = pipe_safe(sys.stdout), pipe_safe(sys.stderr)  # a reader gone changes nothing else
    raw = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(raw)
    except BadArguments as exc:  # as argparse says it (usage, then the error), and as JSON where --json was asked
        exc.parser.print_usage(sys.stderr)
        print(f"{exc.parser.prog}: error: {exc.message}", file=sys.stderr)
        _said_as_json("--json" in raw, "usage", exc.message, EXIT_USAGE)
        raise SystemExit(EXIT_USAGE) from None
    out = Console(file=sys.stdout, soft_wrap=True, highlight=False)
    err = Console(file=sys.stderr, soft_wrap=True, highlight=False)
    wants_json = bool(getattr(args, "json", False))
    try:
        with sigterm_as_interrupt():
            return COMMANDS[args.command](args, out, err)
    except (UsageError, ProviderError) as exc:  # a provider that cannot be used at all (no key): nothing started
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        kind, code = ("usage", EXIT_USAGE) if isinstance(exc, UsageError) else ("provider", EXIT_PROVIDER)
        return _said_as_json(wants_json, kind, str(exc), code)
    except KeyboardInterrupt as exc:
        err.print("interrupted")
        return _said_as_json(wants_json, "interrupted", str(exc) or "interrupted", EXIT_INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - a bug in bbagent: one line for the user, the traceback in a file
        if (refused := refused_by_machine(exc)) is not None:  # a full disk, a quota: not a bug
            err.print(f"[red]error:[/red] {escape(str(refused))}")
            return _said_as_json(wants_json, "machine", str(refused), EXIT_MACHINE)
        where = _save_traceback()
        err.print(f"[red]internal error:[/red] {type(exc).__name__}: {escape(str(exc))}\nThis is a bug in bbagent; the "
                  f"traceback is in {where}. Please report it with that file.")
        return _said_as_json(wants_json, "internal", f"{type(exc).__name__}: {exc} (traceback: {where})",
                             EXIT_INTERNAL)


def _said_as_json(wanted: bool, kind: str, message: str, code: int) -> int:
    """With ``--json``, the error as one JSON object on stdout too (a script reading stdout gets
    JSON, not nothing): ``{"error": {"kind", "message", "exit_code"}}``. Returns ``code``."""
    if wanted:
        print(json.dumps({"error": {"kind": kind, "message": message, "exit_code": code}}))
    return code


def run() -> int:
    """``main`` for the console script and ``python -m bbagent``: once it has returned, the process
    ends as usual (threads joined, every exit handler run, the standard streams flushed) but
    without tearing down the interpreter's modules, which takes a third of a second once torch is
    loaded. The handler is registered before any other (they run last registered first), so it
    runs after all of them."""
    atexit.register(_end_without_teardown)
    _returned.append(main())
    return _returned[-1]


_returned: list[int] = []  # main's exit code, once it returned


def _end_without_teardown() -> None:
    if not _returned:  # main did not return (an exception left it): the usual ending
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(_returned[-1] or 0)


def _save_traceback() -> str:
    from bbagent.agent.errors import save_traceback
    return save_traceback(header=f"bbagent {version()}")


if __name__ == "__main__":
    sys.exit(run())
