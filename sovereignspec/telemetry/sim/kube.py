"""Pods and GPU nodes from the API server: the simulator's source on the local cluster.

Nodes carrying `nvidia.com/gpu.product` (as GPU feature discovery labels them) are re-listed
periodically; pods are listed then watched. Pods bound to those nodes and requesting
`nvidia.com/gpu` become engines; time-slicing comes from the node label `nvidia.com/gpu.replicas`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from sovereignspec.telemetry.sim.scenario import NodeSpec, PodSpec, Scenario
from sovereignspec.telemetry.sim.simulator import TARGET_MODEL, Simulator

log = logging.getLogger(__name__)

PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_RESOURCE = "nvidia.com/gpu"
SIM_BASE_LOAD = "sovereignspec.io/sim-base-load"
SIM_NOISE = "sovereignspec.io/sim-noise"
SIM_REQUEST_RATE = "sovereignspec.io/sim-request-rate"
SIM_OUTPUT_TOKENS = "sovereignspec.io/sim-output-tokens"


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(str(v))
    except (TypeError, ValueError):
        return default


def _float(v: Any) -> float | None:
    try:
        return float(str(v))
    except (TypeError, ValueError):
        return None


def node_spec_from(node: Mapping[str, Any], scenario: Scenario) -> NodeSpec | None:
    """A GPU node as the simulator models it; the scenario's node of the same name supplies load knobs."""
    md = node.get("metadata") or {}
    labels: Mapping[str, str] = md.get("labels") or {}
    ann: Mapping[str, str] = md.get("annotations") or {}
    product = labels.get(PRODUCT_LABEL)
    name = md.get("name")
    if not product or not name:
        return None
    replicas = max(1, _int(labels.get(REPLICAS_LABEL), 1))
    capacity = _int(((node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE))
    count = _int(labels.get(COUNT_LABEL)) or capacity // replicas
    template = next((n for n in scenario.nodes if n.name == name), None)
    fields: dict[str, Any] = template.model_dump() if template else {}
    fields |= {"name": name, "product": product, "gpus": count, "time_slicing_replicas": replicas}
    base = _float(ann.get(SIM_BASE_LOAD))
    if base is not None:
        fields["base_load"] = base
    noise = _float(ann.get(SIM_NOISE))
    if noise is not None:
        fields["noise"] = noise
    try:
        return NodeSpec.model_validate(fields)
    except ValidationError as exc:
        log.warning("node %s ignored: %s", name, exc)
        return None


def pod_gpus(pod: Mapping[str, Any]) -> int:
    """GPUs the pod asks for: limits (what the device plugin honours), else requests."""
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        total += _int(
            (res.get("limits") or {}).get(GPU_RESOURCE) or (res.get("requests") or {}).get(GPU_RESOURCE)
        )
    return total


def pod_spec_from(pod: Mapping[str, Any], gpu_nodes: set[str]) -> PodSpec | None:
    """An engine for a live pod bound to a GPU node and requesting GPUs; else None."""
    md = pod.get("metadata") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    phase = (pod.get("status") or {}).get("phase")
    gpus = pod_gpus(pod)
    if not node or node not in gpu_nodes or phase in ("Succeeded", "Failed") or md.get("deletionTimestamp"):
        return None
    if gpus <= 0:
        return None
    ann: dict[str, str] = {k: str(v) for k, v in (md.get("annotations") or {}).items()}
    out_tokens = _int(ann.get(SIM_OUTPUT_TOKENS)) or None
    try:
        return PodSpec(
            namespace=md["namespace"],
            name=md["name"],
            node=node,
            gpus=gpus,
            model=ann.get(TARGET_MODEL) or None,
            request_rate=_float(ann.get(SIM_REQUEST_RATE)),
            output_tokens=out_tokens,
            annotations={k: v for k, v in ann.items() if k.startswith("sovereignspec.io/")},
        )
    except (KeyError, ValidationError) as exc:
        log.warning("pod %s/%s ignored: %s", md.get("namespace"), md.get("name"), exc)
        return None


class KubeSource:
    """Keeps the simulator's nodes and pods in step with the API server."""

    def __init__(
        self,
        sim: Simulator,
        kubeconfig: str | None = None,
        context: str | None = None,
        node_resync: float = 10.0,
    ) -> None:
        from kubernetes import client, config

        new_client: Any = config.new_client_from_config
        self.v1: Any = client.CoreV1Api(new_client(config_file=kubeconfig, context=context))
        self.sim = sim
        self.node_resync = node_resync
        self._stop = threading.Event()
        self._pods: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._gpu_nodes: set[str] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.synced = threading.Event()

    def start(self) -> KubeSource:
        self.sync_nodes()
        for target, name in ((self._nodes_loop, "sim-nodes"), (self._pods_loop, "sim-pods")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)

    def sync_nodes(self) -> None:
        resp = self.v1.list_node(label_selector=PRODUCT_LABEL, _preload_content=False)
        items = json.loads(resp.data)["items"]
        specs = [s for s in (node_spec_from(n, self.sim.scenario) for n in items) if s is not None]
        with self._lock:
            names = {s.name for s in specs}
            changed = names != self._gpu_nodes
            self._gpu_nodes = names
            self.sim.set_nodes(specs)
            if changed:
                self._resync_pods()

    def _resync_pods(self) -> None:
        specs = [s for s in (pod_spec_from(p, self._gpu_nodes) for p in self._pods.values()) if s is not None]
        self.sim.set_pods(specs)

    def _nodes_loop(self) -> None:
        while not self._stop.wait(self.node_resync):
            try:
                self.sync_nodes()
            except Exception as exc:
                log.warning("listing GPU nodes failed: %s", exc)

    def _pods_loop(self) -> None:
        from kubernetes import watch

        watch_cls: Any = watch.Watch
        while not self._stop.is_set():
            try:
                resp = self.v1.list_pod_for_all_namespaces(_preload_content=False)
                body = json.loads(resp.data)
                with self._lock:
                    self._pods = {
                        (p["metadata"]["namespace"], p["metadata"]["name"]): p for p in body["items"]
                    }
                    self._resync_pods()
                self.synced.set()
                rv = body["metadata"]["resourceVersion"]
                while not self._stop.is_set():
                    # A watch that ends at its timeout resumes where it stopped: re-listing every 30 s
                    # re-read every pod (thousands at scale) for nothing.
                    w = watch_cls()
                    for ev in w.stream(
                        self.v1.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=30
                    ):
                        if self._stop.is_set():
                            w.stop()
                            break
                        raw = ev.get("raw_object") or {}
                        self._event(ev.get("type", ""), raw)
                        rv = (raw.get("metadata") or {}).get("resourceVersion") or rv
            except Exception as exc:  # 410 Gone, connection loss: re-list
                log.warning("pod watch restarting: %s", exc)
                self._stop.wait(1.0)

    def _event(self, kind: str, pod: Mapping[str, Any]) -> None:
        if kind == "ERROR":
            raise RuntimeError(f"watch error: {pod.get('message', pod)}")
        md = pod.get("metadata") or {}
        key = (str(md.get("namespace")), str(md.get("name")))
        with self._lock:
            if kind == "DELETED":
                self._pods.pop(key, None)
                self.sim.remove_pod(key)
                return
            self._pods[key] = pod
            spec = pod_spec_from(pod, self._gpu_nodes)
            if spec is None:
                self.sim.remove_pod(key)
            else:
                self.sim.upsert_pod(spec)
