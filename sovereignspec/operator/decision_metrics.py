"""Per-decision gauges for dashboards, read from the operator's mirror of SpeculationDecisions at scrape time.

A collector instead of gauges set by the controller: the series follow the decisions the operator holds
(a deleted Workload's decision, and a Finished one's once its pods are gone, disappear from the mirror
and from /metrics), with no bookkeeping. Only
decisions written by the operator itself (managed-by label) are exported: a tenant cannot inject
series. Cardinality is one series per decision and metric.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sovereignspec.api.meta import LABEL_MANAGED_BY, MANAGED_BY_VALUE

log = logging.getLogger(__name__)
LABELS = ["namespace", "workload", "node", "mode"]


def _decisions(store: Mapping[Any, Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    if store is None:
        return []
    for _ in range(3):  # the mirror changes on the event loop while a scrape reads it from its thread
        try:
            return list(store.values())
        except RuntimeError:
            continue
    return []


class DecisionCollector(Collector):
    def __init__(self, decisions: Callable[[], Mapping[Any, Mapping[str, Any]] | None]) -> None:
        self._decisions = decisions

    def collect(self) -> Iterator[GaugeMetricFamily]:
        speedup = GaugeMetricFamily(
            "sovereignspec_decision_predicted_speedup",
            "Predicted S_real at the expected batch of each admitted (Ready) decision; 1 when plain.",
            labels=LABELS,
        )
        slack = GaugeMetricFamily(
            "sovereignspec_decision_slack",
            "Compute slack sigma of the chosen node at decision time, per Ready decision.",
            labels=LABELS,
        )
        k = GaugeMetricFamily(
            "sovereignspec_decision_num_speculative_tokens",
            "num_speculative_tokens written for each Ready decision (0 = speculation off).",
            labels=LABELS,
        )
        try:
            items = _decisions(self._decisions())
        except Exception:  # a scrape must never fail because of a malformed object
            log.exception("decision metrics: cannot read the decisions")
            items = []
        for body in items:
            meta = body.get("metadata") or {}
            st = body.get("status") or {}
            if (meta.get("labels") or {}).get(LABEL_MANAGED_BY) != MANAGED_BY_VALUE or st.get(
                "state"
            ) != "Ready":
                continue
            lv = [
                str(meta.get("namespace", "")),
                str(meta.get("name", "")),
                str(st.get("node") or ""),
                str(st.get("mode", "off")),
            ]
            if isinstance(st.get("predictedSpeedup"), int | float):
                speedup.add_metric(lv, float(st["predictedSpeedup"]))
            if isinstance(st.get("slack"), int | float):
                slack.add_metric(lv, float(st["slack"]))
            spec = st.get("speculative") or {}
            k.add_metric(lv, float(spec.get("numSpeculativeTokens") or 0))
        yield from (speedup, slack, k)
