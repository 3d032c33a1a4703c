"""Validation and assembly of query results, without processes."""

from __future__ import annotations

import json
import math

import pytest

from sovereignspec.telemetry.assemble import Carry, QueryResult, assemble
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.parse import VectorSample, checked_value, in_range, parse_response, parse_vector
from sovereignspec.telemetry.queries import Query

NOW = 1_800_000_000.0


def vec(*rows: tuple[dict[str, str], float | str]) -> list[VectorSample]:
    return [VectorSample(metric=m, value=(NOW, str(v))) for m, v in rows]


def gpu(uuid: str, host: str = "n1", host_label: str = "Hostname", **extra: str) -> dict[str, str]:
    return {host_label: host, "UUID": uuid, "modelName": "NVIDIA H100 80GB HBM3", **extra}


def eng(pod: str, ns: str = "t", **extra: str) -> dict[str, str]:
    return {"namespace": ns, "pod": pod, "model_name": "llama", **extra}


def base_results(**over: QueryResult) -> dict[Query, QueryResult]:
    r: dict[Query, QueryResult] = {
        Query.TENSOR_ACTIVE: vec(
            (gpu("G1", pod="a", namespace="t"), 0.4),
            (gpu("G1", pod="b", namespace="t"), 0.4),  # time-slicing: same GPU, second pod
            (gpu("G2", host="n2", host_label="hostname"), 0.1),
        ),
        Query.FB_FREE: vec((gpu("G1"), 1000), (gpu("G2", host="n2", host_label="hostname"), 2000)),
        Query.GPU_FRESHNESS: vec(
            (gpu("G1"), NOW - 2), (gpu("G2", host="n2", host_label="hostname"), NOW - 3)
        ),
        Query.TPOT: vec((eng("a"), 0.02), (eng("b"), "NaN")),
        Query.RUNNING: vec((eng("a"), 5), (eng("b"), 0)),
        Query.RUNNING_MIN: vec((eng("a"), 3), (eng("b"), 0)),
        Query.WAITING: vec((eng("a"), 0), (eng("b"), 0)),
        Query.ENGINE_FRESHNESS: vec((eng("a"), NOW - 1), (eng("b"), NOW - 1)),
        Query.SPEC_DRAFTS: vec((eng("a"), 100)),
        Query.SPEC_DRAFT_TOKENS: vec((eng("a"), 300)),
        Query.SPEC_ACCEPTED_PER_POSITION: vec(
            (eng("a", position="0"), 80), (eng("a", position="1"), 60), (eng("a", position="2"), 40)
        ),
    }
    r.update(over)
    return r


def codes(reading_gaps: list[Gap], source: str | None = None) -> list[str]:
    return [g.code.value for g in reading_gaps if source is None or g.source == source]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ([NOW, "1"], "wrong_type"),  # a scalar
        ("abc", "wrong_type"),
        ({"resultType": "vector"}, "wrong_type"),
        ([{"metric": {}, "values": [[NOW, "1"]]}], "wrong_type"),  # a matrix
        ([{"metric": {"a": 1}, "value": [NOW, "1"]}], "wrong_type"),  # label not a string
        (None, "wrong_type"),
        ([], "empty"),
    ],
)
def test_parse_vector_rejects_other_shapes(raw: object, code: str) -> None:
    samples, gap = parse_vector("q", raw)
    assert samples == [] and gap is not None and gap.code.value == code and gap.source == "q"


def test_parse_vector_accepts_an_instant_vector() -> None:
    samples, gap = parse_vector("q", [{"metric": {"pod": "a"}, "value": [NOW, "0.5"]}])
    assert gap is None and samples[0]["metric"] == {"pod": "a"} and samples[0]["value"] == (NOW, "0.5")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("NaN", "nan"),
        ("+Inf", "inf"),
        ("-Inf", "inf"),
        ("-1", "negative"),
        ("1.5", "out_of_range"),
        ("x", "wrong_type"),
    ],
)
def test_checked_value_bad(text: str, code: str) -> None:
    v = checked_value("q", "s", text, 0.0, 1.0)
    assert isinstance(v, Gap) and v.code.value == code and "s" in v.detail


def test_checked_value_bounds() -> None:
    assert checked_value("q", "s", "1", 0.0, 1.0) == 1.0
    assert checked_value("q", "s", "0", 0.0, 1.0) == 0.0
    v = checked_value("q", "s", "0", 0.0, 1.0, low_open=True)
    assert isinstance(v, Gap) and v.code is GapCode.OUT_OF_RANGE


def test_assemble_groups_time_sliced_series_and_reads_both_host_labels() -> None:
    r = assemble(base_results(), NOW, 60)
    by_uuid = {g.uuid: g for g in r.gpus}
    assert by_uuid["G1"].node == "n1" and by_uuid["G2"].node == "n2"
    assert [p.name for p in by_uuid["G1"].pods] == ["a", "b"]
    assert by_uuid["G1"].tensor_active == 0.4 and by_uuid["G1"].fb_free_mib == 1000
    assert by_uuid["G2"].pods == []
    assert r.queries == len(Query)
    assert r.newest_sample == NOW - 1
    # Only the idle engine's NaN TPOT is missing.
    assert [(g.source, g.code.value) for g in r.gaps] == [("tpot", "nan")]
    eng_b = next(e for e in r.engines if e.pod == "b")
    assert eng_b.tpot_seconds is None and eng_b.running == 0 and eng_b.running_min == 0
    eng_a = next(e for e in r.engines if e.pod == "a")
    assert (eng_a.running, eng_a.running_min) == (5, 3)


def test_pod_references_are_kept_from_one_reading_to_the_next() -> None:
    carry = Carry()
    first = assemble(base_results(), NOW, 60, carry)
    assert set(carry.pod_refs) == {("t", "a"), ("t", "b")}
    g1 = next(g for g in first.gpus if g.uuid == "G1")
    again = assemble(base_results(), NOW, 60, carry)
    g1_again = next(g for g in again.gpus if g.uuid == "G1")
    assert g1_again == g1 and all(x is y for x, y in zip(g1_again.pods, g1.pods, strict=True))
    # A pod no longer named is forgotten: the table holds the last reading's pods only.
    moved = base_results()
    moved[Query.TENSOR_ACTIVE] = vec((gpu("G1", pod="c", namespace="t"), 0.4))
    third = assemble(moved, NOW, 60, carry)
    assert set(carry.pod_refs) == {("t", "c")}
    assert [p.name for p in next(g for g in third.gpus if g.uuid == "G1").pods] == ["c"]
    assert assemble(base_results(), NOW, 60) == assemble(base_results(), NOW, 60, Carry())


def test_unchanged_samples_are_kept_and_changed_ones_rebuilt() -> None:
    carry = Carry()
    first = assemble(base_results(), NOW, 60, carry)
    moved = base_results(
        **{Query.FB_FREE: vec((gpu("G1"), 1000), (gpu("G2", host="n2", host_label="hostname"), 5))}
    )
    moved[Query.RUNNING] = vec((eng("a"), 6), (eng("b"), 0))
    second = assemble(moved, NOW, 60, carry)
    g1, g2 = (next(g for g in r.gpus if g.uuid == "G2") for r in (first, second))
    assert g2.fb_free_mib == 5 and g1.fb_free_mib == 2000 and g1 is not g2
    assert next(g for g in second.gpus if g.uuid == "G1") is next(g for g in first.gpus if g.uuid == "G1")
    e_a, e_b = ({e.pod: e for e in r.engines} for r in (first, second))
    assert e_b["a"].running == 6 and e_a["a"] is not e_b["a"] and e_a["b"] is e_b["b"]
    # The window's fewest running requests alone moving rebuilds the sample too.
    dipped = base_results(**{Query.RUNNING_MIN: vec((eng("a"), 1), (eng("b"), 0))})
    third = assemble(dipped, NOW, 60, carry)
    e_c = {e.pod: e for e in third.engines}
    assert e_c["a"].running_min == 1 and e_c["a"].running == 5 and e_c["b"] is e_b["b"]
    # A sample kept is equal to one built afresh: the carry changes objects, never contents.
    assert second == assemble(moved, NOW, 60)
    # Stale now: the same series, older freshness; the kept object must not be served.
    later = assemble(moved, NOW + 120, 60, carry)
    assert all(g.tensor_active is None and g.fb_free_mib is None for g in later.gpus)


def test_assemble_mig_instances_are_separate_gpus() -> None:
    mig = {"GPU_I_PROFILE": "3g.40gb"}
    r = assemble(
        {
            Query.TENSOR_ACTIVE: vec(
                (gpu("G1", GPU_I_ID="1", **mig), 0.3), (gpu("G1", GPU_I_ID="2", **mig), 0.6)
            ),
            Query.GPU_FRESHNESS: vec(
                (gpu("G1", GPU_I_ID="1", **mig), NOW), (gpu("G1", GPU_I_ID="2", **mig), NOW)
            ),
        },
        NOW,
        60,
    )
    assert [(g.gpu_instance_id, g.mig_profile, g.tensor_active) for g in r.gpus] == [
        ("1", "3g.40gb", 0.3),
        ("2", "3g.40gb", 0.6),
    ]


def test_one_bad_series_spoils_its_gpu_only() -> None:
    r = assemble(
        base_results(
            **{
                Query.TENSOR_ACTIVE: vec(
                    (gpu("G1", pod="a", namespace="t"), 0.4),
                    (gpu("G1", pod="b", namespace="t"), "NaN"),
                    (gpu("G2", host="n2", host_label="hostname"), 0.1),
                )
            }
        ),
        NOW,
        60,
    )
    by_uuid = {g.uuid: g for g in r.gpus}
    assert by_uuid["G1"].tensor_active is None and [p.name for p in by_uuid["G1"].pods] == ["a", "b"]
    assert by_uuid["G2"].tensor_active == 0.1
    assert codes(r.gaps, "tensor_active") == ["nan"]


def test_stale_by_clock_and_missing_freshness() -> None:
    results = base_results(**{Query.GPU_FRESHNESS: vec((gpu("G1"), NOW - 500))})
    r = assemble(results, NOW, 60)
    by_uuid = {g.uuid: g for g in r.gpus}
    assert by_uuid["G1"].tensor_active is None and by_uuid["G1"].fb_free_mib is None
    assert by_uuid["G2"].tensor_active is None  # no freshness sample at all
    assert sorted(codes(r.gaps, "gpu_freshness")) == ["not_fresh", "stale"]


def test_freshness_from_the_future_is_out_of_range() -> None:
    r = assemble(base_results(**{Query.GPU_FRESHNESS: vec((gpu("G1"), NOW + 3600))}), NOW, 60)
    assert "out_of_range" in codes(r.gaps, "gpu_freshness")
    assert all(g.tensor_active is None for g in r.gpus)


def test_failed_query_is_one_gap_not_one_per_subject() -> None:
    down = Gap("gpu_freshness", GapCode.CONNECTION, "refused")
    r = assemble(base_results(**{Query.GPU_FRESHNESS: down}), NOW, 60)
    assert codes(r.gaps, "gpu_freshness") == ["connection"]
    assert all(g.tensor_active is None for g in r.gpus)


def test_missing_labels_and_duplicates() -> None:
    r = assemble(
        base_results(
            **{
                Query.FB_FREE: vec((gpu("G1"), 1), (gpu("G1"), 2), ({"UUID": "G9"}, 3)),
                Query.RUNNING: vec((eng("a"), 1), (eng("a"), 2), ({"pod": "x"}, 1)),
            }
        ),
        NOW,
        60,
    )
    assert sorted(codes(r.gaps, "fb_free")) == ["duplicate", "missing_label"]
    assert sorted(codes(r.gaps, "running")) == ["duplicate", "missing_label"]
    assert next(g for g in r.gpus if g.uuid == "G1").fb_free_mib is None
    assert next(e for e in r.engines if e.pod == "a").running is None


def test_acceptance_per_pod() -> None:
    r = assemble(base_results(), NOW, 60)
    (a,) = r.pod_acceptance
    assert (a.pod, a.drafts, a.draft_tokens, a.accepted_per_position, a.model_name) == (
        "a",
        100,
        300,
        (80, 60, 40),
        "llama",
    )


def test_acceptance_empty_is_normal_but_failure_is_not() -> None:
    empty = Gap("spec_drafts", GapCode.EMPTY, "query returned no series")
    r = assemble(
        base_results(
            **{
                Query.SPEC_DRAFTS: empty,
                Query.SPEC_DRAFT_TOKENS: Gap("spec_draft_tokens", GapCode.EMPTY, "none"),
                Query.SPEC_ACCEPTED_PER_POSITION: Gap("spec_accepted_per_position", GapCode.EMPTY, "none"),
            }
        ),
        NOW,
        60,
    )
    assert r.pod_acceptance == [] and codes(r.gaps) == ["nan"]
    r = assemble(base_results(**{Query.SPEC_DRAFTS: Gap("spec_drafts", GapCode.TIMEOUT, "slow")}), NOW, 60)
    assert r.pod_acceptance == [] and "timeout" in codes(r.gaps, "spec_drafts")


@pytest.mark.parametrize(
    ("positions", "code"),
    [
        ((("0", 80), ("2", 40)), "inconsistent"),  # position 1 missing
        ((("0", 180),), "out_of_range"),  # more accepted than drafts
        ((("x", 10),), "missing_label"),
        ((("0", "NaN"),), "nan"),
    ],
)
def test_doubtful_acceptance_is_dropped(positions: tuple[tuple[str, float | str], ...], code: str) -> None:
    rows = vec(*((eng("a", position=p), v) for p, v in positions))
    r = assemble(base_results(**{Query.SPEC_ACCEPTED_PER_POSITION: rows}), NOW, 60)
    assert r.pod_acceptance == []
    assert code in codes(r.gaps)


def test_stale_engine_drops_its_acceptance() -> None:
    r = assemble(
        base_results(**{Query.ENGINE_FRESHNESS: vec((eng("a"), NOW - 999), (eng("b"), NOW))}), NOW, 60
    )
    assert r.pod_acceptance == []
    a = next(e for e in r.engines if e.pod == "a")
    assert a.tpot_seconds is None and a.running is None
    assert "stale" in codes(r.gaps, "engine_freshness")


def test_values_are_never_zero_when_missing() -> None:
    r = assemble({q: Gap(q.value, GapCode.CONNECTION, "down") for q in Query}, NOW, 60)
    assert r.gpus == [] and r.engines == [] and r.pod_acceptance == []
    assert len(r.gaps) == len(Query) and r.newest_sample is None
    assert not math.isnan(r.time.timestamp())


def _answer(result: object, result_type: str = "vector", status: str = "success") -> bytes:
    return json.dumps({"status": status, "data": {"resultType": result_type, "result": result}}).encode()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_answer([NOW, "1"], "scalar"), "wrong_type"),
        (_answer([{"metric": {}, "values": [[NOW, "1"]]}], "matrix"), "wrong_type"),
        (_answer([{"metric": {"a": 1}, "value": [NOW, "1"]}]), "wrong_type"),  # label not a string
        (_answer([]), "empty"),
        (b"<html>not json</html>", "bad_response"),
        (b'{"status": "success"}', "bad_response"),  # no data
    ],
)
def test_parse_response_gaps_match_parse_vector(body: bytes, code: str) -> None:
    samples, gap = parse_response("q", body)
    assert samples == [] and gap is not None and gap.code.value == code and gap.source == "q"


def test_parse_response_reads_the_vector_from_bytes() -> None:
    rows = [
        {"metric": {"pod": "a", "UUID": "G1"}, "value": [NOW, "0.5"]},
        {"metric": {}, "value": [NOW, "2"]},
    ]
    raw = json.loads(_answer(rows))
    raw["warnings"] = ["ignored"]
    fast, gap = parse_response("q", json.dumps(raw).encode())
    slow, slow_gap = parse_vector("q", rows)
    assert gap is None and slow_gap is None and fast == slow
    assert fast[0]["metric"] == {"pod": "a", "UUID": "G1"} and fast[0]["value"] == (NOW, "0.5")


@pytest.mark.parametrize(
    "text", ["0", "1", "0.5", "-0.0", "-1e-9", "1.0000001", "NaN", "+Inf", "-Inf", "x", ""]
)
@pytest.mark.parametrize("low_open", [False, True])
def test_in_range_accepts_exactly_what_checked_value_accepts(text: str, low_open: bool) -> None:
    fast = in_range(text, 0.0, 1.0, low_open=low_open)
    slow = checked_value("q", "s", text, 0.0, 1.0, low_open=low_open)
    assert (fast is None) == isinstance(slow, Gap)
    assert fast is None or fast == slow
