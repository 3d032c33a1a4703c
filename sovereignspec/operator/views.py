"""What the controller reads of the cluster: typed views over the kopf indexes and the mirror.

The handlers' indexes hold parsed objects (policy/parse.py); `read_views` gathers them, with the
mirror's tables, into one `Views`, from which the controller builds its ClusterSnapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sovereignspec.api.speculation_policy import SpeculationPolicy
from sovereignspec.model.cluster import (
    AdmissionCheckInfo,
    FlavorInfo,
    NamespaceInfo,
    NodeInfo,
    PodInfo,
    WorkloadRef,
)
from sovereignspec.model.telemetry import PodRef
from sovereignspec.operator.mirror import Mirror
from sovereignspec.telemetry.annotations import DraftIdentity

T = TypeVar("T")


@dataclass
class Views:
    """Typed views over the kopf indexes (each a name → parsed object mapping)."""

    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)
    identities: dict[PodRef, DraftIdentity] = field(default_factory=dict)
    namespaces: list[NamespaceInfo] = field(default_factory=list)
    flavors: list[FlavorInfo] = field(default_factory=list)
    checks: list[AdmissionCheckInfo] = field(default_factory=list)
    speculation_policies: dict[str, SpeculationPolicy | str] = field(default_factory=dict)
    sovereignty_policies: list[Any] = field(default_factory=list)
    decisions: list[Mapping[str, Any]] = field(default_factory=list)
    holding: list[WorkloadRef] = field(default_factory=list)
    holding_bodies: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    pods_version: int = -1
    """The mirror's pod table version `pods` was read at (-1: not read from the mirror)."""


def index_values(index: Mapping[Any, Iterable[T]]) -> list[T]:
    """Every value a kopf index holds, over all its keys."""
    return [v for store in index.values() for v in store]


def read_views(idx: Mapping[str, Any], mirror: Mirror, bodies: bool = False) -> Views:
    """Typed views over the indexes and the mirror (pods, decisions, holding workloads: copied at C
    speed from its tables); workload bodies only for the drift sweep."""
    specs: dict[str, SpeculationPolicy | str] = {}
    for key, store in idx["ss_spec_policies"].items():
        for v in store:
            specs[key] = v
    return Views(
        nodes=index_values(idx["ss_nodes"]),
        pods=list(mirror.pods.items.values()),
        pods_version=mirror.pods.version,
        identities=mirror.identities(),
        namespaces=index_values(idx["ss_namespaces"]),
        flavors=index_values(idx["ss_flavors"]),
        checks=[c for c, _ in index_values(idx["ss_checks"])],
        speculation_policies=specs,
        sovereignty_policies=index_values(idx["ss_sov_policies"]),
        decisions=list(mirror.decisions.items.values()),
        holding=list(mirror.holding.items.values()),
        holding_bodies={
            (k[1] or "default", k[2]): b for k, s in idx["ss_workloads"].items() if k[0] == "body" for b in s
        }
        if bodies
        else {},
    )
