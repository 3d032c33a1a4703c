"""The assembly of issue 18 (`telemetry.assemble`, with its carry) gives exactly the reading of the one
before it (`reference_assemble`, main at 9ee1081): the same samples, the same gaps in the same order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sovereignspec.telemetry.assemble import Carry, QueryResult, assemble
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.parse import VectorSample, parse_response
from sovereignspec.telemetry.queries import Query
from tests.telemetry import reference_assemble
from tests.telemetry.prom_answers import NOW, answers

STALENESS = 60.0
GPU_QUERIES = (Query.TENSOR_ACTIVE, Query.FB_FREE, Query.GPU_FRESHNESS)
FRESHNESS = (Query.GPU_FRESHNESS, Query.ENGINE_FRESHNESS)


def parsed(bodies: dict[Query, bytes]) -> dict[Query, QueryResult]:
    out: dict[Query, QueryResult] = {}
    for q, body in bodies.items():
        samples, gap = parse_response(q.value, body)
        out[q] = gap if gap is not None else samples
    return out


def test_same_reading_on_the_scale_bench_answers() -> None:
    carry = Carry()
    for seed in (1, 2, 2, 3):  # values move, then stay (the carry's samples are served), then move
        results = parsed(answers(64, 24, seed=seed))
        new = assemble(results, NOW + 1, STALENESS, carry)
        assert new == reference_assemble.assemble(results, NOW + 1, STALENESS)
        assert len(new.gpus) == 64 and len(new.engines) == 24 and len(new.pod_acceptance) == 12
        assert not new.gaps


def test_same_reading_when_everything_is_stale() -> None:
    results = parsed(answers(16, 8))
    later = NOW + 3 * STALENESS
    assert assemble(results, later, STALENESS, Carry()) == reference_assemble.assemble(
        results, later, STALENESS
    )


# ---- generated answers: every label and value the assembly tells apart -----------------------------

HOSTS = st.sampled_from(["n1", "n2", ""])
LABEL_VALUES = st.sampled_from(["a", "b", "t", "u", ""])
TEXTS = st.sampled_from(
    ["0", "0.0", "-0.0", "0.4", "1", "1.5", "250", "-1", "NaN", "+Inf", "-Inf", "abc", "", "1e16", "2e7"]
)


@st.composite
def metrics(draw: st.DrawFn, q: Query) -> dict[str, str]:
    m: dict[str, str] = {}
    if q in GPU_QUERIES:
        for label in draw(st.sets(st.sampled_from(["Hostname", "hostname", "node"]), max_size=2)):
            m[label] = draw(HOSTS)
        if draw(st.booleans()) or not m:
            m["UUID"] = draw(st.sampled_from(["G1", "G2", "G3", ""]))
        if draw(st.integers(0, 4)) == 0:
            m["GPU_I_ID"] = draw(st.sampled_from(["1", "2", ""]))
            m["GPU_I_PROFILE"] = draw(st.sampled_from(["3g.40gb", ""]))
        if draw(st.booleans()):
            m["modelName"] = draw(st.sampled_from(["H100", "A100", ""]))
    if q not in GPU_QUERIES or (q is Query.TENSOR_ACTIVE and draw(st.booleans())):
        if draw(st.integers(0, 9)) > 0:
            m["namespace"] = draw(LABEL_VALUES)
        if draw(st.integers(0, 9)) > 0:
            m["pod"] = draw(LABEL_VALUES)
    if q not in GPU_QUERIES and draw(st.booleans()):
        m["model_name"] = draw(st.sampled_from(["llama", "qwen", ""]))
    if q is Query.SPEC_ACCEPTED_PER_POSITION:
        m["position"] = draw(st.sampled_from(["0", "1", "2", "3", "x", ""]))
    return m


@st.composite
def values(draw: st.DrawFn, q: Query) -> str:
    if q in FRESHNESS:
        age = draw(st.sampled_from([0.0, 1.0, 30.0, 59.0, 60.0, 61.0, 600.0, -10.0, -400.0]))
        return draw(st.sampled_from([f"{NOW - age:.3f}", f"{NOW - age:.3f}", "NaN", "0", "-5"]))
    if q is Query.SPEC_ACCEPTED_PER_POSITION or q is Query.SPEC_DRAFTS:
        return draw(st.sampled_from(["0", "10", "80", "100", "106", "200", "-1", "NaN", "1e16"]))
    return draw(TEXTS)


@st.composite
def results(draw: st.DrawFn) -> dict[Query, QueryResult]:
    out: dict[Query, QueryResult] = {}
    for q in Query:
        kind = draw(st.integers(0, 9))
        if kind == 0:
            out[q] = Gap(q.value, GapCode.EMPTY, "query returned no series")
        elif kind == 1:
            out[q] = Gap(q.value, GapCode.TIMEOUT, "no answer within 5s")
        else:
            rows = draw(st.lists(st.tuples(metrics(q), values(q)), max_size=8))
            out[q] = [VectorSample(metric=m, value=(NOW, v)) for m, v in rows]
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(results(), min_size=1, max_size=3))
def test_same_reading_on_generated_answers(refreshes: list[dict[Query, QueryResult]]) -> None:
    """Successive refreshes through one carry, so that kept and rebuilt samples are both checked."""
    carry = Carry()
    refs: dict[tuple[str, str], object] = {}
    for r in refreshes:
        new = assemble(r, NOW, STALENESS, carry)
        old = reference_assemble.assemble(r, NOW, STALENESS, refs)  # type: ignore[arg-type]
        assert new == old
        assert [g.code for g in new.gaps] == [g.code for g in old.gaps]
        assert set(carry.pod_refs) == set(refs)
