"""Kueue admission-check entries: build ours from a Decision, and the clocked state transition.

`set_admission_check_state(previous, new, now)` mirrors Kueue's `SetAdmissionCheckState`:
`lastTransitionTime` moves only when `state` changes; and, since Kueue forbids changing
`podSetUpdates` while an entry stays Ready, a Ready entry keeps its previous podSetUpdates.
"""

from __future__ import annotations

from datetime import datetime

from sovereignspec.api.meta import rfc3339
from sovereignspec.api.speculation_decision import MESSAGE_CHARS
from sovereignspec.model.workload import CheckEntry


def set_admission_check_state(previous: CheckEntry | None, new: CheckEntry, now: datetime) -> CheckEntry:
    if previous is None or previous.state != new.state:
        return new.model_copy(update={"last_transition_time": now})
    update: dict[str, object] = {"last_transition_time": previous.last_transition_time or now}
    if new.state == "Ready" and previous.pod_set_updates:
        update["pod_set_updates"] = previous.pod_set_updates
    return new.model_copy(update=update)


def entry_wire(entry: CheckEntry) -> dict[str, object]:
    """The JSON of one `status.admissionChecks[]` entry for a server-side apply on /status."""
    out: dict[str, object] = {
        "name": entry.name,
        "state": entry.state,
        "message": entry.message[:MESSAGE_CHARS],
        "lastTransitionTime": rfc3339(entry.last_transition_time) if entry.last_transition_time else None,
    }
    if entry.pod_set_updates:
        out["podSetUpdates"] = [u.wire() for u in entry.pod_set_updates]
    if entry.requeue_after_seconds is not None:
        out["requeueAfterSeconds"] = entry.requeue_after_seconds
    return out
