"""What a killed bbagent leaves behind, found and removed (harness.workdirs), and the caches it keeps,
listed and cleared by `bbagent cache` (agent.caches): issue 47, point 11."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bbagent.harness import workdirs


def _ended_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_only_folders_of_ended_processes_are_orphans(tmp_path):
    dead = tmp_path / f"bbagent-cand-{_ended_pid()}-abc123"
    alive_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        alive = tmp_path / f"bbagent-suite-{alive_child.pid}-x1"
        mine = tmp_path / f"bbagent-ncu-log-{os.getpid()}-y2"
        old_form, fresh_old_form = tmp_path / "bbagent-cand-k2j4x9_a", tmp_path / "bbagent-baseline-q8w7e6r5"
        not_ours = [tmp_path / "bbagent-suites-0", tmp_path / "bbagent-triton-cache", tmp_path / "other-cand-1-x"]
        for folder in [dead, alive, mine, old_form, fresh_old_form, *not_ours]:
            folder.mkdir()
            (folder / "candidate.py").write_text("x" * 100)
        day_and_more = time.time() - workdirs.OLD_FORM_AGE_S - 60
        os.utime(old_form, (day_and_more, day_and_more))
        assert workdirs.orphaned(tmp_path) == sorted([dead, old_form])
        removed = workdirs.remove_orphaned(tmp_path)
        assert removed["folders"] == 2 and removed["bytes"] == 200
        assert not dead.exists() and not old_form.exists()
        assert all(p.exists() for p in [alive, mine, fresh_old_form, *not_ours])
    finally:
        alive_child.kill()
        alive_child.wait()
    made = workdirs.make("cand")
    try:
        assert made.name.startswith(f"bbagent-cand-{os.getpid()}-") and made not in workdirs.orphaned(made.parent)
    finally:
        made.rmdir()


def test_cache_lists_and_clears_through_the_console_script(tmp_path):
    temp, suites = tmp_path / "tmp", tmp_path / "suites"
    temp.mkdir()
    suites.mkdir()
    (suites / "abc.pt").write_bytes(b"0" * 2048)
    (temp / f"bbagent-cand-{_ended_pid()}-zz").mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "BBAGENT_SUITE_CACHE": str(suites),
           "TRITON_CACHE_DIR": str(tmp_path / "triton")}

    def cache(*args):
        done = subprocess.run([sys.executable, "-m", "bbagent", "cache", *args, "--root", str(tmp_path)], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout, done.stderr
    code, out, _ = cache("--json")
    listed = {c["name"]: c for c in json.loads(out)}
    assert code == 0 and listed["suites"]["entries"] == 1 and listed["suites"]["bytes"] == 2048
    assert listed["workdirs"]["entries"] == 1 and listed["triton"]["entries"] == 0
    code, out, _ = cache("clear", "suites", "workdirs", "--dry-run")
    assert code == 0 and "would remove suites: 1 entries" in out and (suites / "abc.pt").exists()
    code, out, _ = cache("clear", "suites", "workdirs")
    assert code == 0 and not (suites / "abc.pt").exists() and not list(temp.glob("bbagent-cand-*"))
    code, _, err = cache("clear")
    assert code == 2 and "cache clear needs what to clear" in err
    code, _, err = cache("clear", "everything")
    assert code == 2 and "unknown cache everything" in err
