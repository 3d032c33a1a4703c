"""Join per-pod acceptance counters to draft identities; build the decision core's snapshot. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sovereignspec.model.acceptance import full_draft_tokens, pool_samples
from sovereignspec.model.telemetry import AcceptanceSample, PodRef, TelemetryGap, TelemetrySnapshot
from sovereignspec.telemetry.annotations import DraftIdentity
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.reading import PodAcceptance, TelemetryReading

SOURCE = "acceptance"


def join_acceptance(
    pods: Iterable[PodAcceptance], identities: Mapping[PodRef, DraftIdentity]
) -> tuple[list[AcceptanceSample], list[Gap]]:
    """One AcceptanceSample per (target, draft, method), summing its pods' counter increases.

    Pods that ran different k are combined on their common positions only (the shortest k), so
    every position's count is over drafts that could have reached it. Pods with no drafts in the
    window add nothing.
    """
    groups: dict[tuple[str, str, str], list[PodAcceptance]] = {}
    gaps: list[Gap] = []
    for p in pods:
        if p.drafts <= 0:
            continue
        ref = PodRef(namespace=p.namespace, name=p.pod)
        ident = identities.get(ref)
        if ident is None:
            gaps.append(
                Gap(
                    SOURCE,
                    GapCode.UNMAPPED,
                    f"{p.namespace}/{p.pod}: speculative counters but no draft identity",
                )
            )
            continue
        target = ident.target_model or p.model_name
        if not target:
            gaps.append(Gap(SOURCE, GapCode.UNMAPPED, f"{p.namespace}/{p.pod}: no target model"))
            continue
        groups.setdefault((target, ident.draft_model, ident.method), []).append(p)

    out: list[AcceptanceSample] = []
    for (target, draft, method), members in sorted(groups.items()):
        samples = [
            AcceptanceSample(
                target_model=target,
                draft_model=draft,
                method=method,
                drafts=m.drafts,
                draft_tokens=full_draft_tokens(m.drafts, m.draft_tokens, len(m.accepted_per_position)),
                accepted_per_position=list(m.accepted_per_position),
            )
            for m in members
        ]
        # The queries give per-position counts only; the pool's accepted total is their sum, which the
        # aggregate path reads when some pod's drafts were cut short by its schedule.
        out.append(pool_samples(samples))
    return out, gaps


def joined_refs(pods: Iterable[PodAcceptance]) -> frozenset[PodRef]:
    """The pods whose draft identity `join_acceptance` reads: those that drafted in the window. An
    identity change of any other pod (a new pod, one that has not drafted yet) leaves the join as it was."""
    return frozenset(PodRef(namespace=p.namespace, name=p.pod) for p in pods if p.drafts > 0)


def build_snapshot(
    reading: TelemetryReading, identities: Mapping[PodRef, DraftIdentity]
) -> TelemetrySnapshot:
    """The snapshot the decision core reads, the same type `sovereignspec decide` loads from a file."""
    acceptance, join_gaps = join_acceptance(reading.pod_acceptance, identities)
    missing: list[TelemetryGap] = [g.telemetry_gap() for g in (*reading.gaps, *join_gaps)]
    return TelemetrySnapshot(
        time=reading.time,
        gpus=reading.gpus,
        engines=reading.engines,
        acceptance=acceptance,
        missing=missing,
    )
