"""A batch's evaluations on a Ray cluster (``bbagent batch --executor ray``).

One ``EvaluationSupervisor`` actor per GPU per node holds that GPU for the whole batch and runs the
same sandbox as the local executor there, one evaluation at a time. The agent loops, the LLM calls,
the keys, the rate limiter, the call log and the ledger stay in this process (the driver): a
candidate travels to a supervisor as its source text, its Verdict comes back as data, and the
reference-timing cache is read and written here only.

Ray's traps, handled: a GPU in Ray is bookkeeping, and Ray sets ``CUDA_VISIBLE_DEVICES=""`` in
workers that asked for no GPU, so each supervisor pins its sandbox to its GPU itself (Ray's
assignment with ``--ray-resource GPU``; its index on the node with a custom resource), before
anything imports torch, which caches the device count. A supervisor whose process dies is
restarted by Ray; one whose node is lost takes its in-flight evaluation with it, which runs again on
another slot (``SlotPool``). Every Verdict records the GPU model it ran on, and an operator's
evaluations stay on one GPU model while one is left, so that its speedups compare.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from bbagent.agent.batch.executor import Slot, SlotLost, SlotPool
from bbagent.agent.errors import UsageError

INSTALL_HINT = "--executor ray needs Ray on this machine and on every node: pip install 'bbagent[ray]'"
DESCRIBE_TIMEOUT_S = 300.0  # a new supervisor's start (a worker process, imports) on a loaded node
REFRESH_EVERY_S = 30.0  # how often the driver looks for nodes that joined
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
RESTARTS = 3  # times Ray restarts a supervisor whose process died


def import_ray():
    """The ``ray`` module; a ``UsageError`` naming the install command when it is missing."""
    try:
        import ray
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return ray


class EvaluationSupervisor:
    """Runs on a cluster node (as a Ray actor, see ``_supervisor_class``), holding one GPU (or one
    unit of a custom resource): evaluates what the driver sends, in the local sandbox."""

    def __init__(self, device: str, index: int | None, use_ray_gpu: bool):
        import ray
        self.device = device
        if device == "cpu":
            self.physical = None
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)  # Ray's "" would only confuse the interpreter's view
        else:
            ids = ray.get_runtime_context().get_accelerator_ids().get("GPU", []) if use_ray_gpu else [str(index)]
            if len(ids) != 1:
                raise RuntimeError(f"this supervisor was given GPUs {ids}, not one")
            self.physical = str(ids[0])
            os.environ["CUDA_VISIBLE_DEVICES"] = self.physical  # before torch is imported here

    def describe(self) -> dict:
        import socket

        import torch
        from bbagent.agent.machine import gpu_model, harness_fingerprint, triton_version
        return {"host": socket.gethostname(), "pid": os.getpid(), "physical_gpu": self.physical,
                "gpu_model": "cpu" if self.device == "cpu" else gpu_model(self.physical),
                "torch": torch.__version__, "triton": triton_version(), "suite": harness_fingerprint(),
                "secret_env_names": sorted(name for name in os.environ if SECRET_NAME.search(name))}

    def evaluate(self, request: dict, file_name: str, source: bytes) -> dict:
        """The Verdict, as data, of the kernel's source under the request sent as data
        (``EvaluationRequest.to_wire``), evaluated on this node's GPU."""
        from bbagent.harness.interface import EvaluationRequest, evaluate_kernel
        with tempfile.TemporaryDirectory(prefix="bbagent-ray-") as where:
            kernel = Path(where) / file_name
            kernel.write_bytes(source)
            verdict = evaluate_kernel(EvaluationRequest.from_wire(request, self.device), kernel,
                               gpu=0 if self.physical is not None else None)
        return verdict.model_dump(mode="json")


class RayExecutor(SlotPool):
    """Slots are the supervisors of every live node's ``resource`` (``GPU``, or a custom resource
    a cluster declares with ``ray start --resources``); nodes that join are picked up."""

    def __init__(self, device: str, address: str | None = None, resource: str = "GPU"):
        self.ray = import_ray()
        self.device, self.resource = device, resource
        self.model_of: dict[str, str] = {}  # op -> the GPU model its first evaluation ran on
        self.known: set[tuple[str, int]] = set()  # (node id, index) with a supervisor
        self.notes: list[str] = []  # what was seen of the cluster (mismatched or unreachable nodes)
        self.last_refresh = 0.0
        super().__init__([])
        self.owns_connection = _connect(self.ray, address)
        try:
            from bbagent.agent.machine import harness_fingerprint
            self.suite = harness_fingerprint()
            self._refresh()
            if not self.slots:
                declare = "" if resource == "GPU" else f" (declare it: ray start ... --resources '{{\"{resource}\": 2}}')"
                raise UsageError(f"the Ray cluster at {address or 'this machine'} has no node with the resource "
                                 f"'{resource}' free{declare}" + "".join(f"; {note}" for note in self.notes))
        except BaseException:
            self._disconnect()
            raise

    # --- the slots -----------------------------------------------------------------------------

    def _refresh(self) -> None:
        """A supervisor for every unit of the resource on every live node not yet served."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        self.last_refresh = time.time()
        Supervisor = _supervisor_class(self.ray)
        started = []
        for node in self.ray.nodes():
            if not node.get("Alive"):
                continue
            for index in range(int(node["Resources"].get(self.resource, 0))):
                if (node["NodeID"], index) in self.known:
                    continue
                self.known.add((node["NodeID"], index))
                placement = {"num_gpus": 1} if self.resource == "GPU" else {"resources": {self.resource: 1}}
                actor = Supervisor.options(
                    num_cpus=0, max_restarts=RESTARTS, max_task_retries=0, **placement,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
                ).remote(self.device, index, self.resource == "GPU")
                started.append((node, index, actor, actor.describe.remote()))
        for node, index, actor, described in started:
            where = f"{node['NodeManagerAddress']}/{node['NodeID'][:6]}"
            try:
                info = self.ray.get(described, timeout=DESCRIBE_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - a node that cannot host a supervisor is left out
                self.notes.append(f"{where}: no supervisor started ({type(exc).__name__}: {str(exc)[:300]})")
                self.ray.kill(actor, no_restart=True)
                continue
            if info["suite"] != self.suite:
                self.notes.append(f"{where}: its bbagent differs (harness {info['suite'][:12]}, here "
                                  f"{self.suite[:12]}); install the same bbagent on every node")
                self.ray.kill(actor, no_restart=True)
                continue
            gpu = info["physical_gpu"] if info["physical_gpu"] is not None else index
            slot = Slot(f"{where}/{'gpu' if self.device != 'cpu' else self.resource}-{gpu}", None, info["gpu_model"])
            slot.actor, slot.node_id, slot.info = actor, node["NodeID"], info
            self._add(slot)

    def _no_slot_left(self) -> None:
        self._refresh()

    def _accepts(self, op: str):
        """An operator evaluated before stays on that GPU model while a slot of it is in service."""
        model = self.model_of.get(op)

        def accepts(slot: Slot) -> bool:
            return model is None or slot.model == model or not any(
                s.model == model and not s.retired for s in self.slots)
        return accepts

    def _node_alive(self, node_id: str) -> bool:
        return any(n["NodeID"] == node_id and n.get("Alive") for n in self.ray.nodes())

    # --- one evaluation ------------------------------------------------------------------------

    def prepare(self, request) -> str:
        """Nothing ahead on a cluster: a node builds the suite in the operator's first evaluation."""
        return "not built (a Ray node builds the suite in the operator's first evaluation)"

    def _run_on(self, slot: Slot, request, kernel_path: Path):
        from ray.exceptions import RayError, RayTaskError
        from bbagent.harness.interface import KernelFileError
        op = request.op
        if time.time() - self.last_refresh > REFRESH_EVERY_S:
            self._refresh()
        kernel_path = Path(kernel_path)
        if not kernel_path.is_file():
            raise KernelFileError(f"kernel file not found: {kernel_path}")
        sent = request.to_wire(slot.info["torch"])
        try:
            verdict = self.ray.get(slot.actor.evaluate.remote(sent, kernel_path.name, kernel_path.read_bytes()))
        except RayTaskError as exc:  # the harness raised there: the same error here
            raise (exc.cause if isinstance(exc.cause, Exception) else exc) from None
        except RayError as exc:  # its process died (lost with its node, or restarted by Ray), or it is unplaceable
            if not self._node_alive(slot.node_id):
                raise SlotLost(f"node lost while evaluating {op} ({type(exc).__name__})", retire=True) from None
            raise SlotLost(f"the supervisor died while evaluating {op}; Ray restarts it") from None
        return self._received(request, kernel_path, verdict)

    def _received(self, request, kernel_path: Path, verdict: dict):
        """The supervisor's Verdict as this side's: its kernel path, the cache, this side's secrets."""
        from bbagent.harness.interface import adopt_remote_verdict
        result = adopt_remote_verdict(request, verdict, kernel_path)
        self.model_of.setdefault(request.op, result.environment.gpu or "unknown GPU")
        return result

    def gpu_label(self) -> str:
        return "cpu" if self.device == "cpu" else "+".join(sorted({s.model for s in self.slots}))

    def close(self) -> None:
        for slot in self.slots:
            try:
                self.ray.kill(slot.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - its node may be gone already
                pass
        self._disconnect()

    def _disconnect(self) -> None:
        """Leave the cluster if this executor joined it (or started it here). A driver left
        connected ends its whole process (exit 1) about a minute after the cluster goes away, which
        killed a Python caller that went on with other work."""
        if self.owns_connection:
            self.owns_connection = False
            self.ray.shutdown()


def _supervisor_class(ray):
    """The supervisor as a Ray actor class (made once Ray is imported)."""
    global _SUPERVISOR
    if _SUPERVISOR is None:
        _SUPERVISOR = ray.remote(EvaluationSupervisor)
    return _SUPERVISOR


_SUPERVISOR = None


def _connect(ray, address: str | None) -> bool:
    """Join the cluster at ``address`` (or RAY_ADDRESS), else start one on this machine; False when
    this process was connected already (its caller's connection, left as it is). A cluster started
    here is started without this process's secret-named variables (API keys), so that no worker
    process it spawns inherits them."""
    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS")
    if target:
        problem = _unreachable(target)
        if problem:  # ray.init would retry for minutes, printing as it goes
            raise UsageError(f"cannot join the Ray cluster at {target}: {problem}; start it with `ray start --head` "
                             "there, or pass its GCS address (host:port, as `ray start --head` prints it)")
        try:
            with _stderr_kept_unless_failing():
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(f"cannot join the Ray cluster at {target}: {_why(exc)}") from None
        return True
    hidden = {name: os.environ.pop(name) for name in list(os.environ) if SECRET_NAME.search(name)}
    try:
        ray.init(logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    finally:
        os.environ.update(hidden)
    return True


def _why(exc: BaseException) -> str:
    """What went wrong joining a cluster, in words a user can act on. Ray >= 2.5x clusters use token
    authentication by default, and a driver given an explicit address does not send the token unless
    RAY_AUTH_MODE=token is set, so the bare message ("Failed to connect") hides the fix."""
    cause: BaseException | None = exc
    while cause is not None:  # Ray wraps the AuthenticationError's traceback into a RuntimeError's text
        if "AuthenticationError" in f"{type(cause).__name__} {cause}":
            return ("the cluster wants an authentication token: set RAY_AUTH_MODE=token and give the cluster's "
                    "token in RAY_AUTH_TOKEN (or ~/.ray/auth_token); `ray get-auth-token` on the head prints it")
        cause = cause.__cause__ or cause.__context__
    return str(exc)


@contextlib.contextmanager
def _stderr_kept_unless_failing():
    """Ray's C++ client writes a warning per retry straight to file descriptor 2 while it fails to
    join (some 20 lines); hold them, and pass them on only if joining succeeds."""
    held = tempfile.TemporaryFile()
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(held.fileno(), 2)
    failed = True
    try:
        yield
        failed = False
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        if not failed:
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
        held.close()


def _unreachable(address: str) -> str | None:
    """Why nothing listens at a ``host:port`` cluster address, or None (also for other forms:
    ``auto``, ``ray://``, which Ray checks itself)."""
    import socket
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None
