"""A batch's evaluations on a Ray cluster (``bbagent batch --executor ray``).

One ``EvaluationSupervisor`` actor per GPU per node holds that GPU for the whole batch and shares
it by phase exactly as the local executor shares one of its own: it holds a ``SharedGpu``
(``agent.batch.shared_gpu``), the same gate and NVML samples, and runs several evaluations at once
(threads of the actor, each a sandboxed child). The driver sees a supervisor as that many slots. An
operator's suite is built ahead (``prepare``) by a supervisor while the model writes its first
answer, and its evaluations then stay on that node while it has a slot in service, so that they
load it. The agent loops, the LLM calls, the keys, the rate limiter, the call log and the ledger
stay in this process (the driver): a candidate travels to a supervisor as its source text, its
Verdict comes back as data, and the reference-timing cache is read and written here only.

Ray's traps, handled: a GPU in Ray is bookkeeping, and Ray sets ``CUDA_VISIBLE_DEVICES=""`` in
workers that asked for no GPU, so each supervisor pins its sandbox to its GPU itself (Ray's
assignment with ``--ray-resource GPU``; its index on the node with a custom resource), before
anything imports torch, which caches the device count. A candidate's crash ends its own sandboxed
child, never the supervisor. A supervisor whose process dies is restarted by Ray; one whose node is
lost takes its in-flight evaluations with it, which run again on other slots (``SlotPool``), and
its slots are taken out. Every Verdict records the GPU model it ran on, and an operator's
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
from typing import Any

from bbagent.agent.batch.executor import Slot, SlotLost, SlotPool, gpu_rows
from bbagent.agent.batch.shared_gpu import MAX_PER_GPU
from bbagent.agent.errors import UsageError

INSTALL_HINT = "--executor ray needs Ray on this machine and on every node: pip install 'bbagent[ray]'"
DESCRIBE_TIMEOUT_S = 300.0  # a new supervisor's start (a worker process, imports) on a loaded node
REFRESH_EVERY_S = 30.0  # how often the driver looks for nodes that joined
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
RESTARTS = 3  # times Ray restarts a supervisor whose process died
FIGURES_TIMEOUT_S = 10.0
ONE_DEATH_S = 10.0  # a supervisor's in-flight evaluations all fail within this of its death


def import_ray():
    """The ``ray`` module; a ``UsageError`` naming the install command when it is missing."""
    try:
        import ray
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return ray


class EvaluationSupervisor:
    """Runs on a cluster node (as a Ray actor, see ``_supervisor_class``), holding one GPU (or one
    unit of a custom resource): evaluates what the driver sends, up to ``at_once`` at a time, as
    the local executor does on one of its GPUs."""

    def __init__(self, device: str, index: int | None, use_ray_gpu: bool, at_once: int | None = None,
                 gpus_on_node: int = 1, device_memory: int | None = None):
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
        from bbagent.agent.batch.shared_gpu import SharedGpu, evaluations_per_gpu
        at_once = at_once or evaluations_per_gpu(gpus_on_node)
        name = f"gpu-{self.physical}" if self.physical is not None else f"unit-{index}"
        self.gpu = SharedGpu(name, None if self.physical is None else 0, at_once, device_memory=device_memory)

    def describe(self) -> dict:
        import socket

        import torch
        from bbagent.agent.machine import gpu_model, harness_fingerprint, triton_version
        return {"host": socket.gethostname(), "pid": os.getpid(), "physical_gpu": self.physical,
                "gpu_model": "cpu" if self.device == "cpu" else gpu_model(self.physical),
                "torch": torch.__version__, "triton": triton_version(), "suite": harness_fingerprint(),
                "at_once": self.gpu.share.max_shared,
                "secret_env_names": sorted(name for name in os.environ if SECRET_NAME.search(name))}

    def evaluate(self, request: dict, file_name: str, source: bytes) -> dict:
        """The Verdict, as data, of the kernel's source under the request sent as data
        (``EvaluationRequest.to_wire``), evaluated on this node's GPU beside the others."""
        from bbagent.harness.interface import EvaluationRequest
        with tempfile.TemporaryDirectory(prefix="bbagent-ray-") as where:
            kernel = Path(where) / file_name
            kernel.write_bytes(source)
            verdict = self.gpu.evaluate(EvaluationRequest.from_wire(request, self.device), kernel)
        return verdict.model_dump(mode="json")

    def prepare(self, request: dict) -> str:
        """The request's suite built ahead on this node (``SharedGpu.prepare``)."""
        from bbagent.harness.interface import EvaluationRequest
        return self.gpu.prepare(EvaluationRequest.from_wire(request, self.device))

    def figures(self) -> dict:
        return self.gpu.figures()


class RaySlot(Slot[str]):
    """A slot of a supervisor (``gpu``: its key, ``<node id>/<GPU index>``) on a Ray node: the
    supervisor's actor, its node, and what it said of itself when it started."""

    def __init__(self, name: str, supervisor: str, model: str | None, actor, node_id: str, info: dict):
        super().__init__(name, supervisor, model)
        self.supervisor, self.actor, self.node_id, self.info = supervisor, actor, node_id, info


class RayExecutor(SlotPool[RaySlot]):
    """Slots are the supervisors of every live node's ``resource`` (``GPU``, or a custom resource
    a cluster declares with ``ray start --resources``), ``at_once`` slots each (default: as many as
    the node's cores and memory allow per GPU, as locally; ``device_memory``: the bytes each one
    admits evaluations against, instead of its GPU's, as a test simulates a GPU); nodes that join
    are picked up."""

    def __init__(self, device: str, address: str | None = None, resource: str = "GPU", at_once: int | None = None,
                 device_memory: int | None = None):
        self.ray = import_ray()
        self.device, self.resource = device, resource
        self.at_once, self.device_memory = at_once, device_memory
        self.model_of: dict[str, str] = {}  # op -> the GPU model its first evaluation ran on
        self.home: dict[str, str] = {}  # op, until the batch finished it -> the node its suite was built ahead on
        self.known: set[tuple[str, int]] = set()  # (node id, index) with a supervisor
        self.supervisors: dict[str, tuple[str, str, Any]] = {}  # its slots' key -> (name, node, actor)
        self.last_figures: dict[str, dict] = {}
        self.died_at: dict[str, float] = {}  # supervisor -> when its last death was first heard of
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
            units = int(node["Resources"].get(self.resource, 0))
            for index in range(units):
                if (node["NodeID"], index) in self.known:
                    continue
                self.known.add((node["NodeID"], index))
                placement = {"num_gpus": 1} if self.resource == "GPU" else {"resources": {self.resource: 1}}
                actor = Supervisor.options(
                    num_cpus=0, max_restarts=RESTARTS, max_task_retries=0, **placement,
                    max_concurrency=(self.at_once or MAX_PER_GPU) + 2,  # its evaluations, a prepare, the figures
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
                ).remote(self.device, index, self.resource == "GPU", self.at_once, units, self.device_memory)
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
            name = f"{where}/{'gpu' if self.device != 'cpu' else self.resource}-{gpu}"
            key = f"{node['NodeID']}/{index}"
            self.supervisors[key] = (name, where, actor)
            for n in range(info["at_once"]):
                self._add(RaySlot(name if info["at_once"] == 1 else f"{name}/{n}", key, info["gpu_model"], actor,
                                  node["NodeID"], info))

    def _no_slot_left(self) -> None:
        self._refresh()

    def _accepts(self, op: str):
        """An operator evaluated before stays on that GPU model while a slot of it is in service,
        and on the node its suite was built on while that node has a slot in service."""
        model, home = self.model_of.get(op), self.home.get(op)

        def accepts(slot: RaySlot) -> bool:
            if home is not None and slot.node_id != home and any(
                    s.node_id == home and not s.retired for s in self.slots):
                return False
            return model is None or slot.model == model or not any(
                s.model == model and not s.retired for s in self.slots)
        return accepts

    def _node_alive(self, node_id: str) -> bool:
        return any(n["NodeID"] == node_id and n.get("Alive") for n in self.ray.nodes())

    # --- one evaluation ------------------------------------------------------------------------

    def prepare(self, request) -> str:
        """The operator's suite built ahead on a slot's node (the build runs references on its
        GPU), where its evaluations then run; a failure here costs only the saving."""
        from ray.exceptions import RayError, RayTaskError
        if not request.problem.suite_ahead:  # a program's ahead work goes to a timing cache, which is the driver's
            return "not built (a program's torch.compile baseline is measured in its first timed evaluation on a node)"
        with self.condition:  # chosen and counted at once, so that prepares begun together spread
            slot = self._take(self._least_loaded(self._accepts(request.op)))
            self.home[request.op] = slot.node_id
        try:
            return self.ray.get(slot.actor.prepare.remote(request.to_wire(slot.info["torch"])))
        except RayTaskError as exc:  # its evaluations go there all the same, and build it then
            return f"not built ({type(exc.cause).__name__}: {str(exc.cause)[:200]})"
        except RayError as exc:
            return f"not built ({slot.name}: {type(exc).__name__})"
        finally:
            self._give(slot)

    def finished(self, op: str) -> None:
        """``op`` is no longer homed anywhere: a node that finished its operators takes new ones."""
        with self.condition:
            self.home.pop(op, None)

    def _least_loaded(self, accepts):
        """``accepts`` narrowed to the nodes with a free slot that are home to the fewest unfinished
        operators for their slots, so that the operators spread over the cluster; ``accepts`` itself
        where no slot is free now."""
        with self.condition:
            free = {s.node_id for s in self.free if not s.retired and accepts(s)}
            if not free:
                return accepts
            homes = list(self.home.values())
            load = {node: homes.count(node) / sum(1 for s in self.slots if s.node_id == node and not s.retired)
                    for node in free}
        lightest = min(load.values())
        return lambda slot: load.get(slot.node_id, lightest + 1) == lightest and accepts(slot)

    def _run_on(self, slot: RaySlot, request, kernel_path: Path):
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
            raise SlotLost(f"the supervisor died while evaluating {op}; Ray restarts it ({_death(exc)})",
                           counted=self._death_counted(slot.supervisor)) from None
        return self._received(request, kernel_path, verdict)

    def _death_counted(self, supervisor: str) -> bool:
        """Whether this supervisor's death was counted already: all the evaluations it ran at once
        end with it, within moments, and count as one failure of its GPU (three in a row take its
        slots out); a death after ONE_DEATH_S is another."""
        with self.condition:
            now = time.time()
            first = self.died_at.get(supervisor)
            if first is not None and now - first < ONE_DEATH_S:
                return True
            self.died_at[supervisor] = now
            return False

    def _received(self, request, kernel_path: Path, verdict: dict):
        """The supervisor's Verdict as this side's: its kernel path, the cache, this side's secrets."""
        from bbagent.harness.interface import adopt_remote_verdict
        result = adopt_remote_verdict(request, verdict, kernel_path)
        self.model_of.setdefault(request.op, result.environment.gpu or "unknown GPU")
        return result

    # --- what the slots and their GPUs did -----------------------------------------------------

    def gpus(self) -> list[dict]:
        """Per supervisor (a GPU of a node), as ``LocalExecutor.gpus``, with its node; a node lost
        keeps the figures it last gave."""
        from ray.exceptions import GetTimeoutError, RayError
        asked = {key: actor.figures.remote() for key, (_, _, actor) in self.supervisors.items()
                 if not all(s.retired for s in self.slots if s.gpu == key)}
        for key, pending in asked.items():
            try:
                self.last_figures[key] = self.ray.get(pending, timeout=FIGURES_TIMEOUT_S)
            except (RayError, GetTimeoutError):
                pass
        return gpu_rows(self.slots, self.started, {key: (name, {"node": node, **self.last_figures.get(key, {})})
                                                   for key, (name, node, _) in self.supervisors.items()})

    def gpu_label(self) -> str:
        return "cpu" if self.device == "cpu" else "+".join(sorted({s.model or "unknown GPU" for s in self.slots}))

    def close(self) -> None:
        for _, _, actor in self.supervisors.values():
            try:
                self.ray.kill(actor, no_restart=True)
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


def _death(exc: BaseException) -> str:
    """Why Ray says an actor died, in a line: its error's name and the first of Ray's sentences
    that name a cause (a signal, the memory monitor, an exit), which its message buries."""
    text = " ".join(str(exc).split())
    causes = [part.strip() for part in text.split(". ") if any(
        word in part.lower() for word in ("signal", "memory", "killed", "exit", "segmentation", "oom"))]
    return f"{type(exc).__name__}: {(causes[0] if causes else text)[:300]}"


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
