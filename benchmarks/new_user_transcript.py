"""Issue 64's must-show, as a new user meets it: from a fresh clone, the README's commands, then
each of the issue's repros, run as a shell runs them; every command, the end of its output and
its exit status go to one Markdown transcript.

    python benchmarks/new_user_transcript.py --clone ../fresh --out transcript.md

``--clone`` is made with ``git clone`` of this checkout when it does not exist, then set up with
``bash .ci/setup`` (the README's first command). The LLM is the real ``openai`` client against
``tests/fake_llm.py`` on 127.0.0.1. Nothing here decides pass or fail: the transcript is read.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
RELU = "aten.relu.default"
TAIL_LINES = 14


class Transcript:
    """Runs shell lines in one working folder and writes each as a Markdown block."""

    def __init__(self, out: Path, cwd: Path, env: dict[str, str]):
        self.out, self.cwd, self.env = out, cwd, env
        out.write_text("# A new user's morning, from a fresh clone\n\n")

    def section(self, title: str, why: str = "") -> None:
        with self.out.open("a") as f:
            f.write(f"\n## {title}\n\n{why + chr(10) + chr(10) if why else ''}")

    def run(self, line: str, timeout_s: float = 600, tail: int = TAIL_LINES) -> str:
        started = time.monotonic()
        try:
            done = subprocess.run(["bash", "-c", line], cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=timeout_s)  # in the order printed
            output, status = done.stdout, str(done.returncode)
        except subprocess.TimeoutExpired as exc:
            output, status = (exc.stdout or b"").decode(), f"timed out ({timeout_s} s)"
        lines = output.rstrip().splitlines()
        shown = lines if len(lines) <= tail else [f"... ({len(lines) - tail} lines above)", *lines[-tail:]]
        with self.out.open("a") as f:
            f.write(f"```\n$ {line}\n" + "\n".join(shown) + f"\n[exit {status}, {time.monotonic() - started:.1f} s]\n```\n")
        print(f"[exit {status}] {line}", file=sys.stderr)
        return output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clone", type=Path, required=True, help="a fresh clone (made if absent)")
    parser.add_argument("--out", type=Path, required=True, help="the Markdown transcript")
    args = parser.parse_args()
    clone = args.clone.resolve()
    if not clone.exists():
        subprocess.run(["git", "clone", "-q", str(CHECKOUT), str(clone)], check=True)
    sys.path.insert(0, str(clone / "tests"))
    from fake_llm import FakeLLMServer

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TRITON")}
    env["PATH"] = f"{clone / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    t = Transcript(args.out.resolve(), clone, env)
    t.section("The README's commands", "In the clone, as the README gives them.")
    t.run("bash .ci/setup > setup.log 2>&1; echo setup exit $?; tail -2 setup.log", timeout_s=1500)
    t.run(f"bbagent generate --op {RELU} --provider replay", tail=8)
    t.run(f"bbagent review show {RELU} | head -12")
    t.run(f"bbagent review approve {RELU}")
    t.run("bbagent report")
    t.run("python -c \"import bbagent, torch; k = bbagent.enable(device='cpu'); print(torch.relu(torch.randn(4))); "
          "print('served:', k.calls())\"")

    t.section("1. enable() with no arguments on a machine without CUDA")
    t.run("python -c \"import bbagent, torch; k = bbagent.enable(); torch.relu(torch.randn(3)); print(k.calls())\"")

    answers = [e["response"] for e in __import__("json").loads(
        (clone / "agent" / "providers" / "replays" / f"{RELU}.json").read_text())["exchanges"]]
    with FakeLLMServer().answer(*answers) as server:
        t.env = {**env, "OPENAI_API_KEY": "sk-fake"}
        base = (f"bbagent generate --op {RELU} --provider openai --model my-local-model --seed 5 --root priced "
                f"--base-url {server.url}/v1")
        t.section("2. answers from the call log of a model with no price",
                  "Round 1 is asked and paid; a second run takes it from the log (--cache) and asks round 2.")
        t.run(f"{base} --rounds 1", tail=3)
        t.run(f"{base} --rounds 3 --cache", tail=3)
        t.run("bbagent runs --root priced")
        t.run("bbagent review list --root priced")
        t.run("bbagent review list --root priced --json | grep -E 'cost|paid' ")

    t.env = env
    t.section("3. closing a pipe")
    t.run(f"bbagent generate --op {RELU} --provider replay --root piped 2>&1 | head -1; "
          "echo \"bbagent exit ${PIPESTATUS[0]}\"; bbagent runs --root piped")
    t.run(f"bbagent batch --ops {RELU} --provider replay --root piped-batch 2>&1 | head -2; "
          "echo \"bbagent exit ${PIPESTATUS[0]}\"; bbagent status --root piped-batch | head -12", timeout_s=900)

    t.section("4. Ctrl-C on a batch", "SIGINT at 8 s and 12 s, as the issue saw it.")
    for seconds in (8, 12):
        t.run(f"timeout -s INT {seconds} bbagent batch --ops {RELU},aten.sigmoid.default --provider replay "
              f"--root interrupted-{seconds} 2>&1 | tail -4; echo \"bbagent exit ${{PIPESTATUS[0]}}\"")

    t.section("5. LLM calls in flight at a kill -9, and retried 429s, in `logs`")
    with FakeLLMServer().answer(*answers * 4).latency(30) as server:
        t.env = {**env, "OPENAI_API_KEY": "sk-fake"}
        t.run(f"bbagent generate --op {RELU} --provider openai --model gpt-test --base-url {server.url}/v1 "
              "--root killed --candidates 4 > /dev/null 2>&1 & sleep 12; kill -9 $!; sleep 1; bbagent logs --root killed")
    with FakeLLMServer().rate_limit(2).answer(*answers) as server:
        t.run(f"bbagent generate --op {RELU} --provider openai --model gpt-test --base-url {server.url}/v1 "
              "--root limited --retries 5 2>&1 | tail -2; bbagent logs --root limited")
    t.env = env

    t.section("6. the report", "Words from each of the sections the issue missed, counted in the page.")
    t.run("bbagent report --root priced --out priced.html > /dev/null; for w in 'slowest' 'outcome' "
          "'not timed' 'paid by' '<details' 'diff'; do printf '%s: ' \"$w\"; grep -o \"$w\" priced.html | wc -l; done")

    t.section("7. `review show` in a narrow terminal keeps whole lines")
    t.run(f"COLUMNS=40 bbagent review show {RELU} | awk '{{ print length }}' | sort -n | tail -1 | "
          "xargs echo longest line:")

    t.section("8. bad values")
    t.run(f"OPENAI_API_KEY=sk-fake bbagent generate --op {RELU} --provider openai --model gpt-test --base-url notaurl")
    t.run(f"bbagent generate --op {RELU} --provider replay --rounds 99999999999999999999")
    t.run("bbagent review list --root /nonexistent")
    kernel = clone / "generated_kernels" / RELU / "kernel.py"
    t.run(f"bbagent eval --op aten.relu_.default --kernel {kernel} 2>&1 | grep -E 'kernel-for|tests passed'; "
          "echo \"bbagent exit ${PIPESTATUS[0]}\"")
    t.run("python -c 'import bbagent; bbagent.GenerateOptions(provider=\"replay\", rounds=0)' 2>&1 | tail -1")
    t.run("bbagent eval --op aten.exp.default --kernel tests/kernels/exp_fast.py --json > exp-verdict.json; "
          f"bbagent prompt --op {RELU} --round-feedback exp-verdict.json | tail -2")

    t.section("9. small ones")
    t.run("bbagent check-model --help | tail -8")
    t.run("bbagent kernels")
    alone = Path(f"/tmp/bbagent-no-shared-{os.getpid()}/checkout")  # a clone with no ../shared beside it
    t.run(f"git clone -q {clone} {alone} && cd {alone} && {clone}/.venv/bin/python -m pytest -q -p no:cacheprovider "
          "tests/test_dataset.py 2>&1 | grep -m3 -E 'shared|passed|failed'")
    print(f"transcript: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
