"""The controller's state and actions; kopf handlers (handlers.py) only translate events into calls.

Decisions are serialised by one asyncio lock: each decision sees the reservations of every decision
made before it, including those whose SpeculationDecision is written but not yet back in the kopf
index (`_inflight`). Writes happen outside the lock: SpeculationDecision first (the durable
reservation), then our admission-check entry by server-side apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import kopf
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sovereignspec.api.base import bounded
from sovereignspec.api.meta import wire_time
from sovereignspec.api.speculation_decision import (
    MESSAGE_CHARS,
    SpeculationDecision,
    SpeculationDecisionStatus,
)
from sovereignspec.api.speculation_policy import SpeculationPolicy
from sovereignspec.kube.ssa import (
    apply_admission_check_condition,
    apply_decision,
    apply_decision_conditions,
    apply_workload_check,
)
from sovereignspec.model.cluster import ClusterSnapshot, Reservation, same_items
from sovereignspec.model.telemetry import PodRef, TelemetrySnapshot
from sovereignspec.model.workload import CheckEntry, WorkloadInfo
from sovereignspec.operator.admission_checks import active_condition
from sovereignspec.operator.drift import (
    DRIFT,
    NEIGHBOUR_HARM,
    SweepPace,
    drift_condition,
    evaluate_drift,
    grace_over,
)
from sovereignspec.operator.health import HealthState
from sovereignspec.operator.logs import api_error
from sovereignspec.operator.metrics import (
    DECISION_DURATION,
    DECISION_ERRORS,
    DECISIONS,
    DRIFT_CHECKS,
    DRIFT_CPU,
    DRIFT_GAUGE,
    DRIFT_STAGES,
    SNAPSHOT_BUILDS,
)
from sovereignspec.operator.mirror import Mirror
from sovereignspec.operator.reservations import ReservationTable, reservation_of
from sovereignspec.operator.settings import OperatorSettings
from sovereignspec.operator.views import Views
from sovereignspec.policy.admission_check import entry_wire, set_admission_check_state
from sovereignspec.policy.cache.index import carry_index, index_of, with_reservations
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import Decision, check_entry, failed, speculation_decision_object
from sovereignspec.policy.parse import ParseError
from sovereignspec.policy.record import ReasonType
from sovereignspec.policy.request import RequestError, request_for
from sovereignspec.telemetry.annotations import DraftIdentity
from sovereignspec.telemetry.join import build_snapshot as telemetry_snapshot
from sovereignspec.telemetry.join import joined_refs
from sovereignspec.telemetry.metrics import default_metrics
from sovereignspec.telemetry.reader import PrometheusReader
from sovereignspec.telemetry.reading import TelemetryReading

log = logging.getLogger("sovereignspec.controller")
T = TypeVar("T")
_DRIFT_VIEWS, _DRIFT_PARSE, _DRIFT_EVALUATE = (DRIFT_CPU.labels(stage=s) for s in DRIFT_STAGES)


ANSWERING_HOLD_S = 1.0
"""Seconds after an answer that the drift sweep still yields to admissions (drift.SweepPace): under
Kueue's pace (4-9 answers per second in a burst) the next one comes sooner, so the sweep does not slip
into the gaps of a burst, while a trickle of one answer every few seconds leaves it most of the time."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


async def every(seconds: float, sweep: Callable[[], Awaitable[None] | None], what: str) -> None:
    """`sweep()` every `seconds`, for ever: None from it means nothing to sweep yet (the handlers have
    not bound it), and a sweep that fails is logged, never the end of the loop."""
    while True:
        await asyncio.sleep(seconds)
        try:
            if (run := sweep()) is not None:
                await run
        except Exception:
            log.exception("%s failed", what)


@dataclass(frozen=True)
class _JoinedTelemetry:
    """The last joined telemetry: valid while the reading is the same and no pod in `joined` changed its
    draft identity after the mirror's `version` (None: the identities did not come from the mirror)."""

    reading: TelemetryReading
    identities: Mapping[PodRef, DraftIdentity]
    version: int | None
    joined: frozenset[PodRef]
    snapshot: TelemetrySnapshot


class Controller:
    def __init__(self, *, settings: OperatorSettings, api: client.ApiClient, health: HealthState) -> None:
        self.settings = settings
        self.api = api
        self.health = health
        self.lock = asyncio.Lock()
        self._inflight: dict[str, Reservation] = {}
        self._pending_seen: dict[str, float] = {}
        self._answered: dict[str, str] = {}  # key -> quota marker of the reservation we answered
        self._busy: set[str] = set()
        self._answered_at = -math.inf  # monotonic time the last admission-check answer ended
        self.mirror = Mirror()  # filled by the index and event handlers
        self._reservations = ReservationTable(reservation_of)
        self._reading: TelemetryReading | None = None
        self._base: tuple[tuple[list[Any], ...], ClusterSnapshot] | None = None
        self._telemetry_cache: _JoinedTelemetry | None = None
        self._reader: PrometheusReader | None = None
        if settings.prometheus_url:
            self._reader = PrometheusReader(settings.prometheus_url, metrics=default_metrics())
        self._tasks: list[asyncio.Task[None]] = []
        # API writes get threads of their own: asyncio's default pool (cpu count + 4 threads) capped a
        # drained backlog at ~6 round trips in flight, and the telemetry refresh shares that pool.
        self._api_pool = ThreadPoolExecutor(settings.api_concurrency, thread_name_prefix="sovereignspec-api")
        self.indexes: Mapping[str, Any] | None = None  # kopf's live index views, bound by the handlers
        self.resync: Callable[[], Awaitable[None]] | None = None
        self.views_fn: Callable[[], Views] | None = None  # bound by the handlers with the indexes

    # ---- lifecycle -----------------------------------------------------------------------------

    def start_background(self) -> None:
        if self._reader is not None:
            self._tasks.append(asyncio.create_task(self._telemetry_loop(), name="telemetry-refresh"))
        st = self.settings
        for name, seconds, sweep in [
            ("resync", st.resync_seconds, self._resync_now),
            ("drift", st.drift_interval_seconds, self._drift_now),
        ]:
            self._tasks.append(asyncio.create_task(every(seconds, sweep, f"{name} sweep"), name=name))

    def _resync_now(self) -> Awaitable[None] | None:
        return None if self.resync is None else self.resync()

    def _drift_now(self) -> Awaitable[None] | None:
        return None if self.views_fn is None else self.drift_sweep(self.views_fn())

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        self._api_pool.shutdown(wait=False, cancel_futures=True)

    async def _api_call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """A blocking Kubernetes client call on the API pool, off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._api_pool, functools.partial(fn, *args, **kwargs))

    async def _telemetry_loop(self) -> None:
        """Refresh telemetry off the decision path: a slow Prometheus never delays an admission."""
        assert self._reader is not None
        while True:
            try:
                self._reading = await asyncio.to_thread(self._reader.refresh)  # not an API write
            except Exception:  # the reader reports trouble as gaps; this is a bug guard
                log.exception("telemetry refresh failed")
            await asyncio.sleep(self.settings.telemetry_refresh_seconds)

    def set_telemetry_spec(self, policy: SpeculationPolicy | None) -> None:
        # Only on a change: set_spec takes the reader's lock, which a refresh holds for its whole round
        # of queries; called per decision, it stalled the event loop behind Prometheus (bench p99).
        if self._reader is not None and policy is not None and policy.spec.telemetry != self._reader.spec:
            self._reader.set_spec(policy.spec.telemetry)

    def telemetry(self, identities: Mapping[PodRef, DraftIdentity]) -> TelemetrySnapshot | None:
        """The joined telemetry, the same object until the reading or the pods' draft identities change
        (the decision core memoises per node on that identity)."""
        reading = self._reading
        if reading is None:
            return None
        hit = self._telemetry_cache
        mirrored = identities is self.mirror.identities()
        version = self.mirror.identity_version if mirrored else None
        if hit is not None and hit.reading is reading:
            if hit.identities is identities:
                return hit.snapshot
            if mirrored and hit.version is not None:
                # In a burst every decision sees new pods, so new identities: the join reads only the pods
                # that drafted in the reading's window, and rebuilding it for each decision was O(pods).
                changed = self.mirror.identity_changes(hit.version)
                unchanged = changed is not None and changed.isdisjoint(hit.joined)
            else:
                unchanged = hit.identities == identities
            if unchanged:
                self._telemetry_cache = replace(hit, identities=identities, version=version)
                return hit.snapshot
            joined = hit.joined
        else:
            joined = joined_refs(reading.pod_acceptance)
        tel = telemetry_snapshot(reading, identities)
        self._telemetry_cache = _JoinedTelemetry(reading, identities, version, joined, tel)
        return tel

    # ---- AdmissionChecks -----------------------------------------------------------------------

    async def reconcile_admission_check(self, body: Mapping[str, Any], views: Views) -> None:
        spec = body.get("spec") or {}
        if spec.get("controllerName") != self.settings.controller_name:
            return
        condition = active_condition(body, views.speculation_policies, _utcnow())
        if condition is None:
            return  # already up to date: level-based, no write
        try:
            await self._api_call(
                apply_admission_check_condition,
                self.api,
                name=body["metadata"]["name"],
                condition=condition,
                field_manager=self.settings.field_manager,
            )
        except ApiException as exc:
            DECISION_ERRORS.labels(stage="admissioncheck").inc()
            log.warning(
                "cannot update AdmissionCheck %s: %s",
                body["metadata"]["name"],
                exc.reason,
                extra=api_error(exc),
            )

    # ---- Drift ---------------------------------------------------------------------------------

    async def drift_sweep(self, views: Views) -> None:
        """Re-evaluate every admitted decision against current telemetry (see drift.py)."""
        cpu = time.thread_time  # no await between a mark and its charge: only the sweep's own CPU
        mark = cpu()
        now = _utcnow()
        snap = self.snapshot(views)
        taken, reading = time.monotonic(), self._reading
        _DRIFT_VIEWS.inc(cpu() - mark)
        drifted = 0
        log.debug(
            "drift sweep over %d decisions, %d holding workloads", len(views.decisions), len(views.holding)
        )
        st = self.settings
        pace = SweepPace(
            st.drift_cpu_share,
            floor=st.drift_idle_share,
            busy_share=st.drift_busy_share,
            answering=self.answering,
        )
        decisions = {_key_of(raw): raw for raw in views.decisions}
        for key in list(decisions):
            # One decision at a time, paced to a share of the operator's CPU (drift.SweepPace): a sweep
            # over 1,000 decisions held the event loop for seconds, and every admission arriving meanwhile
            # waited for it. Parsed per sweep, not kept: keeping every parsed decision and workload cost
            # ~40 MB of RSS at 1,000.
            while (wait := pace.delay()) > 0:
                await asyncio.sleep(wait)
            pace.resume()
            if self.views_fn is not None and (
                self._reading is not reading or time.monotonic() - taken >= st.telemetry_refresh_seconds
            ):
                # A paced sweep outlives its views: judge each workload on the current telemetry and
                # bodies (a stale body's entry write is refused anyway: it carries its resourceVersion).
                mark = cpu()
                views = self.views_fn()
                now, snap = _utcnow(), self.snapshot(views)
                taken, reading = time.monotonic(), self._reading
                decisions = {_key_of(raw): raw for raw in views.decisions}
                _DRIFT_VIEWS.inc(cpu() - mark)
            mark = cpu()
            ns, name = key
            body = views.holding_bodies.get(key)
            admitted = self._admitted_now(key, decisions.get(key), body)
            parsed = cpu()
            _DRIFT_PARSE.inc(parsed - mark)
            if admitted is None or body is None:
                continue
            dec, status, wl, entry = admitted
            try:
                result = evaluate_drift(wl, entry.name, dec, snap, now, self.settings.controller_name)
            except (RequestError, ParseError, ValueError) as exc:
                log.debug("drift of %s/%s not evaluated: %s", ns, name, exc)
                continue
            except Exception:
                DECISION_ERRORS.labels(stage="drift").inc()
                log.warning("drift of %s/%s not evaluated", ns, name, exc_info=True)
                continue
            finally:
                _DRIFT_EVALUATE.inc(cpu() - parsed)
            if result is None:
                continue
            previous = next(
                (c.wire() for c in status.conditions if c.type == DRIFT),
                None,
            )
            result = result.on_record(previous is not None and previous.get("reason") == NEIGHBOUR_HARM)
            log.debug("drift of %s/%s: %s", ns, name, result.message)
            drifted += result.drifted
            cond = drift_condition(
                previous, result, dec.metadata.generation, now, st.drift_message_refresh_seconds
            )
            outcome = "drifted" if result.drifted else "stable"
            try:
                if cond is not None:
                    await self._api_call(
                        apply_decision_conditions,
                        self.api,
                        namespace=ns,
                        name=name,
                        conditions=[cond],
                        field_manager=f"{self.settings.field_manager}-drift",
                    )
                if result.readmit and grace_over(cond or previous, result, now):
                    drifted_msg = f"SovereignSpec: speculation drifted, re-admitting: {result.message}"
                    new = CheckEntry(name=entry.name, state="Retry", message=drifted_msg)
                    retry = entry_wire(set_admission_check_state(entry, new, now))
                    await self._apply_entry(wl, retry, _resource_version(body))
                    outcome = "reconfigured"
                    _post_event(
                        body,
                        type="Normal",
                        reason="SpeculationDrifted",
                        message=str(retry["message"])[:1024],
                    )
            except Exception as exc:  # one decision's trouble never ends the sweep for the others
                DECISION_ERRORS.labels(stage="drift").inc()
                log.warning(
                    "drift write for %s/%s failed: %s", ns, name, _describe(exc), extra=api_error(exc)
                )
                continue
            DRIFT_CHECKS.labels(outcome=outcome).inc()
        DRIFT_GAUGE.set(drifted)

    def answering(self) -> bool:
        """The operator is answering admission checks: a decision or its write is in flight, or one
        ended less than ANSWERING_HOLD_S ago."""
        return bool(self._busy) or time.monotonic() - self._answered_at < ANSWERING_HOLD_S

    @staticmethod
    def _admitted_now(
        key: tuple[str, str], raw: Mapping[str, Any] | None, body: Mapping[str, Any] | None
    ) -> tuple[SpeculationDecision, SpeculationDecisionStatus, WorkloadInfo, CheckEntry] | None:
        """A decision (and its status), the workload it still admits and that workload's entry for the
        decision's check, parsed; None when there is nothing to re-evaluate: deleted since the sweep
        began, no holding workload, unreadable, no record, or not admitted by this decision."""
        ns, name = key
        if raw is None:
            return None
        if body is None:
            log.debug("drift: %s/%s has no holding workload", ns, name)
            return None
        try:
            dec = SpeculationDecision.model_validate(raw)
        except ValueError as exc:
            log.warning("unreadable SpeculationDecision %s: %s", name, exc)
            return None
        if dec.spec.admission_check is None or dec.status is None:
            log.debug("drift: %s/%s has no record", ns, name)
            return None
        try:
            wl = parse_workload_safe(body)
        except ParseError:
            return None
        entry = wl.check(dec.spec.admission_check)
        if entry is None or entry.state != "Ready" or wl.uid != dec.spec.workload_uid:
            log.debug("drift: %s/%s is not admitted by this decision", ns, name)
            return None
        return dec, dec.status, wl, entry

    # ---- Workloads -----------------------------------------------------------------------------

    def forget(self, uid: str | None) -> None:
        """The workload holds nothing any more (evicted, finished or deleted): drop what we track."""
        if not uid:
            return
        self._inflight.pop(uid, None)
        prefix = f"{uid}/"
        for table in (self._pending_seen, self._answered):
            for k in [k for k in table if k.startswith(prefix)]:
                del table[k]

    def snapshot(self, views: Views, exclude: tuple[str, str] | None = None) -> ClusterSnapshot:
        """The decision input: the base snapshot plus the reservations, kept up to date from the
        decisions and workloads that changed; `exclude` drops the decided workload's own reservation."""
        m = self.mirror
        self._reservations.update(m.decisions, m.holding)
        self._drop_landed()
        res, held = self._reservations.view(self._inflight.values(), m.holding.items, exclude)
        return with_reservations(self._base_snapshot(views), res, views.holding, held)

    def _drop_landed(self) -> None:
        """Forget in-flight reservations whose decision has landed as written: the table has them, and
        keeping every admitted workload's made each decision O(workloads) again."""
        table = self._reservations.table
        for uid, r in list(self._inflight.items()):
            t = table.get((r.namespace, r.name))
            if t is not None and t.trusted and t.node == r.node and t.gpus == r.gpus and t.also == r.also:
                del self._inflight[uid]

    def _base_snapshot(self, views: Views) -> ClusterSnapshot:
        """Everything but the reservations, reused while the indexes hold the same parsed objects; on a
        change, the new snapshot keeps what the old one memoised about unchanged nodes."""
        policies = [p for p in views.speculation_policies.values() if isinstance(p, SpeculationPolicy)]
        parts: tuple[list[Any], ...] = (  # pods: by the mirror's changed keys instead
            views.nodes,
            views.namespaces,
            views.flavors,
            views.checks,
            policies,
            views.sovereignty_policies,
        )
        tel = self.telemetry(views.identities)
        prev = self._base
        pods = self.mirror.pods
        fresh = views.pods_version == pods.version  # views.pods is the mirror's pods as they are now
        if (
            prev is not None
            and fresh
            and not pods.changed
            and prev[1].telemetry is tel
            and all(same_items(a, b) for a, b in zip(prev[0], parts, strict=True))
        ):
            SNAPSHOT_BUILDS.labels(how="reused").inc()
            return prev[1]
        # model_construct: every part is already a parsed, validated object from the indexes.
        snap = ClusterSnapshot.model_construct(
            nodes=views.nodes,
            pods=views.pods,
            namespaces=views.namespaces,
            flavors=views.flavors,
            admission_checks=views.checks,
            speculation_policies=policies,
            sovereignty_policies=views.sovereignty_policies,
            telemetry=tel,
        )
        # Changes are consumed only by a snapshot of the mirror's current pods; otherwise they stay for
        # the next one (a superset is harmless: each key is compared by identity).
        tracked = (dict(pods.items), pods.take_changed()) if fresh else None
        if prev is not None:
            carry_index(snap, prev[1], tracked)
        SNAPSHOT_BUILDS.labels(how=index_of(snap).how).inc()
        self._base = (parts, snap)
        return snap

    def answer_seen(self, body: Mapping[str, Any]) -> None:
        """The bookkeeping of a Workload event that asks for no decision (no check entry Pending: our
        answer echoed, Kueue admitting it, its pods starting), from the raw body without parsing it:
        a later Pending entry means a requeue, and a workload that holds nothing any more is forgotten.
        Only entries of ours have keys here, so the entries need no filtering by name."""
        uid = (body.get("metadata") or {}).get("uid")
        entries = (body.get("status") or {}).get("admissionChecks") or []
        if not entries:
            return
        if not holding(body):
            self.forget(uid)
        for e in entries:
            if isinstance(e, Mapping):
                self._answered.pop(f"{uid}/{e.get('name')}", None)

    async def on_workload(
        self, body: Mapping[str, Any], views_fn: Callable[[], Views], ours: set[str]
    ) -> None:
        meta = body.get("metadata") or {}
        uid = meta.get("uid")
        status = body.get("status") or {}
        entries = [e for e in (status.get("admissionChecks") or []) if e.get("name") in ours]
        if not entries:
            return
        if not any(e.get("state") == "Pending" for e in entries):
            self.answer_seen(body)
            return
        try:
            wl = parse_workload_safe(body)
        except ParseError as exc:
            await self._report_unreadable(body, entries[0], str(exc))
            return
        if not wl.quota_reserved or wl.evicted or wl.finished:
            self.forget(uid)
            return
        marker = _quota_marker(status)
        for entry in wl.checks:
            if entry.name not in ours:
                continue
            key = f"{uid}/{entry.name}"
            if entry.state != "Pending":
                self._answered.pop(key, None)  # our answer is visible: later Pending means a requeue
                continue
            if key in self._busy:
                return  # the event handler and the resync sweep met on one workload: one answers
            self._busy.add(key)
            try:
                answered = self._answered.get(key)
                if answered == marker:
                    # A stale event from before our write landed (the write succeeded, or it would
                    # not be recorded): never re-decide; the next event shows our answer.
                    return
                self._pending_seen.setdefault(key, time.monotonic())
                await self._decide_and_write(wl, body, views_fn, key, marker)
            finally:
                self._busy.discard(key)
                self._answered_at = time.monotonic()
            return

    async def _decide_and_write(
        self,
        wl: WorkloadInfo,
        body: Mapping[str, Any],
        views_fn: Callable[[], Views],
        key: str,
        marker: str,
    ) -> None:
        async with self.lock:
            now = _utcnow()
            retry_after = 60
            try:
                # Views are taken under the lock: every earlier decision is in the indexes or _inflight.
                snap = self.snapshot(views_fn(), exclude=(wl.namespace, wl.name))
                try:
                    req, policies = request_for(wl, snap, self.settings.controller_name)
                except RequestError as exc:  # our AdmissionCheck or its policy: not this workload's doing
                    DECISION_ERRORS.labels(stage="request").inc()
                    log.warning("cannot decide %s/%s: %s", wl.namespace, wl.name, exc)
                    return
                if policies.speculation_name:
                    self.set_telemetry_spec(
                        next(
                            (
                                p
                                for p in snap.speculation_policies
                                if p.metadata.name == policies.speculation_name
                            ),
                            None,
                        )
                    )
                retry_after = policies.speculation.retry_after_seconds
                decision = decide(req, snap, policies, now)
            except Exception as exc:  # a bug or an input nobody foresaw: answer this workload, go on
                DECISION_ERRORS.labels(stage="decide").inc()
                log.warning("cannot decide %s/%s", wl.namespace, wl.name, exc_info=True)
                decision = failed(
                    wl.namespace, wl.name, key.partition("/")[2] or key, now, ReasonType.DECISION_ERROR,
                    f"SovereignSpec could not decide this workload ({_describe(exc)}); retrying in "
                    f"{retry_after}s", requeue_after_seconds=retry_after,
                )  # fmt: skip
            if decision.state == "Pending":
                return
            if decision.state == "Ready" and decision.node and wl.uid:
                also: dict[str, int] = {}
                for pl in decision.placements:
                    if pl.node != decision.node:
                        also[pl.node] = also.get(pl.node, 0) + pl.gpus
                self._inflight[wl.uid] = Reservation(
                    namespace=wl.namespace, name=wl.name, node=decision.node, gpus=decision.gpus, also=also
                )
        await self._write(wl, body, decision, now, key, marker, retry_after)

    async def _write(
        self,
        wl: WorkloadInfo,
        body: Mapping[str, Any],
        d: Decision,
        now: datetime,
        key: str,
        marker: str,
        retry_after: int = 60,
    ) -> None:
        """Record the decision, then answer the check. Whatever fails, the in-flight reservation is
        released; a record or answer the API server refuses (400, 422: it would be refused again) is
        replaced by a `Retry` that says why, so the workload is answered and its quota released."""
        assert d.admission_check is not None
        try:
            previous = wl.check(d.admission_check)
            entry = entry_wire(set_admission_check_state(previous, check_entry(d), now))
            record = speculation_decision_object(d, wl.uid)
            manager = self.settings.field_manager
            await self._api_call(apply_decision, self.api, obj=record, field_manager=manager)
            await self._apply_entry(wl, entry, _resource_version(body))
        except Exception as exc:
            DECISION_ERRORS.labels(stage="write").inc()
            if wl.uid:
                self._inflight.pop(wl.uid, None)
            status = exc.status if isinstance(exc, ApiException) else None
            if status in (404, 409):
                log.info(
                    "workload %s/%s changed under us (%s); waiting for the next event",
                    wl.namespace,
                    wl.name,
                    getattr(exc, "reason", exc),
                    extra=api_error(exc),
                )
                return
            transient = (ApiException, OSError, TimeoutError, urllib3.exceptions.HTTPError)
            refused = status in (400, 422) or not isinstance(exc, transient)
            if not refused or d.reason in _FALLBACKS:
                log.warning(
                    "decision write for %s/%s failed: %s", wl.namespace, wl.name, _describe(exc),
                    extra=api_error(exc),
                )  # fmt: skip
                raise kopf.TemporaryError(f"write failed: {_describe(exc)}", delay=2) from exc
            log.warning(
                "decision for %s/%s not recorded: %s", wl.namespace, wl.name, _describe(exc),
                extra=api_error(exc),
            )  # fmt: skip
            fallback = failed(
                wl.namespace, wl.name, d.admission_check, now, ReasonType.RECORD_REFUSED,
                f"SovereignSpec decided {d.state} ({d.reason}) but could not record it: {_describe(exc)}; "
                f"retrying in {retry_after}s", requeue_after_seconds=retry_after,
            )  # fmt: skip
            await self._write(wl, body, fallback, now, key, marker, retry_after)
            return
        self._answered[key] = marker
        started = self._pending_seen.pop(key, None)
        duration = time.monotonic() - started if started is not None else math.nan
        if started is not None:
            DECISION_DURATION.observe(duration)
        mode = "on" if d.speculative.enabled else "off"
        DECISIONS.labels(state=d.state, mode=mode, reason=d.reason).inc()
        _post_event(
            body,
            type="Normal" if d.state == "Ready" else "Warning",
            reason=f"Speculation{d.state}",
            message=_event_message(d),
        )
        log.info(
            "decided",
            extra={
                "workload": f"{wl.namespace}/{wl.name}",
                "state": d.state,
                "mode": mode,
                "node": d.node or "",
                "reason": d.reason,
                "k": d.speculative.num_speculative_tokens,
                "speedup": d.predicted_speedup if d.predicted_speedup is not None else math.nan,
                "durationMs": round(duration * 1000, 3),  # the histogram's sample, for benchmarks
            },
        )

    async def _apply_entry(
        self, wl: WorkloadInfo, entry: Mapping[str, Any], resource_version: str | None
    ) -> None:
        """Our entry, applied only onto the Workload version the answer was computed from."""
        await self._api_call(
            apply_workload_check,
            self.api,
            namespace=wl.namespace,
            name=wl.name,
            entry=entry,
            field_manager=self.settings.field_manager,
            resource_version=resource_version,
        )

    async def _report_unreadable(
        self, body: Mapping[str, Any], raw_entry: Mapping[str, Any], why: str
    ) -> None:
        """A Workload the core cannot read stays Pending with the reason in our entry's message.

        Never Rejected: an unreadable field may be a newer Kueue's addition, and deactivating every
        workload for it would lose them all. Kueue keeps the workload queued; the message, a Warning
        Event and `sovereignspec_decision_errors_total{stage="parse"}` say why.
        """
        DECISION_ERRORS.labels(stage="parse").inc()
        message = f"SovereignSpec cannot read this Workload: {why}"[:MESSAGE_CHARS]
        if raw_entry.get("state") != "Pending" or raw_entry.get("message") == message:
            return
        meta = body["metadata"]
        since = wire_time(raw_entry.get("lastTransitionTime"))
        previous = CheckEntry(name=raw_entry["name"], state="Pending", last_transition_time=since)
        new = CheckEntry(name=raw_entry["name"], state="Pending", message=message)
        entry = entry_wire(set_admission_check_state(previous, new, _utcnow()))
        try:
            await self._api_call(
                apply_workload_check,
                self.api,
                namespace=meta["namespace"],
                name=meta["name"],
                entry=entry,
                field_manager=self.settings.field_manager,
                resource_version=_resource_version(body),
            )
        except ApiException as exc:
            DECISION_ERRORS.labels(stage="write").inc()
            log.info(
                "cannot report unreadable workload %s/%s: %s",
                meta["namespace"],
                meta["name"],
                exc.reason,
                extra=api_error(exc),
            )
            return
        _post_event(body, type="Warning", reason="SpeculationUnreadable", message=message[:1024])


def _condition(body: Mapping[str, Any], kind: str) -> bool:
    conds = (body.get("status") or {}).get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True" for c in conds)


def holding(body: Mapping[str, Any]) -> bool:
    """Quota reserved (or admitted) and neither evicted nor finished: its decision is a reservation
    (the raw-body twin of WorkloadInfo's quota_reserved / evicted / finished)."""
    reserved = _condition(body, "QuotaReserved") or bool((body.get("status") or {}).get("admission"))
    return reserved and not _condition(body, "Evicted") and not _condition(body, "Finished")


def finished(body: Mapping[str, Any]) -> bool:
    """The Workload is Finished (terminal: Kueue never admits it again)."""
    return _condition(body, "Finished")


def _post_event(body: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
    """kopf.event, best effort: outside a kopf handler (resync and drift sweeps run in our own tasks)
    kopf has no event queue in the context and raises LookupError; the decision is already written."""
    try:
        kopf.event(cast(kopf.Body, body), type=type, reason=reason, message=message)
    except LookupError:
        log.debug("no kopf event queue in this task; Event %s not posted", reason)


def _key_of(raw: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an object, a missing namespace read as "default" (as the mirror keys it)."""
    meta = raw.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name"))


def _resource_version(body: Mapping[str, Any]) -> str | None:
    rv = (body.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv else None


def _quota_marker(status: Mapping[str, Any]) -> str:
    """Identifies one quota reservation: a requeued workload gets a new QuotaReserved transition."""
    for c in status.get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == "QuotaReserved":
            return str(c.get("lastTransitionTime"))
    return ""


def parse_workload_safe(body: Mapping[str, Any]) -> WorkloadInfo:
    from sovereignspec.policy.parse import parse_workload

    try:
        return parse_workload(body)
    except ParseError:
        raise
    except (ValueError, TypeError, KeyError) as exc:  # pydantic ValidationError is a ValueError
        raise ParseError(str(exc)) from exc


_FALLBACKS = frozenset({ReasonType.RECORD_REFUSED})
"""Reasons of the answers written in place of a refused one (never replaced again: no loop)."""


def _describe(exc: BaseException) -> str:
    """An exception in one bounded line: its type and, for an API error, the status and the server's
    message (which may quote what was sent; cut to 512 characters)."""
    if isinstance(exc, ApiException):
        detail = str(exc.reason or "")
        with contextlib.suppress(ValueError, TypeError):
            detail = str(json.loads(exc.body or "{}").get("message") or detail)
        return bounded(f"API server answered {exc.status}: {detail}", 512)
    return bounded(f"{type(exc).__name__}: {exc}", 512)


def _event_message(d: Decision) -> str:
    if d.state == "Ready":
        spec = (
            f"speculation on (k≤{d.speculative.num_speculative_tokens}, predicted x{d.predicted_speedup:.2f})"
            if d.speculative.enabled and d.predicted_speedup is not None
            else "speculation off"
        )
        return f"{spec} on node {d.node}: {d.message}"[:1024]
    return f"{d.state}: {d.message}"[:1024]
