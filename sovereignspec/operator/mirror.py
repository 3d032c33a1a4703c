"""What the index handlers parsed, kept by key with the keys that changed since they were last read.

kopf's indexes answer "what is there", so every decision rebuilt its inputs from all of them: at 1,000
workloads that was ~30 ms of Python per decision (views and the reservation table), O(cluster) work for
an O(1) change. The index handlers also write here, as they parse; a deletion comes through the event
handlers (kopf calls no index handler for it). Each consumer then reads the current tables and only the
keys that changed. Everything runs on the operator's event loop: no locks.

A pod that runs under a SpeculationDecision (the `sovereignspec.io/decision` annotation Kueue copies from
our podSetUpdate) is kept with the claims that decision recorded at admission (`PodInfo.recorded`), which
the neighbour rule reads instead of the pod's annotations: claims take effect at admission, and a tenant
that re-annotates its running pod changes nothing. The link is the decision the pod was first seen under
and stays until the pod is gone, so re-pointing or removing the annotation later does not undo it: the
pod keeps that decision's claims and keeps consuming its reservation (removing the annotation used to
make the reservation look unconsumed and fence off a second GPU).

A Finished Workload's decision reserves nothing (its reservation is untrusted) and, once no pod runs
under it, no decision reads it: the mirror drops it then (the Workload stays, often for ever, and so
did every decision body: 2,000 of them at the end of the bench's queued phase). Whichever arrives
first, the Finished Workload or its decision, the result is the same, so a restart rebuilds it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from typing import Any, Generic, TypeVar

from sovereignspec.api.meta import ANNOTATION_DECISION
from sovereignspec.model.cluster import PodInfo, RecordedClaims, WorkloadRef
from sovereignspec.model.telemetry import PodRef
from sovereignspec.policy.parse import decision_of, recorded_claims, with_recorded_claims
from sovereignspec.telemetry.annotations import DraftIdentity

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


IDENTITY_LOG = 4096
"""Identity changes the mirror remembers (`Mirror.identity_changes`): more than a burst of pods changes
between two decisions."""


class Table(Generic[K, V]):
    """One kind's objects by key, and the keys changed since `take_changed` was last called."""

    def __init__(self) -> None:
        self.items: dict[K, V] = {}
        self.version = 0
        self._changed: set[K] = set()

    def put(self, key: K, value: V | None) -> bool:
        """Store (None: forget) `value`; an equal value keeps the stored object. True if it changed."""
        old = self.items.get(key)
        if value is None:
            if old is None:
                return False
            del self.items[key]
        elif old is value or (old is not None and old == value):
            return False
        else:
            self.items[key] = value
        self._changed.add(key)
        self.version += 1
        return True

    @property
    def changed(self) -> bool:
        return bool(self._changed)

    def take_changed(self) -> set[K]:
        changed, self._changed = self._changed, set()
        return changed


PodKey = tuple[str, str]
DecisionKey = tuple[str, str]
WorkloadKey = tuple[str, str]


def owner_uid(raw: Mapping[str, Any]) -> str | None:
    """The uid of the Workload that controls a SpeculationDecision (None when none does)."""
    for o in (raw.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(o, Mapping) and o.get("kind") == "Workload" and o.get("controller"):
            uid = o.get("uid")
            return str(uid) if uid else None
    return None


class Mirror:
    """Pods (with their draft identities), SpeculationDecisions and holding Workloads."""

    def __init__(self) -> None:
        self.pods: Table[PodKey, PodInfo] = Table()
        self.decisions: Table[tuple[str, str], dict[str, object]] = Table()
        self.holding: Table[tuple[str, str], WorkloadRef] = Table()
        self._identity: dict[PodKey, tuple[PodRef, DraftIdentity]] = {}
        self._identities: dict[PodRef, DraftIdentity] = {}
        self._identities_copy: dict[PodRef, DraftIdentity] | None = None
        self.identity_version = 0
        self._identity_log: deque[tuple[int, PodRef]] = deque(maxlen=IDENTITY_LOG)
        self._identity_forgotten = 0  # the log holds every change after this version
        self._recorded: dict[DecisionKey, RecordedClaims] = {}
        self._link: dict[PodKey, DecisionKey] = {}
        self._linked: dict[DecisionKey, set[PodKey]] = {}
        self._finished: dict[WorkloadKey, str] = {}
        """Finished Workloads by (namespace, name), with their uid; a decision is named after its
        Workload, so a finished one's decision has the same key."""

    def put_finished(self, key: WorkloadKey, uid: str | None) -> None:
        """The Workload `key` is Finished (`uid`: its uid) or not, or is gone (None)."""
        if uid is None:
            self._finished.pop(key, None)
        elif self._finished.get(key) != uid:
            self._finished[key] = uid
            self._drop_if_done(key)

    def _done(self, key: DecisionKey, raw: Mapping[str, Any]) -> bool:
        """The decision belongs to a Finished Workload and no pod runs under it: nothing reads it."""
        uid = self._finished.get(key)
        return uid is not None and owner_uid(raw) == uid and not self._linked.get(key)

    def _drop_if_done(self, key: DecisionKey) -> None:
        raw = self.decisions.items.get(key)
        if raw is not None and self._done(key, raw):
            self.put_decision(key, None)

    def put_pod(
        self, key: PodKey, pod: PodInfo | None, ref: PodRef | None = None, ident: DraftIdentity | None = None
    ) -> None:
        if pod is None:
            self._unlink(key)
            self.pods.put(key, None)
        else:
            self.pods.put(key, self._with_claims(key, pod))
        new = (ref, ident) if pod is not None and ref is not None and ident is not None else None
        old = self._identity.get(key)
        if old == new:
            return
        self.identity_version += 1
        if old is not None:
            self._identities.pop(old[0], None)
            del self._identity[key]
            self._log_identity(old[0])
        if new is not None:
            self._identity[key] = new
            self._identities[new[0]] = new[1]
            self._log_identity(new[0])
        self._identities_copy = None

    def put_decision(self, key: DecisionKey, raw: dict[str, object] | None) -> None:
        """Store (None: forget) a SpeculationDecision; the pods linked to it get its recorded claims. A
        Finished Workload's decision without pods is not kept."""
        if raw is not None and self._done(key, raw):
            raw = None
        self.decisions.put(key, raw)
        rec = recorded_claims(raw) if raw is not None else None
        if rec == self._recorded.get(key):
            return
        if rec is None:
            del self._recorded[key]
        else:
            self._recorded[key] = rec
        for pk in self._linked.get(key, ()):
            pod = self.pods.items.get(pk)
            if pod is not None:  # its claims are replaced whole, so the stored pod is the one to start from
                self.pods.put(pk, with_recorded_claims(pod, rec))

    def _with_claims(self, key: PodKey, pod: PodInfo) -> PodInfo:
        link = self._link.get(key)
        if link is None:
            link = decision_of(pod)
            if link is None:
                return pod
            self._link[key] = link
            self._linked.setdefault(link, set()).add(key)
        elif pod.annotations.get(ANNOTATION_DECISION) != link[1]:
            # Re-pointed or removed: the pod still runs under (and consumes the reservation of) the
            # decision it was admitted under.
            pod = pod.model_copy(update={"annotations": {**pod.annotations, ANNOTATION_DECISION: link[1]}})
        return with_recorded_claims(pod, self._recorded.get(link))

    def _unlink(self, key: PodKey) -> None:
        link = self._link.pop(key, None)
        if link is not None:
            pods = self._linked.get(link)
            if pods is not None:
                pods.discard(key)
                if not pods:
                    del self._linked[link]
                    self._drop_if_done(link)

    def identity_changes(self, since: int) -> set[PodRef] | None:
        """The pods whose draft identity changed after `identity_version` was `since`; None when the log
        no longer reaches back that far (then every pod may have changed)."""
        if since < self._identity_forgotten:
            return None
        out: set[PodRef] = set()
        for version, ref in reversed(self._identity_log):
            if version <= since:
                break
            out.add(ref)
        return out

    def _log_identity(self, ref: PodRef) -> None:
        log = self._identity_log
        if len(log) == log.maxlen:
            self._identity_forgotten = log[0][0]
        log.append((self.identity_version, ref))

    def identities(self) -> dict[PodRef, DraftIdentity]:
        """The pods' draft identities: a new dict after each change, the same one until the next."""
        if self._identities_copy is None:
            self._identities_copy = dict(self._identities)
        return self._identities_copy
