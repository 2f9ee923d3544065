"""Issue 80's must-show, as a new user meets it: from a fresh clone, the README's commands, then
each of the issue's repros (issue 64's are in its results), run as a shell runs them; every
command, the end of its output and its exit status go to one Markdown transcript.

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

    t.section("1. a disk that refuses writes", "A 6 KiB file-size limit (ulimit -f: what a full disk or a quota "
              "does to a write, anywhere), then a 200 KiB tmpfs where mounting is allowed.")
    t.run(f"(trap '' XFSZ; ulimit -f 6; bbagent generate --op {RELU} --provider replay --root limited-disk); "
          "echo \"bbagent exit $?\"", tail=3)
    t.run(f"mkdir -p full && mount -t tmpfs -o size=200k tmpfs full 2>/dev/null && {{ bbagent generate --op {RELU} "
          "--provider replay --root full 2>&1 | tail -2; echo \"bbagent exit ${PIPESTATUS[0]}\"; umount full; } "
          "|| echo 'no tmpfs here (not root)'")

    t.section("2. SIGTERM to eval, generate and check-model", "Each with a TMPDIR of its own, counted afterwards.")
    for name, line in (("eval", "bbagent eval --op aten.add.Tensor --kernel tests/kernels/add_broadcast.py"),
                       ("generate", f"bbagent generate --op {RELU} --provider replay --root sigterm"),
                       ("check-model", "bbagent check-model --model transformer --device cpu --set layers=1 "
                                       "--set activation=relu --include-unreviewed --compile default --root .")):
        t.run(f"mkdir -p tmp-{name}; TMPDIR=$PWD/tmp-{name} timeout --preserve-status -s TERM 6 {line} 2>&1 | tail -2; "
              f"echo \"bbagent exit ${{PIPESTATUS[0]}}\"; echo \"left in TMPDIR: $(ls tmp-{name} | grep -c "
              f"'^bbagent-\\(cand\\|pool\\)')\"")

    t.section("3. regions into a batch", "regions --script writes numbered problems; batch --kernelbench takes that "
              "folder (the fake model answers without code here: the point is that the batch takes the problems).")
    t.run("bbagent regions --script tests/models/relu_mlp.py --device cpu --root rg 2>&1 | tail -4")
    with FakeLLMServer().answer(*["I cannot write this."] * 20) as server:
        t.env = {**env, "OPENAI_API_KEY": "sk-fake"}
        t.run(f"bbagent batch --kernelbench rg/runs/*regions* --provider openai --model my-local-model --base-url "
              f"{server.url}/v1 --rounds 1 --device cpu --root rg 2>&1 | tail -5", timeout_s=900)
    t.env = env
    t.run("bbagent regions --script missing.py --root rg-missing; echo \"exit $?\"; ls rg-missing/runs")

    t.section("4-6, 9. a KernelBench batch on the CPU: the report, logs and the export",
              "Problem 1_ReLU answered right, then asked again with three candidates (right, wrong, no code).")
    t.run("mkdir -p kb/KernelBench/level1 && cp tests/problems/level1/1_ReLU.py kb/KernelBench/level1/")
    right = (clone / "tests" / "problems" / "answers" / "relu_right.py").read_text()
    wrong = (clone / "tests" / "problems" / "answers" / "relu_copy.py").read_text()
    fenced = [f"Here is ModelNew.\n\n```python\n{text}```\n" for text in (right, wrong)]
    with FakeLLMServer().answer_by_op({"`1_ReLU`": fenced[0]}) as server:
        t.env = {**env, "OPENAI_API_KEY": "sk-fake"}
        t.run(f"bbagent batch --kernelbench kb --provider openai --model my-local-model --base-url {server.url}/v1 "
              "--rounds 1 --device cpu --root kbroot 2>&1 | tail -3", timeout_s=900)
    with FakeLLMServer().answer(fenced[0], fenced[1], "No code today.") as server:
        t.env = {**env, "OPENAI_API_KEY": "sk-fake"}
        t.run(f"bbagent generate --problem kb/KernelBench/level1/1_ReLU.py --candidates 3 --rounds 1 --provider "
              f"openai --model my-local-model --base-url {server.url}/v1 --device cpu --root kbroot 2>&1 | tail -3")
    t.env = env
    t.run("grep -A6 'KernelBench problems by level' kbroot/runs/batch-*/summary.md | tail -2")
    t.run("bbagent report $(basename kbroot/runs/batch-*) --root kbroot --out kb.html >/dev/null; grep -o 'Ranked by tokens[^<]*' kb.html; "
          "grep -o '<td>level1</td>.*not timed</td>' kb.html | head -1")
    t.run("bbagent logs --root kbroot --run $(basename kbroot/runs/batch-*) -n 1")
    t.run("bbagent logs --root kbroot -q 'no code today' --json | grep -E '\"(id|op|response)\"'")
    t.run("bbagent logs --root kbroot --id 1 | head -8")
    t.run("bbagent export --kernelbench kb-out --samples first-round --root kbroot; ls kb-out/*; "
          "cat kb-out/bbagent-level1/pass_at_k_results.json | head -12")

    t.section("7. messages in their context")
    with FakeLLMServer().answer(fenced[0]) as server:
        t.env = {**env, "OPENAI_API_KEY": "sk-fake"}
        t.run(f"bbagent generate --problem tests/problems/level1/1_ReLU.py --provider openai --model m --base-url "
              f"{server.url}/v1 --device cpu --root messages 2>&1 | head -2")
    t.env = env
    t.run("bbagent review reject aten.cat.default --note x; bbagent review show aten.rel.default")
    t.run("bbagent runs --root kbroot | tail -3")

    t.section("8. roots and JSON")
    t.run(f"bbagent eval --op {RELU} --kernel tests/kernels/relu_triton.py --root new-root --json | head -3; "
          "ls new-root")
    t.run("bbagent logs --json -n x; echo \"exit $?\"")
    t.run("bbagent eval --op aten.relu.default --kernel nope.py --json 2>/dev/null; echo \"exit $?\"")

    print(f"transcript: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
