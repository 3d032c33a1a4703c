"""The Kueue Workload (v1beta2) as the decision reads it: pod sets, admission, and check entries."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict

from sovereignspec.api.base import Model
from sovereignspec.api.meta import Toleration
from sovereignspec.api.speculation_decision import CheckState, Message, PodSetUpdate


class NodeSelectorRequirement(Model):
    """One core/v1 NodeSelectorRequirement (a label or field key, an operator, values)."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] | None = None


class NodeSelectorTerm(Model):
    """One term of a required node affinity: every requirement must hold (an empty term matches no
    node, as in Kubernetes)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] | None = None
    match_fields: tuple[NodeSelectorRequirement, ...] | None = None


class PodSetInfo(Model):
    """One podSet: its count, GPUs per pod, and the template fields podSetUpdates must not contradict."""

    name: str
    count: int = 1
    gpus_per_pod: int = 0
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    """The template's requiredDuringSchedulingIgnoredDuringExecution terms (any one must match);
    None when it sets none."""


class TopologyDomain(Model):
    """One TAS domain: values per topology level, and the pods placed there."""

    values: list[str]
    count: int = 1


class PodSetAssignment(Model):
    name: str
    flavors: dict[str, str] = {}
    count: int | None = None
    topology_levels: list[str] = []
    topology_domains: list[TopologyDomain] | None = None


class CheckEntry(Model):
    """`status.admissionChecks[]` entry (listType=map keyed by name).

    Fields Kueue adds over versions (e.g. `retryCount` after an eviction) are ignored, not refused:
    the entry is Kueue's shape, not ours.
    """

    model_config = ConfigDict(extra="ignore")

    name: str
    state: CheckState
    message: Message = ""
    last_transition_time: datetime | None = None
    pod_set_updates: list[PodSetUpdate] = []
    requeue_after_seconds: int | None = None
    retry_count: int | None = None


class WorkloadInfo(Model):
    namespace: str
    name: str
    uid: str | None = None
    generation: int | None = None
    queue_name: str | None = None
    owner_kind: str | None = None
    """Kind of the object Kueue built the Workload for (its owner, or Kueue's job-owner-gvk
    annotation): `LeaderWorkerSet` marks one engine over several nodes (policy/group.py)."""
    pod_sets: list[PodSetInfo] = []
    quota_reserved: bool = False
    evicted: bool = False
    finished: bool = False
    cluster_queue: str | None = None
    assignments: list[PodSetAssignment] = []
    checks: list[CheckEntry] = []

    def check(self, name: str) -> CheckEntry | None:
        return next((c for c in self.checks if c.name == name), None)
