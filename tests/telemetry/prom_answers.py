"""Synthetic Prometheus answers to the reader's ten default queries, in the scale bench's shape.

`answers(gpus, engines, seed)` gives the HTTP body of each query as Prometheus writes it (labels sorted,
values as strings, timestamps with millisecond precision): 8-GPU nodes spelling the host label both
ways, one engine per GPU for the first `engines` GPUs, every other engine speculating with k = 2..5.
Another seed moves every value and keeps the series, as successive refreshes see them. For the
equivalence tests and `bench/telemetry_refresh_ab.py`.
"""

from __future__ import annotations

import json
import random

from sovereignspec.telemetry.queries import Query

NOW = 1_800_000_000.0
PRODUCTS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA H200")
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
Row = dict[str, object]


def answers(gpus: int, engines: int, seed: int = 1, now: float = NOW) -> dict[Query, bytes]:
    rnd = random.Random(seed)
    res: dict[Query, list[Row]] = {q: [] for q in Query}
    pods = {g: (f"tenant-{g % 20}", f"llm-{g:05d}") for g in range(min(engines, gpus))}

    def row(q: Query, metric: dict[str, str], value: str) -> None:
        res[q].append({"metric": dict(sorted(metric.items())), "value": [round(now, 3), value]})

    for g in range(gpus):
        n = g // 8
        gpu = {
            "Hostname" if n % 2 else "hostname": f"kwok-node-{n:04d}",
            "UUID": f"GPU-{g:08x}-1f2e-4d3c-8b9a-{g:012x}",
            "modelName": PRODUCTS[n % len(PRODUCTS)],
        }
        pod = pods.get(g)
        row(
            Query.TENSOR_ACTIVE,
            gpu | ({"namespace": pod[0], "pod": pod[1]} if pod else {}),
            repr(rnd.random()),
        )
        row(Query.FB_FREE, gpu, str(rnd.randint(1_000, 80_000)))
        row(Query.GPU_FRESHNESS, gpu, f"{now - rnd.random() * 4:.3f}")
    for j, (ns, pod_name) in enumerate(pods.values()):
        eng = {"namespace": ns, "pod": pod_name}
        model = eng | {"model_name": MODEL}
        row(Query.TPOT, eng, repr(0.01 + rnd.random() / 50))
        running = rnd.randint(0, 30)
        row(Query.RUNNING, model, str(running))
        row(Query.RUNNING_MIN, model, str(rnd.randint(0, running)))
        row(Query.WAITING, model, str(rnd.randint(0, 3)))
        row(Query.ENGINE_FRESHNESS, eng, f"{now - rnd.random() * 4:.3f}")
        if j % 2 == 0:
            k = 2 + j % 4
            drafts = float(rnd.randint(100, 1_000))
            row(Query.SPEC_DRAFTS, model, repr(drafts))
            row(Query.SPEC_DRAFT_TOKENS, model, repr(drafts * k))
            for pos in range(k):
                row(
                    Query.SPEC_ACCEPTED_PER_POSITION,
                    model | {"position": str(pos)},
                    repr(drafts * 0.8 ** (pos + 1)),
                )
    return {
        q: json.dumps(
            {"status": "success", "data": {"resultType": "vector", "result": r}}, separators=(",", ":")
        ).encode()
        for q, r in res.items()
    }
