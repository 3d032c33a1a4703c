"""Prometheus reader: a fixed set of queries per refresh, in parallel, with a deadline and a TTL cache.

Never raises for telemetry trouble: an unreachable, slow or confused Prometheus yields a reading
whose values are None and whose gaps say why. Thread-safe; from asyncio call it with
`asyncio.to_thread(reader.snapshot, identities)`.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from sovereignspec.api.telemetry_spec import TelemetrySpec
from sovereignspec.model.telemetry import PodRef, TelemetrySnapshot
from sovereignspec.telemetry.annotations import DraftIdentity
from sovereignspec.telemetry.assemble import QueryResult, assemble
from sovereignspec.telemetry.carry import Carry
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.gcpause import collector_paused
from sovereignspec.telemetry.join import build_snapshot
from sovereignspec.telemetry.metrics import TelemetryMetrics
from sovereignspec.telemetry.parse import parse_response
from sovereignspec.telemetry.queries import Query, effective_queries
from sovereignspec.telemetry.reading import TelemetryReading

Clock = Callable[[], float]


class PrometheusReader:
    """Reads GPU, engine and acceptance telemetry for the decision core.

    `clock` (Unix seconds) is injected: staleness and the cache are judged on it, never on a
    hidden `time.time()` deep inside.
    """

    def __init__(
        self,
        url: str,
        spec: TelemetrySpec | None = None,
        *,
        clock: Clock = time.time,
        metrics: TelemetryMetrics | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._spec = spec or TelemetrySpec()
        self._queries = effective_queries(self._spec)
        self._clock = clock
        self.metrics = metrics or TelemetryMetrics(registry=None)
        # Uncompressed answers unless the caller's headers say otherwise: decompressing gzip cost the
        # reader more CPU than reading the plain bytes (docs/scale.md, session 10).
        self._headers = {"Accept-Encoding": "identity", **(headers or {})}
        self._lock = threading.Lock()
        self._cached: TelemetryReading | None = None
        self._cached_at = -math.inf
        # HTTP sessions kept between refreshes (their connections stay open), one per query in flight.
        self._sessions: queue.SimpleQueue[requests.Session] = queue.SimpleQueue()
        self._carry = Carry()  # what the last reading hands to the next (see carry.py)
        self._pool: cf.ThreadPoolExecutor | None = None  # the fetching threads, while none got stuck
        self._pool_size = 0

    @property
    def spec(self) -> TelemetrySpec:
        return self._spec

    @property
    def queries(self) -> dict[Query, str]:
        """The PromQL each refresh sends (defaults with the policy's overrides)."""
        return dict(self._queries)

    def set_spec(self, spec: TelemetrySpec) -> None:
        """Adopt a changed policy; the cache is dropped when the queries change."""
        with self._lock:
            queries = effective_queries(spec)
            if queries != self._queries:
                self._cached, self._cached_at = None, -math.inf
            self._spec, self._queries = spec, queries

    def reading(self) -> TelemetryReading:
        """The cached reading while younger than the TTL, else a fresh one."""
        with self._lock:
            now = self._clock()
            # Never serve a cached reading past the staleness bound, whatever the TTL says.
            ttl = min(self._spec.cache_ttl_seconds, self._spec.staleness_seconds)
            if self._cached is None or now - self._cached_at >= ttl:
                self._cached = self._refresh_locked()
                self._cached_at = now
            reading = self._cached
        newest = reading.newest_sample
        self.metrics.age.set(now - newest if newest is not None else math.inf)
        return reading

    def snapshot(self, identities: Mapping[PodRef, DraftIdentity]) -> TelemetrySnapshot:
        """The decision core's snapshot, acceptance joined through the pods' draft identities."""
        return build_snapshot(self.reading(), identities)

    def refresh(self) -> TelemetryReading:
        """Query now, ignoring the cache (and refill it)."""
        with self._lock:
            self._cached = self._refresh_locked()
            self._cached_at = self._clock()
            return self._cached

    # ---- internals ----------------------------------------------------------------------------

    def _refresh_locked(self) -> TelemetryReading:
        started = time.monotonic()
        now = self._clock()
        timeout = self._spec.query_timeout_seconds
        answers: dict[Query, bytes | Gap] = {}
        pool = self._pool
        if pool is not None and self._pool_size != len(self._queries):
            pool.shutdown(wait=False)  # the policy changed the set of queries
            pool = None
        if pool is None:
            pool = cf.ThreadPoolExecutor(max_workers=len(self._queries), thread_name_prefix="promql")
        self._pool, self._pool_size = None, len(self._queries)
        finished = False
        try:
            futures = {q: pool.submit(self._fetch, q, promql, timeout) for q, promql in self._queries.items()}
            done, _ = cf.wait(futures.values(), timeout=timeout + 0.25)
            for q, fut in futures.items():
                if fut in done:
                    answers[q] = fut.result()
                else:
                    fut.cancel()
                    answers[q] = Gap(q.value, GapCode.TIMEOUT, f"no answer within {timeout:g}s")
            finished = len(done) == len(futures)
        finally:
            # The pool is kept while every query came back (starting ten threads per refresh was a tenth
            # of a small refresh's CPU); after a query stuck past the deadline it is dropped, and the
            # next refresh gets fresh threads, never blocked behind the stuck one.
            if finished:
                self._pool = pool
            else:
                pool.shutdown(wait=False, cancel_futures=True)
        # The answers are decoded here, not in the fetching threads: one thread, no I/O, so the
        # collector can be paused for exactly the burst of short-lived objects (see gcpause.py).
        try:
            with collector_paused():
                results = {q: a if isinstance(a, Gap) else _parse(q, a) for q, a in answers.items()}
                reading = self._assemble(results, now)
                del results  # freed by reference counting while the collector still waits
        finally:
            # Counted beside the refresh they belong to: counted before the decoding, a scrape taken in
            # between saw a refresh's queries without the refresh (12 queries per refresh in a phase).
            for q in self._queries:
                self.metrics.queries.labels(query=q.value).inc()
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

    def _assemble(self, results: Mapping[Query, QueryResult], now: float) -> TelemetryReading:
        return assemble(results, now, self._spec.staleness_seconds, self._carry)

    def _session(self) -> requests.Session:
        try:
            return self._sessions.get_nowait()
        except queue.Empty:
            session = requests.Session()
            session.mount(self.url, HTTPAdapter(max_retries=_NO_RETRY))
            # What requests looks up in the environment on every request (proxies, CA bundle, ~/.netrc),
            # looked up once per session: the look-ups were a fifth of the CPU of a small query.
            session.proxies.update(requests.utils.get_environ_proxies(self.url))
            bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            if bundle:
                session.verify = bundle
            session.auth = requests.utils.get_netrc_auth(self.url)
            session.trust_env = False
            return session

    def _fetch(self, q: Query, promql: str, timeout: float) -> bytes | Gap:
        """One query's answer, the body of an HTTP 200; every failure becomes a Gap (this runs in a
        worker thread: never raise)."""
        session = self._session()
        try:
            # Prometheus' own evaluation timeout too, so it gives up when we do.
            resp = session.get(
                f"{self.url}/api/v1/query",
                params={"query": promql, "timeout": f"{timeout:g}s"},
                headers=self._headers,
                timeout=timeout,
                stream=True,
            )
            # Read in large chunks: `.content` reads 10 KB at a time, 300 reads for the 3 MB of one
            # refresh at 4,000 GPUs. `iter_content` maps read errors as `.content` does.
            body = b"".join(resp.iter_content(_READ_CHUNK))
        except requests.exceptions.Timeout:
            return Gap(q.value, GapCode.TIMEOUT, f"no answer within {timeout:g}s from {self.url}")
        except requests.exceptions.ConnectionError as exc:
            if _is_timeout(exc):  # urllib3 wraps read timeouts when retries are off
                return Gap(q.value, GapCode.TIMEOUT, f"no answer within {timeout:g}s from {self.url}")
            return Gap(q.value, GapCode.CONNECTION, f"cannot reach {self.url}: {_short(exc)}")
        except Exception as exc:  # never crash the caller on telemetry
            return Gap(q.value, GapCode.ERROR, f"{type(exc).__name__}: {_short(exc)}")
        finally:
            self._sessions.put(session)
        if resp.status_code != 200:
            return Gap(q.value, GapCode.HTTP, _short(f"HTTP Status Code {resp.status_code} ({body!r})"))
        return body


def _parse(q: Query, body: bytes) -> QueryResult:
    """One answer validated from its bytes (`parse_response`: prometheus-api-client's `custom_query`
    decodes it into dicts first, which cost as much again at 4,000 GPUs, docs/scale.md); never raises."""
    try:
        samples, gap = parse_response(q.value, body)
    except Exception as exc:  # never crash the caller on telemetry
        return Gap(q.value, GapCode.ERROR, f"{type(exc).__name__}: {_short(exc)}")
    return gap if gap is not None else samples


_READ_CHUNK = 1 << 20
# One try per refresh: a retry would blow the deadline; the next refresh is the retry.
_NO_RETRY = Retry(total=0, connect=0, read=False, redirect=0, status=0, other=0)


def _is_timeout(exc: BaseException) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, urllib3.exceptions.NewConnectionError | ConnectionRefusedError):
            return False  # urllib3 derives "refused" from ConnectTimeoutError, for history
        if isinstance(cur, TimeoutError | urllib3.exceptions.TimeoutError):
            return True
        reason = getattr(cur, "reason", None)
        if isinstance(reason, BaseException):
            cur = reason
            continue
        cur = cur.args[0] if cur.args and isinstance(cur.args[0], BaseException) else cur.__cause__
    return False


def _short(exc: BaseException | str, limit: int = 200) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
