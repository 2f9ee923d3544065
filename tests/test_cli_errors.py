"""Bad input, as users give it: every case ends with the exit code the README states, no
traceback, and a message on stderr that names the fix; results never go to stderr, diagnostics
never to stdout; a reader that closes the pipe early ends the output quietly."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bbagent.agent import judging
from bbagent.cli import main
from conftest import KERNELS

FAULTS = Path(__file__).parent / "faults"
RELU = str(KERNELS / "relu_triton.py")

# (argv, exit code, words on stderr)
BAD_INPUT = [
    (["eval", "--op", "aten.relu.default", "--kernel", RELU, "--device", "cuda"], 2, "use --device cpu"),
    (["eval", "--op", "aten.relu.default", "--kernel", RELU, "--timeout", "-1"], 2, "--timeout must be positive"),
    (["eval", "--op", "aten.relu.default", "--kernel", "nope.py"], 2, "nope.py: no such file"),
    (["eval", "--op", "aten.relu.defualt", "--kernel", RELU], 2, "did you mean: aten.relu.default"),
    (["eval", "--op", "aten.relu.default"], 2, "run 'bbagent generate --op aten.relu.default' first"),
    (["generate", "--op", "aten.relu.default", "--provider", "nonsense"], 2, "invalid choice: 'nonsense'"),
    (["generate", "--op", "aten.relu.default", "--provider", "openai"], 2, "--model is required with --provider openai"),
    (["generate", "--op", "aten.relu.default", "--provider", "replay", "--rounds", "0"], 2, "--rounds must be at least 1"),
    (["generate", "--op", "aten.relu.default", "--provider", "replay", "--max-cost-usd", "0"], 2,
     "--max-cost-usd must be positive"),
    (["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", "/proc/x"], 2, "pass --root DIR"),
    (["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", "{file}"], 2, "is a file, not a folder"),
    (["bench", "--op", "aten.relu.default", "--kernel", RELU, "--root", "/proc/x"], 2, "pass --root DIR"),
    (["bench", "--op", "aten.relu.default", "--kernel", RELU, "--max-shapes", "0"], 2, "--max-shapes must be at least 1"),
    (["generate", "--op", "aten.relu.default", "--provider", "replay", "--replay", "no-such-run"], 3,
     "replay source not found"),
    (["prompt", "--op", "aten.relu.default", "--round-feedback", "{file}"], 2, "is not a Verdict"),
    (["logs", "--op", "aten.relu.defualt"], 0, "did you mean: aten.relu.default"),
    (["logs", "--run", "no-such-run"], 0, "no call log at"),
    (["kernels", "--root", "/nonexistent"], 2, "--root /nonexistent does not exist"),
    (["review", "list", "--root", "/nonexistent"], 2, "--root /nonexistent does not exist"),  # issue 64, 8
    (["generate", "--op", "aten.relu.default", "--provider", "openai", "--model", "m", "--base-url", "notaurl"], 2,
     "--base-url must be an http:// or https:// URL"),
    (["generate", "--op", "aten.relu.default", "--provider", "replay", "--rounds", "99999999999999999999"], 2,
     "--rounds must be at most 1000"),
    (["prompt", "--op", "aten.add.Tensor", "--round-feedback", "{relu_verdict}"], 2,
     "is a Verdict of aten.relu.default, not of aten.add.Tensor"),
    (["ops", "zzzz"], 0, "no overload name contains 'zzzz'"),
    (["ops", "--family", "nonsense"], 0, "no prompt family 'nonsense'"),
    (["schema", "nonsense"], 2, "invalid choice: 'nonsense'"),
    (["batch", "--ops", "aten.relu.default", "--provider", "replay", "--evals-per-gpu", "0"], 2,
     "--evals-per-gpu must be at least 1"),
    (["batch", "--ops", "aten.relu.default", "--provider", "replay", "--evals-per-gpu", "2", "--device", "cpu"], 2,
     "this batch evaluates on the CPU"),
    (["batch", "--ops", "aten.relu.default", "--provider", "replay", "--retry-failed"], 2,
     "--retry-failed goes with --resume BATCH_ID"),
    (["batch", "--ops", "aten.relu.default", "--provider", "replay", "--ray-address", "10.0.0.5:6379"], 2,
     "--ray-address and --ray-resource go with --executor ray"),
    (["batch", "--ops", "aten.relu.default", "--provider", "replay", "--executor", "ray", "--gpus", "0"], 2,
     "--executor ray uses every GPU of the cluster"),
    (["batch", "--ops", "aten.relu.default", "--provider", "replay", "--executor", "ray", "--ray-address",
      "127.0.0.1:9"], 2, "cannot join the Ray cluster at 127.0.0.1:9"),
]


@pytest.mark.parametrize("argv, code, words", BAD_INPUT, ids=[" ".join(row[0][:3]) + f" -> {row[1]}" for row in BAD_INPUT])
def test_bad_input_gets_its_exit_code_and_the_fix_on_stderr(argv, code, words, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("{}")
    from conftest import make_verdict
    (tmp_path / "relu_verdict.json").write_text(make_verdict().model_dump_json())
    argv = [a.replace("{file}", str(tmp_path / "a_file")).replace("{relu_verdict}", str(tmp_path / "relu_verdict.json"))
            for a in argv]
    try:
        got = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        got = exc.code
    captured = capsys.readouterr()
    assert got == code, captured
    assert words in captured.err and "Traceback" not in captured.err + captured.out
    assert words not in captured.out


def test_opinfo_missing_is_a_usage_error_unless_allowed(monkeypatch, capsys):
    monkeypatch.setattr(judging, "why_no_opinfo", lambda: "ModuleNotFoundError: No module named 'expecttest'")
    assert main(["eval", "--op", "aten.relu.default", "--kernel", RELU]) == 2
    assert "pip install expecttest" in capsys.readouterr().err
    assert main(["eval", "--op", "aten.relu.default", "--kernel", RELU, "--allow-no-opinfo", "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["verdict"] == "pass"


def test_an_interpreter_that_cannot_run_loops_is_refused_on_the_cpu(monkeypatch, capsys):
    """Triton 3.6's interpreter with numpy 2.4 fails every loop over a run-time bound (checked with
    triton 3.5.1 and 3.6.0; 3.7.1 to 3.9.0 run it): the user is told the fix, no kernel is judged."""
    assert judging.why_no_interpreter({"triton": "3.6.0", "numpy": "2.5.2"}) is not None
    assert judging.why_no_interpreter({"triton": "3.5.1", "numpy": "2.4.0"}) is not None
    for fine in ({"triton": "3.6.0", "numpy": "2.3.5"}, {"triton": "3.7.1", "numpy": "2.4.6"},
                 {"triton": "3.9.0", "numpy": "2.5.2"}, {"triton": "3.10.0rc1", "numpy": "3.0.0"}):
        assert judging.why_no_interpreter(fine) is None, fine
    monkeypatch.setattr(judging, "why_no_interpreter", lambda: "Triton's interpreter (triton 3.6.0) cannot ...")
    assert main(["eval", "--op", "aten.relu.default", "--kernel", RELU, "--device", "cpu"]) == 2
    assert "Triton's interpreter (triton 3.6.0)" in capsys.readouterr().err


@pytest.mark.parametrize("kernel, words", [
    ("syntax_error.py", ["SyntaxError: expected ':'", "^"]),
    ("no_entry_point.py", ["defines no top-level 'kernel'"]),
])
def test_the_cause_of_a_failure_is_printed_without_json(kernel, words, capsys):
    assert main(["eval", "--op", "aten.relu.default", "--kernel", str(KERNELS / kernel)]) == 1
    out = capsys.readouterr().out
    assert all(w in out for w in words), out
    assert "frozen importlib" not in out


def _cli(*argv: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bbagent", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.parametrize("argv", [["ops", "--json"], ["ops"], ["--help"]])
def test_a_reader_closing_the_pipe_ends_the_output_quietly(argv):
    process = _cli(*argv)
    process.stdout.readline()
    process.stdout.close()  # the reader goes away, as `| head -1` does
    assert process.wait(timeout=120) == 0
    assert process.stderr.read() == ""


def test_generate_piped_into_head_records_the_run(tmp_path):
    """`bbagent generate ... | head -2`: the run completes and is recorded; the progress is on stderr."""
    process = _cli("generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(tmp_path))
    process.stdout.close()
    assert process.wait(timeout=300) == 0
    assert "Traceback" not in process.stderr.read()
    [run] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "accepted"


def test_help_does_not_import_torch():
    probe = subprocess.run([sys.executable, "-c", "import sys; from bbagent.cli import main\n"
                            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
                            "print('torch' in sys.modules, file=sys.stderr)"],
                           capture_output=True, text=True, timeout=60)
    assert probe.stderr.strip().endswith("False"), probe.stderr


def test_executor_ray_without_ray_says_how_to_install_it(tmp_path):
    hide_ray = ("import sys; sys.modules['ray'] = None; from bbagent.cli import main; "
                "sys.exit(main(['batch', '--ops', 'aten.relu.default', '--provider', 'replay', '--executor', 'ray', "
                f"'--root', {str(tmp_path)!r}]))")
    done = subprocess.run([sys.executable, "-c", hide_ray], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "pip install 'bbagent[ray]'" in done.stderr and "Traceback" not in done.stderr


def test_the_parsers_own_choices_agree_with_the_modules_they_stand_for():
    """The parser names providers, review statuses and sort keys itself (so that --help imports no
    torch); they must be the ones the code accepts."""
    from bbagent.agent.options import PROVIDERS, option_flags
    from bbagent.agent.review.catalog import SORT_KEYS
    from bbagent.agent.review.lifecycle import SHOWN_STATUSES
    from bbagent.cli import parser
    provider = next(f for f in option_flags() if f.field == "provider")  # generate's flags come from the options
    assert (tuple(provider.arguments["choices"]), parser.STATUSES, parser.SORT_KEYS) == (PROVIDERS, SHOWN_STATUSES,
                                                                                          SORT_KEYS)


def test_the_command_line_ends_after_every_exit_handler_without_the_teardown():
    """``run`` (the console script, ``python -m bbagent``): main's exit code, stdout and stderr
    complete, every exit handler run (those registered while main ran included), and no module
    teardown (an object that speaks when torn down stays silent)."""
    script = """if True:
        import atexit, sys
        import bbagent.cli as cli
        assert atexit._ncallbacks() == 0, "something registered an exit handler before run's own"
        class Teardown:
            def __del__(self):
                print("torn down", file=sys.stderr)
        kept = Teardown()
        real_main = cli.main
        def main():
            atexit.register(lambda: print("handler ran", file=sys.stderr))
            return real_main(["eval", "--op", "aten.relu.defualt", "--kernel", sys.argv[1]])
        cli.main = main
        print("x" * 100000, end="")  # buffered: must still arrive
        sys.exit(cli.run())
    """
    done = subprocess.run([sys.executable, "-c", script, RELU], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "x" * 100000
    assert "did you mean: aten.relu.default" in done.stderr and "handler ran" in done.stderr
    assert "torn down" not in done.stderr
    unchanged = subprocess.run([sys.executable, "-c", script.replace("sys.exit(cli.run())", "sys.exit(cli.main())"),
                                RELU], capture_output=True, text=True, timeout=120)
    assert "torn down" in unchanged.stderr  # the check above can see a teardown


def test_a_kernel_that_does_not_import_reads_no_test_ran(tmp_path):
    """Issue 47 (point 10): it read "FAIL 0/0 tests passed", as if the operator had no tests."""
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nimport no_such_module_here\n\n\ndef kernel(x):\n    return x\n")
    done = subprocess.run([sys.executable, "-m", "bbagent", "eval", "--op", "aten.relu.default", "--kernel", str(bad),
                           "--device", "cpu"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "FAIL no test ran" in done.stdout and "0/0" not in done.stdout and "import_error" in done.stdout


def test_generate_and_batch_flags_are_made_from_generate_options():
    """Issue 61: every GenerateOptions field has its flag on generate, prompt and batch, with the
    field's default in its help, and nothing read back from argparse's private parts: a flag not
    given is None (the field's default applies), so a batch's --resume tells what was given."""
    import argparse

    from bbagent.agent.api.cli.commands import _generate_options
    from bbagent.agent.options import GenerateOptions, flag_of, option_flags
    from bbagent.cli.parser import build_parser
    for batch, command in ((False, ["generate", "--op", "aten.relu.default"]), (True, ["batch"])):
        flags = {flag.field: flag for flag in option_flags(batch=batch)}
        assert set(flags) == set(GenerateOptions.model_fields)
        for field, flag in flags.items():
            default = GenerateOptions.model_fields[field].default
            if isinstance(default, bool):
                assert flag.name == (f"--no-{field.replace('_', '-')}" if default else flag_of(field, batch))
            elif default is not None and field != "replay":
                assert f"(default {default:g})" in flag.arguments["help"] if isinstance(default, float) \
                    else f"(default {default})" in flag.arguments["help"], (field, flag.arguments["help"])
        args = build_parser().parse_args(command)
        assert all(value is None for value in _generate_options(args).values())  # nothing given
        given = _generate_options(build_parser().parse_args(command + ["--rounds", "5", "--no-dispatch", "--timeout",
                                                                      "9"]))
        assert {k: v for k, v in given.items() if v is not None} == {"rounds": 5, "dispatch": False, "timeout_s": 9.0}
        assert GenerateOptions.of(**{**given, "provider": "replay"}).rounds == 5
    assert not hasattr(argparse.ArgumentParser, "_given")  # nothing of ours on argparse itself
    batch = _generate_options(build_parser().parse_args(["batch", "--max-cost-per-op", "2", "--max-cost-usd", "9"]))
    assert batch["max_cost_usd"] == 2.0  # each operator's budget; the batch's own is the plan's


def test_generate_options_built_directly_refuse_a_wrong_value_with_a_usage_error():
    """Issue 64, 8: docs/python-api.md promises ``UsageError`` for a wrong option, also where
    ``GenerateOptions`` is built directly, not through ``GenerateOptions.of``."""
    from bbagent import GenerateOptions, UsageError
    with pytest.raises(UsageError, match="--rounds must be at least 1"):
        GenerateOptions(provider="replay", rounds=0)
    with pytest.raises(UsageError, match="--rounds must be at most 1000"):
        GenerateOptions.of(provider="replay", rounds=10**20)
    assert GenerateOptions(provider="replay", rounds=3).rounds == 3


def test_every_wrong_option_is_named_at_once_not_one_per_attempt(capsys):
    """A user who got two options wrong learns of both from one try: before, the missing --model
    hid the wrong --rounds, to be found on the next run."""
    from bbagent import GenerateOptions, UsageError
    with pytest.raises(UsageError) as wrong:
        GenerateOptions(rounds=0, candidates=99, base_url="notaurl")
    message = str(wrong.value)
    for problem in ("--model is required with --provider openai", "--rounds must be at least 1 (got 0)",
                    "--candidates must be at most 64 (got 99)", "--base-url must be an http:// or https:// URL"):
        assert problem in message, message
    assert GenerateOptions(provider="replay").problems() == []
    assert main(["generate", "--op", "aten.relu.default", "--rounds", "0", "--timeout", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--model is required" in err and "--rounds must be at least 1" in err and "--timeout must be positive" in err
    assert "Traceback" not in err


def test_check_model_help_names_every_exit_code_and_a_file_that_exists(capsys):
    """Issue 64, 9: the help named agent/models.py before that file existed, and no exit 4."""
    import importlib.util
    import re
    with pytest.raises(SystemExit):
        main(["check-model", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "4 nothing served" in text and "2 usage error" in text
    named = re.findall(r"agent/[a-z_/]+\.py", text)
    assert named and all(importlib.util.find_spec("bbagent." + path[:-3].replace("/", ".")) for path in named), named


def test_generate_with_both_streams_into_a_pipe_closed_early_runs_as_it_would_have(tmp_path):
    """Issue 64, 3: `bbagent generate ... 2>&1 | head -1` exited 1 with an empty run folder: the
    progress on a closed stderr failed the run. Now the run is the same as without the pipe."""
    process = subprocess.Popen([sys.executable, "-m", "bbagent", "generate", "--op", "aten.relu.default", "--provider",
                                "replay", "--root", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    process.stdout.readline()
    process.stdout.close()  # `2>&1 | head -1`
    assert process.wait(timeout=300) == 0
    runs = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1 and json.loads((runs[0] / "run.json").read_text())["status"] == "accepted"
    assert (tmp_path / "generated_kernels" / "aten.relu.default" / "kernel.py").is_file()


def test_a_functional_kernel_failing_as_an_in_place_overload_is_told_about_kernel_for(capsys):
    """Issue 64, 8: eval --op aten.relu_.default with a functional kernel reported its failures and
    nothing of --kernel-for."""
    code = main(["eval", "--op", "aten.relu_.default", "--kernel", RELU, "--device", "cpu"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1 and "pass --kernel-for aten.relu.default" in err
