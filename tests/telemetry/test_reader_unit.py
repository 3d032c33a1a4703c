"""The reader against canned HTTP answers and a closed port: no Prometheus process needed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from prometheus_client import CollectorRegistry

from sovereignspec.api.telemetry_spec import TelemetrySpec
from sovereignspec.telemetry.gaps import GapCode
from sovereignspec.telemetry.metrics import TelemetryMetrics
from sovereignspec.telemetry.queries import Query, default_queries
from sovereignspec.telemetry.reader import PrometheusReader
from tests.telemetry.promproc import free_port

SPEC = TelemetrySpec(query_timeout_seconds=1.0, cache_ttl_seconds=10)
Answer = Callable[[str], tuple[int, Any]]


class _Server(ThreadingHTTPServer):
    """The reader connects ten queries at once; the standard library's listen backlog of 5 drops SYNs in
    such a burst on a loaded machine, and the kernel's 1 s retransmit then reads as a query timeout."""

    request_queue_size = 128
    daemon_threads = True


@pytest.fixture
def fake_prometheus() -> Iterator[Callable[[Answer], str]]:
    servers: list[_Server] = []

    def start(answer: Answer) -> str:
        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                q = parse_qs(urlparse(self.path).query)["query"][0]
                status, body = answer(q)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        srv = _Server(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def ok(result: Any, result_type: str = "vector") -> tuple[int, Any]:
    return 200, {"status": "success", "data": {"resultType": result_type, "result": result}}


def test_unreachable_prometheus_is_missing_with_a_reason() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    reg = CollectorRegistry()
    reader = PrometheusReader(url, SPEC, metrics=TelemetryMetrics(reg))
    started = time.monotonic()
    snap = reader.snapshot({})
    assert time.monotonic() - started < SPEC.query_timeout_seconds + 0.5
    assert snap.gpus == [] and snap.engines == [] and snap.acceptance == []
    assert {g.source for g in snap.missing} == {q.value for q in Query}
    assert all(g.reason.startswith("connection: ") for g in snap.missing)
    assert (
        reg.get_sample_value(
            "sovereignspec_prometheus_errors_total", {"query": "tpot", "reason": "connection"}
        )
        == 1
    )
    assert reg.get_sample_value("sovereignspec_telemetry_age_seconds") == float("inf")


def test_wrong_types_and_http_errors(fake_prometheus: Callable[[Answer], str]) -> None:
    def answer(q: str) -> tuple[int, Any]:
        if "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE[" in q:
            return ok([1.0, "3"], "scalar")
        if "DCGM_FI_DEV_FB_FREE" in q:
            return ok([{"metric": {}, "values": [[1.0, "3"]]}], "matrix")
        if "request_time_per_output_token" in q:
            return 500, {"status": "error", "error": "boom"}
        if "num_requests_running)" in q and "timestamp" not in q:
            return 200, b"<html>not json</html>"
        return ok([])

    reader = PrometheusReader(fake_prometheus(answer), SPEC)
    snap = reader.snapshot({})
    by_source = {g.source: g.reason for g in snap.missing}
    assert by_source["tensor_active"].startswith("wrong_type")
    assert by_source["fb_free"].startswith("wrong_type")
    assert by_source["tpot"].startswith("http: HTTP Status Code 500")
    assert by_source["running"].startswith("bad_response")
    assert by_source["gpu_freshness"].startswith("empty")


def test_all_queries_go_out_in_parallel_with_the_policy_window(
    fake_prometheus: Callable[[Answer], str],
) -> None:
    seen: list[str] = []
    lock = threading.Lock()
    inflight = [0, 0]  # now, most at once

    def answer(q: str) -> tuple[int, Any]:
        with lock:
            seen.append(q)
            inflight[0] += 1
            inflight[1] = max(inflight[1], inflight[0])
        time.sleep(0.3)
        with lock:
            inflight[0] -= 1
        return ok([])

    spec = SPEC.model_copy(update={"window": "7m", "tpot_quantile": 0.5, "query_timeout_seconds": 20.0})
    reader = PrometheusReader(fake_prometheus(answer), spec)
    reading = reader.reading()
    # Not one after the other: several queries were in the server at once (counted, not timed, so a
    # loaded machine cannot fail it).
    assert inflight[1] >= 3, inflight
    assert reading.queries == len(Query) == len(seen)
    assert sum("[7m]" in q for q in seen) == 6  # tensor, TPOT, fewest running, three spec-decode counters
    assert any(q.startswith("histogram_quantile(0.5,") for q in seen)
    reader.reading()
    assert len(seen) == len(Query)  # cached


def test_set_spec_with_new_queries_drops_the_cache(fake_prometheus: Callable[[Answer], str]) -> None:
    count = [0]
    lock = threading.Lock()  # the fake server answers the parallel queries on several threads

    def answer(q: str) -> tuple[int, Any]:
        with lock:
            count[0] += 1
        return ok([])

    # A generous deadline: this is about the cache, and on a loaded CI machine a 1 s deadline let a
    # query give up before the fake server even counted it (9 == 10).
    spec = SPEC.model_copy(update={"query_timeout_seconds": 20.0})
    reader = PrometheusReader(fake_prometheus(answer), spec)
    first = reader.reading()
    assert all(g.code != GapCode.TIMEOUT for g in first.gaps), first.gaps
    reader.set_spec(spec)
    reader.reading()
    assert count[0] == len(Query)
    reader.set_spec(spec.model_copy(update={"window": "5m"}))
    reader.reading()
    assert count[0] == 2 * len(Query)


@pytest.fixture
def trickling_prometheus() -> Iterator[tuple[str, list[str], threading.Event]]:
    """Answers every query at once with an empty vector, except the first FB-free query: its body comes
    one byte every 0.2 s, so the reading thread stays stuck without ever hitting a read timeout. Records
    each request's Accept-Encoding."""
    encodings: list[str] = []
    stop = threading.Event()
    trickled = threading.Event()
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()

    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            encodings.append(self.headers.get("Accept-Encoding", ""))
            q = parse_qs(urlparse(self.path).query)["query"][0]
            slow = "DCGM_FI_DEV_FB_FREE" in q and not trickled.is_set()
            if slow:
                trickled.set()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not slow:
                self.wfile.write(body)
                return
            for i in range(len(body)):
                if stop.wait(0.2):
                    return
                self.wfile.write(body[i : i + 1])

        def log_message(self, *args: Any) -> None:
            pass

    srv = _Server(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", encodings, stop
    stop.set()
    srv.shutdown()
    srv.server_close()


def test_a_stuck_query_times_out_and_the_next_refresh_gets_fresh_threads(
    trickling_prometheus: tuple[str, list[str], threading.Event],
) -> None:
    """The fetching threads are kept between refreshes only while every query comes back: a query stuck
    past the deadline must not hold up the next refresh behind it."""
    url, _, _ = trickling_prometheus
    # 3 s, not 1: the second refresh's ten fresh connections must each come back within it on a loaded
    # CI machine; the trickled body takes 14 s, so the first refresh still gets stuck.
    spec = SPEC.model_copy(update={"query_timeout_seconds": 3.0, "cache_ttl_seconds": 0})
    reader = PrometheusReader(url, spec)
    first = reader.refresh()
    assert [g.code for g in first.gaps if g.source == Query.FB_FREE.value] == [GapCode.TIMEOUT], first.gaps
    assert reader._pool is None  # the stuck thread's pool was let go
    second = reader.refresh()  # the stuck thread still reads: fresh threads answer every query
    assert second.gaps and all(g.code is GapCode.EMPTY for g in second.gaps), second.gaps
    pool = reader._pool
    assert pool is not None
    reader.refresh()
    assert reader._pool is pool  # kept while every query comes back


def test_answers_are_asked_for_uncompressed_unless_the_caller_says_otherwise(
    trickling_prometheus: tuple[str, list[str], threading.Event],
) -> None:
    url, encodings, stop = trickling_prometheus
    stop.set()  # no trickling here
    spec = SPEC.model_copy(update={"query_timeout_seconds": 20.0})
    PrometheusReader(url, spec).refresh()
    PrometheusReader(url, spec, headers={"accept-encoding": "gzip"}).refresh()
    assert encodings == ["identity"] * len(Query) + ["gzip"] * len(Query), encodings


def test_tpot_statistic_picks_the_query() -> None:
    hist = "vllm:request_time_per_output_token_seconds"
    quantile = default_queries(TelemetrySpec())[Query.TPOT]
    assert quantile.startswith("histogram_quantile(0.9,") and f"{hist}_bucket[2m]" in quantile
    peak = default_queries(TelemetrySpec(tpot_statistic="PeakMean"))[Query.TPOT]
    assert f"rate({hist}_sum[60s])" in peak and f"rate({hist}_count[60s])" in peak
    assert peak.endswith("[2m:30s])")
    capped = default_queries(TelemetrySpec(tpot_statistic="PeakMean", window="30s"))[Query.TPOT]
    assert "_sum[30s]" in capped and capped.endswith("[30s:15s])")  # the span never exceeds the window
