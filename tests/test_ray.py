"""`bbagent batch --executor ray` on a real two-node Ray cluster on this machine (Ray's own test
cluster utilities), its GPUs declared as the custom resource ``bbagent_gpu`` (no GPU here:
evaluations run under the Triton interpreter, each node's GPU memory simulated), the second node
killed alone, mid-batch; and a cluster with token authentication (``ray start``)."""
from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from bbagent.agent.batch.ledger import Ledger
from conftest import PYTHONPATH, ROOT, dies_with_parent

pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[dev]' (or '.[ray]') installs it")
pytestmark = pytest.mark.slow

KERNELS = {"aten.relu.default": "relu_triton.py", "aten.exp.default": "exp_imports_helpers.py",
           "aten.add.Tensor": "add_broadcast.py", "aten.index_select.default": "index_select.py"}
RESOURCE = "bbagent_gpu"
RAY = str(Path(sys.executable).parent / "ray")


def _answer(op: str) -> str:
    return f"Here it is.\n\n```python\n{(ROOT / 'tests' / 'kernels' / KERNELS[op]).read_text()}```\n"


def _free_port() -> int:
    """A port free now and below the ephemeral range (32768 and up on Linux), from which the OS hands
    out ports to bind(0) calls: another xdist worker's fake server cannot be given it between this
    check and Ray binding it."""
    for port in random.sample(range(20000, 32000), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


class Node:
    """``ray start --block`` in a process group of its own: stopping it kills that node alone."""

    def __init__(self, arguments: list[str], log: Path, extra_env: dict | None = None):
        env = {k: v for k, v in os.environ.items() if "KEY" not in k and not k.startswith("RAY_")}
        # Ray >= 2.5x turns on token authentication when ~/.ray/auth_token exists (any earlier local
        # ray.init() writes one): this test cluster is explicitly without, whatever the home holds.
        env.update(RAY_AUTH_MODE="disabled", RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="4",
                   RAY_health_check_initial_delay_ms="0", PYTHONPATH=PYTHONPATH)
        env.update(extra_env or {})
        self.log = log.open("w")
        self.process = subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats",
                                         "--num-gpus=0", f"--resources={json.dumps({RESOURCE: 1})}",
                                         "--object-store-memory=80000000", *arguments],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                        preexec_fn=lambda: dies_with_parent(signal.SIGTERM))  # --block stops the node

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)


@contextlib.contextmanager
def two_nodes(tmp_path: Path):
    """A head and a second node on this machine, each with one ``bbagent_gpu`` and a suite cache of
    its own (as two machines have), made with Ray's own test cluster utilities; yields (the
    cluster, the second node, the two suite caches). No secret-named variable reaches the nodes,
    and a node is found dead within about two seconds of its processes ending."""
    from ray.cluster_utils import Cluster
    caches = [tmp_path / "suites-head", tmp_path / "suites-second"]
    health = {"health_check_period_ms": 500, "health_check_failure_threshold": 4, "health_check_initial_delay_ms": 0}
    saved = dict(os.environ)
    os.environ.update(RAY_AUTH_MODE="disabled", PYTHONPATH=PYTHONPATH)
    for name in [n for n in os.environ if "KEY" in n]:
        del os.environ[name]
    cluster = None
    try:
        os.environ["BBAGENT_SUITE_CACHE"] = str(caches[0])  # the node's processes keep what they started with
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 2, "resources": {RESOURCE: 1}, "object_store_memory": 80_000_000,
            "include_dashboard": False, "_system_config": health})
        os.environ["BBAGENT_SUITE_CACHE"] = str(caches[1])
        second = cluster.add_node(num_cpus=2, resources={RESOURCE: 1}, object_store_memory=80_000_000)
        cluster.wait_for_nodes()
        os.environ.clear()
        os.environ.update(saved)
        yield cluster, second, caches
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if cluster is not None:
            cluster.shutdown()


def _ledger(result) -> dict:
    keep = ("state", "attempts", "infra_retries", "rounds", "error_class", "gpu", "error")
    return {r["op"]: {k: r[k] for k in keep} for r in Ledger(result.path / "ledger.sqlite").rows()}


def _kernels(root: Path) -> dict:
    return {p.parent.name: p.read_text() for p in (root / "generated_kernels").glob("*/kernel.py")}


def test_each_node_shares_its_gpu_by_memory_builds_suites_ahead_and_outlives_a_crash(tmp_path, monkeypatch, no_keys):
    """Issue 65: two nodes, each GPU simulated with 8 GiB and 3 evaluations allowed at once. Six
    operators whose first guesses need 3.0 to 3.6 GiB each: the memory, not the count, holds each
    node at 2 at once. Each operator's suite is built ahead on a node and its evaluation loads it
    there (each node has a suite cache of its own); a candidate that dies of SIGSEGV fails its own
    operator, and the others on its node pass. Figures per GPU and per node reach the summary."""
    from bbagent import batch
    from fake_llm import FakeLLMServer
    kernels = {"aten.relu.default": "tests/kernels/relu_triton.py", "aten.exp.default": "tests/kernels/exp_imports_helpers.py",
               "aten.index_select.default": "tests/kernels/index_select.py",
               "aten.sigmoid.default": "prompts/examples/elementwise_unary.py",
               "aten.empty_like.default": "tests/kernels/empty_like.py", "aten.neg.default": "tests/kernels/segfault.py"}
    answers = {op: f"Here.\n\n```python\n{(ROOT / path).read_text()}```\n" for op, path in kernels.items()}
    with two_nodes(tmp_path) as (cluster, _, caches):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-driver-only")
        with FakeLLMServer().answer_by_op(answers).latency(2.0) as server:
            result = batch(list(kernels), root=tmp_path / "root", jobs=6, provider="openai", model="gpt-test",
                           base_url=server.url + "/v1", rounds=1, device="cpu", timeout_s=300, executor="ray",
                           ray_address=cluster.address, ray_resource=RESOURCE, evals_per_gpu=3,
                           ray_device_memory_gib=8)
        import ray
        from bbagent.agent.batch.ray_executor import RayExecutor
        assert not ray.is_initialized()
        executor = RayExecutor("cpu", address=cluster.address, resource=RESOURCE)  # the supervisors' own view
        try:
            assert all(slot.info["secret_env_names"] == [] for slot in executor.slots)
        finally:
            executor.close()
    rows = _ledger(result)
    crashed = rows.pop("aten.neg.default")
    assert crashed["state"] == "failed" and crashed["error_class"] == "kernel", crashed
    assert all(r["state"] == "accepted" and r["attempts"] == 1 and r["infra_retries"] == 0 for r in rows.values()), rows
    root = tmp_path / "root"
    for op in kernels:
        [run] = [json.loads(p.read_text()) for p in (root / "runs").glob(f"*-{op}-*/run.json")]
        assert run["suite_ahead"]["outcome"] == "built", (op, run["suite_ahead"])
        [verdict] = [json.loads(p.read_text()) for p in (root / "runs").glob(f"*-{op}-*/round-1/verdict.json")]
        if op == "aten.neg.default":
            assert verdict["error_kind"] == "crash" or any(t["error_kind"] == "crash" for t in verdict["tests"])
        else:  # evaluated where its suite was built: the other node's cache never had it
            assert any(note.startswith("suite reused") for note in verdict["suite"]["notes"]), (op, verdict["suite"])
    assert all(any(cache.rglob("*.pt")) for cache in caches), "each node built some of the suites"
    summary = json.loads((result.path / "summary.json").read_text())["session"]
    gpus = summary["gpus"]
    assert len(gpus) == 2 and len({g["node"] for g in gpus}) == 2 and sum(g["evaluations"] for g in gpus) == 6
    for gpu in gpus:  # 3 allowed by count; 2 of 3.0-3.6 GiB fill the 7.2 GiB usable of 8
        assert gpu["at_once"] == 3 and gpu["most_at_once"] == 2 and gpu["memory_gib"] == 7.2, gpu
    assert len(summary["slots"]) == 6
    assert [node["evaluations"] for node in summary["nodes"]] == [3, 3]  # per node in summary.json too
    from bbagent.agent.batch.display import gpu_lines
    assert sum(line.startswith("node ") for line in gpu_lines(gpus)) == 2  # status, the live panel, the report
    text = (result.path / "summary.md").read_text()
    assert "### Nodes of session 1" in text and "2 of 3" in text


def test_a_node_killed_mid_batch_returns_its_work_and_the_other_finishes_it(tmp_path, monkeypatch, no_keys):
    """Issue 65: two nodes of two evaluations each; the second is killed while evaluating. Its
    evaluations run again on the head, nothing is charged or repeated, and its slots are out."""
    from bbagent import batch
    from fake_llm import FakeLLMServer
    ops = list(KERNELS)
    evaluating = threading.Event()

    def hear(event, data):
        if event == "run_evaluating":
            evaluating.set()

    with two_nodes(tmp_path) as (cluster, second, _):
        def kill_when_evaluating():
            evaluating.wait(timeout=300)
            time.sleep(3)  # every slot busy: each of the first candidates takes longer than this
            cluster.remove_node(second, allow_graceful=False)
        killer = threading.Thread(target=kill_when_evaluating, daemon=True)
        killer.start()
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        with FakeLLMServer().answer_by_op({op: _answer(op) for op in ops}) as server:
            result = batch(ops, root=tmp_path, jobs=4, provider="openai", model="gpt-test",
                           base_url=server.url + "/v1", rounds=1, device="cpu", timeout_s=300, executor="ray",
                           ray_address=cluster.address, ray_resource=RESOURCE, evals_per_gpu=2, report=hear)
        killer.join(timeout=60)
        assert not killer.is_alive(), "the second node was never killed"
    import ray  # the batch left the cluster it joined: a driver left connected dies with the cluster
    assert not ray.is_initialized()
    rows = _ledger(result)
    assert all(r["state"] == "accepted" and r["attempts"] == 1 and r["infra_retries"] == 0 and r["rounds"] == 1
               for r in rows.values()), json.dumps(rows, indent=1)
    assert set(_kernels(tmp_path)) == set(ops)
    for op in ops:  # each operator ran once: one run, one round, one Verdict
        assert len(list((tmp_path / "runs").glob(f"*-{op}-*/round-1/verdict.json"))) == 1, op
    slots = json.loads((result.path / "summary.json").read_text())["session"]["slots"]
    lost = [s for s in slots if s["retired"]]
    assert len(lost) == 2 and all(s["retired"].startswith("node lost while evaluating") for s in lost), slots
    assert sum(s["lost"] for s in lost) >= 1, slots
    kept = [s for s in slots if not s["retired"]]
    assert len(kept) == 2 and sum(s["evaluations"] for s in kept) >= 3, slots
    assert "node lost while evaluating" in (result.path / "summary.md").read_text()


def test_a_cluster_with_token_authentication_gets_a_message_naming_the_fix(tmp_path):
    """Ray >= 2.5x clusters use token authentication by default; a driver joining by address sends
    the token only when told to. Without it: exit 2 and the fix named, and none of Ray's retry noise;
    with it: joined (the next complaint is the cluster's missing GPUs)."""
    token = os.urandom(16).hex()
    temp = tempfile.mkdtemp(prefix="bbray-")
    port = _free_port()
    head = Node(["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                 "--include-dashboard=false", f"--temp-dir={temp}"], tmp_path / "head.log",
                extra_env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
    try:
        deadline = time.time() + 120
        while time.time() < deadline and "Ray runtime started" not in (tmp_path / "head.log").read_text():
            time.sleep(0.5)
        command = [str(Path(sys.executable).parent / "bbagent"), "batch", "--ops", "aten.relu.default",
                   "--provider", "replay", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                   "--root", str(tmp_path / "root")]
        plain = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        refused = subprocess.run(command, capture_output=True, text=True, timeout=300, env=plain)
        assert refused.returncode == 2, refused.stderr
        assert "RAY_AUTH_MODE=token" in refused.stderr and "RAY_AUTH_TOKEN" in refused.stderr
        assert "Traceback" not in refused.stderr and "gcs_client" not in refused.stderr, refused.stderr
        joined = subprocess.run(command, capture_output=True, text=True, timeout=300,
                                env={**plain, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
        assert joined.returncode == 2 and "has no node with the resource 'GPU' free" in joined.stderr, joined.stderr
    finally:
        head.kill()
        shutil.rmtree(temp, ignore_errors=True)
