"""kopf wiring: indexes hold parsed cluster state; event handlers hand bodies to the Controller.

No kopf finalizers, progress or diff-base annotations touch Workloads: only index and event handlers
are registered for them (kopf stores no state for either). A periodic sweep over the index of
workloads with a Pending entry re-drives anything an event missed (kopf does not retry event handlers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

import kopf

from sovereignspec.kube.pod_workloads import owner_pod, with_pod_metadata
from sovereignspec.model.cluster import WorkloadRef
from sovereignspec.operator.controller import Controller, finished, holding
from sovereignspec.operator.metrics import WATCH_EVENTS
from sovereignspec.operator.views import Views, index_values, read_views
from sovereignspec.policy.parse import (
    ParseError,
    parse_admission_check,
    parse_namespace,
    parse_node,
    parse_pod,
    parse_resource_flavor,
    parse_sovereignty_policy,
    parse_speculation_policy,
)
from sovereignspec.telemetry.annotations import draft_identity, pod_ref

log = logging.getLogger("sovereignspec.handlers")
T = TypeVar("T")

KUEUE = ("kueue.x-k8s.io", "v1beta2")
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
OURS = ("sovereignspec.io", "v1alpha1")


# Bound once: a labelled child per event would cost a dict lookup under a lock each time.
_EVENTS_NODES = WATCH_EVENTS.labels(resource="nodes")
_EVENTS_PODS = WATCH_EVENTS.labels(resource="pods")
_EVENTS_NAMESPACES = WATCH_EVENTS.labels(resource="namespaces")
_EVENTS_WORKLOADS = WATCH_EVENTS.labels(resource="workloads")
_EVENTS_DECISIONS = WATCH_EVENTS.labels(resource="speculationdecisions")


def _key(body: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) as the parsers spell it: a missing namespace reads "default"."""
    meta = body.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name"))


def _has_checks(body: Mapping[str, Any]) -> bool:
    """The Workload carries admission check entries: without any, no entry is ours to answer, and
    neither the drift sweep nor resync reads its body."""
    return bool((body.get("status") or {}).get("admissionChecks"))


def _has_pending(body: Mapping[str, Any]) -> bool:
    """Some admission check entry of the Workload is Pending (ours or another controller's: the
    controller filters by name)."""
    checks = (body.get("status") or {}).get("admissionChecks") or []
    return any(isinstance(c, Mapping) and c.get("state") == "Pending" for c in checks)


def acts_on_workload(type: str | None, body: Mapping[str, Any], **_: Any) -> bool:
    """A Workload event the controller's event handler acts on: a deletion, or a body with a check entry
    Pending. Every other event's bookkeeping (`Controller.answer_seen`) is done by the index handler,
    which kopf calls for each event anyway, so most of a workload's events skip kopf's handler
    invocation (kwargs with every index, contexts, loggers, outcome bookkeeping): 3-6 % of such an
    event's CPU in `make bench-floor` (docs/scale.md, "Session 43")."""
    return type == "DELETED" or _has_pending(body)


def _lean(body: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of a body to keep in an index, without metadata.managedFields: nothing reads
    them, and they were more than half of a held Workload's memory (25 -> 10 KB as Python objects)."""
    out = dict(body)
    meta = out.get("metadata")
    if isinstance(meta, Mapping) and "managedFields" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


def _safe(what: str, fn: Callable[[Mapping[str, Any]], T], body: Mapping[str, Any]) -> T | None:
    try:
        return fn(body)
    except (ParseError, ValueError) as exc:
        log.warning("ignoring unreadable %s %s: %s", what, (body.get("metadata") or {}).get("name"), exc)
        return None


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf deep-copies every watched body into a diff-base on every event, for change-detecting
    handlers (on.create/update/...). We register none, only indexes and event handlers, so the copy
    is pure overhead: it was half the operator's CPU under a burst of workloads (bench/scale_bench.py)."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def build_registry(ctrl: Controller) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.level = logging.ERROR  # our own Events only; kopf's log lines stay in logs
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.networking.request_timeout = 30
        settings.persistence.finalizer = "sovereignspec.io/unused"  # never added: no change handlers
        settings.persistence.diffbase_storage = NoDiffBase()
        settings.execution.max_workers = 8
        # Server-side: a finished pod holds no GPU and counts for no isolation (PodInfo.active), so the
        # API server leaves finished pods out of the watch; a pod that finishes arrives as DELETED.
        settings.watching.field_selectors["", "v1", "pods"] = POD_FIELD_SELECTOR

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_via_client(**kwargs)

    # ---- indexes: parsed once per change, read by every decision ----------------------------------
    # async: kopf runs sync handlers in its thread pool; a hop per watch event costs more than these
    # small parses (they never block).

    def unchanged(index: str, key: Any, value: T) -> T:
        """The value already indexed under `key` when equal to `value`: heartbeats and status updates
        that change nothing we keep leave the indexed object as it was, so the controller's snapshot
        (which compares by identity) stays valid."""
        live = ctrl.indexes
        if live is None or index not in live:
            return value
        for old in live[index].get(key, ()):
            if old == value:
                return cast(T, old)
        return value

    # kopf's `when` filters are plain calls before any handler is invoked: an event they refuse costs
    # no handler invocation (kwargs, contexts, loggers, outcome bookkeeping), which was about as much
    # as the index handler's own pass over the same event.

    def deleted(type: str | None, **_: Any) -> bool:
        return type == "DELETED"

    @kopf.index("", "v1", "nodes", registry=registry, id="ss_nodes")
    async def ss_nodes(name: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
        _EVENTS_NODES.inc()
        n = _safe("Node", parse_node, body)
        return {name: unchanged("ss_nodes", name, n)} if n is not None else {}

    @kopf.index("", "v1", "pods", registry=registry, id="ss_pods")
    async def ss_pods(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        _EVENTS_PODS.inc()
        p = _safe("Pod", parse_pod, body)
        if p is None or (p.node is None and p.gpu_request == 0):
            ctrl.mirror.put_pod(_key(body), None)
            return {}
        key = (p.namespace, p.name)
        value = unchanged("ss_pods", key, (p, pod_ref(body), draft_identity(body)))
        ctrl.mirror.put_pod(key, *value)
        return {key: value}

    @kopf.on.event("", "v1", "pods", registry=registry, when=deleted)
    async def on_pod(type: str | None, body: kopf.Body, **_: Any) -> None:
        if type == "DELETED":  # kopf calls no index handler for a deletion
            _EVENTS_PODS.inc()
            ctrl.mirror.put_pod(_key(body), None)

    @kopf.index("", "v1", "namespaces", registry=registry, id="ss_namespaces")
    async def ss_namespaces(name: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
        _EVENTS_NAMESPACES.inc()
        n = _safe("Namespace", parse_namespace, body)
        return {name: n} if n is not None else {}

    @kopf.index(*KUEUE, "resourceflavors", registry=registry, id="ss_flavors")
    async def ss_flavors(name: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
        f = _safe("ResourceFlavor", parse_resource_flavor, body)
        return {name: f} if f is not None else {}

    @kopf.index(*KUEUE, "admissionchecks", registry=registry, id="ss_checks")
    async def ss_checks(name: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
        c = _safe("AdmissionCheck", parse_admission_check, body)
        return {name: (c, dict(body))} if c is not None else {}

    @kopf.index(*OURS, "speculationpolicies", registry=registry, id="ss_spec_policies")
    async def ss_spec_policies(name: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
        try:
            return {name: parse_speculation_policy(body)}
        except (ParseError, ValueError) as exc:
            return {name: str(exc)}  # kept as the reason the AdmissionCheck is not Active

    @kopf.index(*OURS, "sovereigntypolicies", registry=registry, id="ss_sov_policies")
    async def ss_sov_policies(name: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
        p = _safe("SovereigntyPolicy", parse_sovereignty_policy, body)
        return {name: p} if p is not None else {}

    @kopf.index(*OURS, "speculationdecisions", registry=registry, id="ss_decisions")
    async def ss_decisions(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        # The mirror is the one place that holds decisions: it drops a Finished Workload's decision
        # once no pod runs under it, which an index value (replaced only on the decision's own events)
        # could not; the decision metrics read the mirror too.
        _EVENTS_DECISIONS.inc()
        ctrl.mirror.put_decision(_key(body), _lean(body))
        return {}

    @kopf.on.event(*OURS, "speculationdecisions", registry=registry, when=deleted)
    async def on_decision(type: str | None, body: kopf.Body, **_: Any) -> None:
        if type == "DELETED":
            _EVENTS_DECISIONS.inc()
            ctrl.mirror.put_decision(_key(body), None)

    @kopf.index(*KUEUE, "workloads", registry=registry, id="ss_workloads")
    async def ss_workloads(
        namespace: str | None, name: str, uid: str, body: kopf.Body, **_: Any
    ) -> dict[Any, Any]:
        _EVENTS_WORKLOADS.inc()
        ctrl.mirror.put_finished(_key(body), uid if finished(body) else None)
        if not _has_pending(body):
            ctrl.answer_seen(body)  # the event handler is not called for it (`acts_on_workload`)
        # Which workloads hold quota lives in the mirror; the index keeps their bodies (drift, resync)
        # when they have an admission check entry at all: a body without one is read by neither (a
        # Workload of a ClusterQueue without checks; an entry added later comes with a new event).
        if holding(body):
            ctrl.mirror.holding.put(
                _key(body), WorkloadRef(namespace=namespace or "default", name=name, uid=uid)
            )
            if _has_checks(body):
                return {("body", namespace, name): _lean(body)}
            return {}
        ctrl.mirror.holding.put(_key(body), None)
        return {}

    def views(idx: Mapping[str, Any], bodies: bool = False) -> Views:
        return read_views(idx, ctrl.mirror, bodies)

    def pending_body(idx: Mapping[str, Any], key: Any) -> dict[str, Any] | None:
        """The index's current body under `key` when it still has some check Pending (ours is
        filtered by the controller)."""
        for b in idx["ss_workloads"].get(key, ()):
            if _has_pending(b):
                return cast(dict[str, Any], b)
        return None

    # ---- AdmissionChecks: keep Active, react to policy changes -------------------------------------

    @kopf.on.event(*KUEUE, "admissionchecks", registry=registry)
    async def on_check(type: str | None, body: kopf.Body, **kw: Any) -> None:
        ctrl.indexes = kw
        if type == "DELETED":
            return
        await ctrl.reconcile_admission_check(dict(body), views(kw))

    @kopf.on.event(*OURS, "speculationpolicies", registry=registry)
    async def on_policy(**kw: Any) -> None:
        v = views(kw)
        for _, raw in index_values(kw["ss_checks"]):
            await ctrl.reconcile_admission_check(raw, v)

    # ---- Workloads ---------------------------------------------------------------------------------

    @kopf.on.event(*KUEUE, "workloads", registry=registry, when=acts_on_workload)
    async def on_workload(type: str | None, body: kopf.Body, uid: str, **kw: Any) -> None:
        ctrl.indexes = kw  # kopf indexes are live views: the background loops read them too
        if type == "DELETED":
            _EVENTS_WORKLOADS.inc()
            ctrl.mirror.holding.put(_key(body), None)
            ctrl.mirror.put_finished(_key(body), None)
            ctrl.forget(uid)
            return
        await ctrl.on_workload(with_owner_pod(dict(body), kw), lambda: views(kw), ctrl_checks(kw))

    def with_owner_pod(body: dict[str, Any], idx: Mapping[str, Any]) -> dict[str, Any]:
        """Pod-integration Workloads get their owning Pod's labels and annotations (see pod_workloads)."""
        key = owner_pod(body)
        if key is None:
            return body
        for pod, _, _ in idx["ss_pods"].get(key, ()):
            return with_pod_metadata(body, pod.labels, pod.annotations)
        return body

    def ctrl_checks(idx: Mapping[str, Any]) -> set[str]:
        return {
            c.name
            for c, _ in index_values(idx["ss_checks"])
            if c.controller_name == ctrl.settings.controller_name
        }

    # ---- background: resync sweep over the live indexes ------------------------------------------

    async def resync() -> None:
        """Re-drive Pending workloads: kopf never retries event handlers, and events can be missed."""
        idx = ctrl.indexes
        if idx is None:
            return
        for key in [k for k in idx["ss_workloads"] if k[0] == "body"]:
            # Re-read each body when its turn comes: a sweep over a long backlog outlives the bodies it
            # started from, and a stale Pending body seen after our answer landed was decided again
            # (the decision record rewritten, the entry write refused: the two disagreed).
            wl = pending_body(idx, key)
            if wl is None:
                continue
            try:
                await ctrl.on_workload(with_owner_pod(wl, idx), lambda: views(idx), ctrl_checks(idx))
            except kopf.TemporaryError as exc:
                log.info("resync: %s", exc)
            except Exception:  # a bug: it must not cost every workload behind this one its retry
                log.exception("resync: workload %s/%s not answered this round", key[1], key[2])

    ctrl.resync = resync
    ctrl.views_fn = lambda: views(ctrl.indexes, bodies=True) if ctrl.indexes is not None else Views()

    @kopf.on.startup(registry=registry)
    async def start_background(**_: Any) -> None:
        ctrl.start_background()
        ctrl.health.ready = True
        ctrl.health.reasons = []

    @kopf.on.cleanup(registry=registry)
    async def stop_background(**_: Any) -> None:
        await ctrl.close()

    return registry
