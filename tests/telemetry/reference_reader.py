"""The reader's refresh as it was before issue 18's incremental refresh (main at 9ee1081): answers read
gzip-compressed through `.content` and decoded in the fetching threads, the collector running, the
assembly of `reference_assemble`. An oracle and a baseline for `bench/telemetry_refresh_ab.py`; not used
by the operator."""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Mapping

import requests

from sovereignspec.model.telemetry import PodRef
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.parse import parse_response
from sovereignspec.telemetry.queries import Query
from sovereignspec.telemetry.reader import PrometheusReader, _is_timeout, _short
from sovereignspec.telemetry.reading import TelemetryReading
from tests.telemetry import reference_assemble
from tests.telemetry.reference_assemble import QueryResult


class ReferenceReader(PrometheusReader):
    """`PrometheusReader` with the old fetch and assembly: the same queries, pool, deadline and metrics."""

    _pod_refs: dict[tuple[str, str], PodRef]

    def _assemble(self, results: Mapping[Query, QueryResult], now: float) -> TelemetryReading:
        if not hasattr(self, "_pod_refs"):
            self._pod_refs = {}
        return reference_assemble.assemble(results, now, self._spec.staleness_seconds, self._pod_refs)

    def _refresh_locked(self) -> TelemetryReading:
        started = time.monotonic()
        now = self._clock()
        timeout = self._spec.query_timeout_seconds
        results: dict[Query, QueryResult] = {}
        pool = cf.ThreadPoolExecutor(max_workers=len(self._queries), thread_name_prefix="promql")
        try:
            futures = {q: pool.submit(self._query, q, promql, timeout) for q, promql in self._queries.items()}
            done, _ = cf.wait(futures.values(), timeout=timeout + 0.25)
            for q, fut in futures.items():
                if fut in done:
                    results[q] = fut.result()
                else:
                    fut.cancel()
                    results[q] = Gap(q.value, GapCode.TIMEOUT, f"no answer within {timeout:g}s")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        for q in self._queries:
            self.metrics.queries.labels(query=q.value).inc()
        reading = self._assemble(results, now)
        elapsed = time.monotonic() - started
        self.metrics.refresh_seconds.observe(elapsed)
        self.metrics.record_gaps(reading.gaps)
        return TelemetryReading(
            time=reading.time,
            gpus=reading.gpus,
            engines=reading.engines,
            pod_acceptance=reading.pod_acceptance,
            gaps=reading.gaps,
            newest_sample=reading.newest_sample,
            queries=len(self._queries),
            seconds=elapsed,
        )

    def _query(self, q: Query, promql: str, timeout: float) -> QueryResult:
        session = self._session()
        headers = {k: v for k, v in self._headers.items() if k != "Accept-Encoding"}  # requests' gzip
        try:
            resp = session.get(
                f"{self.url}/api/v1/query",
                params={"query": promql, "timeout": f"{timeout:g}s"},
                headers=headers or None,
                timeout=timeout,
            )
            body = resp.content
        except requests.exceptions.Timeout:
            return Gap(q.value, GapCode.TIMEOUT, f"no answer within {timeout:g}s from {self.url}")
        except requests.exceptions.ConnectionError as exc:
            if _is_timeout(exc):
                return Gap(q.value, GapCode.TIMEOUT, f"no answer within {timeout:g}s from {self.url}")
            return Gap(q.value, GapCode.CONNECTION, f"cannot reach {self.url}: {_short(exc)}")
        except Exception as exc:
            return Gap(q.value, GapCode.ERROR, f"{type(exc).__name__}: {_short(exc)}")
        finally:
            self._sessions.put(session)
        if resp.status_code != 200:
            return Gap(q.value, GapCode.HTTP, _short(f"HTTP Status Code {resp.status_code} ({body!r})"))
        try:
            samples, gap = parse_response(q.value, body)
        except Exception as exc:
            return Gap(q.value, GapCode.ERROR, f"{type(exc).__name__}: {_short(exc)}")
        return gap if gap is not None else samples
