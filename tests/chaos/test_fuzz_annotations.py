"""Fuzz the claims through the real API server (issue 14): at least 2,000 hostile annotation sets (any
Unicode scalar value, values up to 256 KiB) reach the operator as pod-template annotations of Kueue
Workloads, and it answers every one and stays up.

Each Workload carries 8 pod sets (Kueue's maximum), each with its own annotation set, so 2,000 sets take
250 Workloads: every pod set's annotations are parsed, checked for a pinned config and for conflicts with
our podSetUpdates, and the first one's claims are decided on. Workloads go in waves over a pool with room
for a whole wave, and each wave is deleted once answered (a Workload object has no pods to bind, so its
reservation would otherwise hold its node).
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

import pytest
from kubernetes import client

from tests.chaos.conftest import Chaos
from tests.chaos.harness import add_nodes_bulk, log_records, setup_private_queue, wait_queue_active
from tests.e2e.pool import NodeDef, decisions, our_entry, workloads
from tests.harness.wait import wait_until

pytestmark = pytest.mark.chaos

SETS = int(os.environ.get("SOVEREIGNSPEC_API_FUZZ_SETS", "2000"))
POD_SETS = 8
WAVE = 25  # Workloads per wave; the pool has a free 8-GPU node for each
MAX_VALUE_BYTES = 256 * 1024  # Kubernetes' limit on an object's annotations
MAX_WORKLOAD_BYTES = 700_000  # the whole Workload must stay under etcd's 1.5 MiB request limit
FINAL = ("Ready", "Retry", "Rejected")

KEYS = ["class", "target-model", "draft-model", "spec-method", "tpot-slo-ms", "expected-batch",
        "speculative-config", "decision", "speculative"]  # fmt: skip
SPECIAL = ["", "NaN", "nan", "inf", "-inf", "-1", "0", "0.0001", "1e309", "9" * 40, " 50 ", "50ms",
           "\uff15\uff10", "interactive", "batch", "INTERACTIVE", "eagle3", "ngram", "mtp", "draft_model",
           "medusa", "\x00", "\u200b", "\u202e50", "\U0001f4a5" * 10, "llama-\U0001f999-8b",
           '{"method":"eagle3","num_speculative_tokens":64}', '{"method":"ngram","num_speculative_tokens":2}',
           '{"num_speculative_tokens":true}', "[[[", '{"num_speculative_tokens":3,'
           '"num_speculative_tokens_per_batch_size":[[1,8,99]]}']  # fmt: skip
PLANES = [(0x20, 0x7E), (0x00, 0x1F), (0xA0, 0x2FF), (0x300, 0x36F), (0x590, 0x6FF), (0x2000, 0x206F),
          (0x4E00, 0x9FFF), (0xE000, 0xF8FF), (0xFFF0, 0xFFFF), (0x10000, 0x1FAFF), (0x1F300, 0x1FAFF),
          (0x20000, 0x2FFFF), (0xE0000, 0xE007F), (0xF0000, 0x10FFFF)]  # fmt: skip
"""Code point ranges drawn from: ASCII, controls (NUL included), Latin, combining marks, RTL scripts,
general punctuation (zero-width, bidi controls), CJK, private use, specials, astral planes up to U+10FFFF
(emoji, tags, supplementary private use). Surrogates are no scalar values and cannot be sent."""


def _text(rng: random.Random, n: int) -> str:
    lo, hi = rng.choice(PLANES)
    if rng.random() < 0.3:  # a mix of planes
        return "".join(chr(rng.randint(*rng.choice(PLANES))) for _ in range(n))
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n))


def _value(rng: random.Random, budget: int) -> str:
    r = rng.random()
    if r < 0.35:
        v = rng.choice(SPECIAL)
    elif r < 0.955:
        v = _text(rng, rng.choice([1, 3, 8, 40, 65, 300, 1025]))
    elif r < 0.995:
        v = _text(rng, rng.choice([4096, 40_000]))
    else:  # at the limit: 256 KiB of UTF-8
        unit = rng.choice(["x", "\u00e9", "\u4e2d", "\U0001f999"])
        v = unit * (MAX_VALUE_BYTES // len(unit.encode()))
    # cut to the room left, on a character boundary: values at the limit stay at the limit
    return v.encode()[: max(budget, 0)].decode(errors="ignore")


def _annotation_set(rng: random.Random, budget: int) -> dict[str, str]:
    ann: dict[str, str] = {}
    for _ in range(rng.randint(1, 7)):
        r = rng.random()  # mostly claims; a pinned config or a decision name now and then (each refuses)
        key = (
            f"sovereignspec.io/{rng.choice(KEYS[:6])}" if r < 0.88
            else f"sovereignspec.io/{rng.choice(KEYS[6:])}" if r < 0.93
            else f"example.com/k{rng.randint(0, 9)}"
        )  # fmt: skip
        # Kubernetes (and Kueue's Workload webhook) limit keys and values together to 256 KiB
        spent = sum(len(k.encode()) + len(v.encode()) for k, v in ann.items()) + len(key.encode())
        room = min(MAX_VALUE_BYTES - spent, budget - spent)
        if room <= 0:
            break
        ann[key] = _value(rng, room)
    return ann


def _workload(name: str, ns: str, rng: random.Random) -> tuple[dict[str, Any], int]:
    budget = MAX_WORKLOAD_BYTES
    pod_sets = []
    for i in range(POD_SETS):
        ann = _annotation_set(rng, max(budget, 0))
        budget -= sum(len(v.encode()) for v in ann.values())
        pod_sets.append(
            {
                "name": f"ps{i}",
                "count": 1,
                "template": {
                    "metadata": {"annotations": ann},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:v0.33.0",
                                "resources": {
                                    "requests": {"nvidia.com/gpu": "1"},
                                    "limits": {"nvidia.com/gpu": "1"},
                                },
                            }
                        ],
                    },
                },
            }
        )
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "labels": {"fuzz-wave": name.split("-")[1]}},
        "spec": {"queueName": "lq", "podSets": pod_sets},
    }
    return body, MAX_WORKLOAD_BYTES - budget


def test_hostile_annotation_sets_through_the_api_server_are_all_answered(chaos: Chaos) -> None:
    pool = chaos.pool
    add_nodes_bulk(pool, [NodeDef(f"n{i}", "DE", gpus=8) for i in range(WAVE + 5)])
    setup_private_queue(pool, chaos.controller, gpu_quota=8 * (WAVE + 5))
    ns = pool.tenant("fuzz")
    op = chaos.operator()
    op.start()
    op.wait_ready()
    wait_queue_active(pool)
    co = client.CustomObjectsApi(pool.api)
    rng = random.Random(20261201)
    total = (SETS + POD_SETS - 1) // POD_SETS
    answers: dict[str, str] = {}
    sent_bytes, biggest, t0 = 0, 0, time.monotonic()
    for wave in range(0, total, WAVE):
        names = [f"w-{wave // WAVE:03d}-{i:02d}" for i in range(min(WAVE, total - wave))]
        for name in names:
            body, size = _workload(name, ns, rng)
            sent_bytes += size
            values = [
                v
                for ps in body["spec"]["podSets"]
                for v in ps["template"]["metadata"]["annotations"].values()
            ]
            biggest = max([biggest, *(len(v.encode()) for v in values)])
            co.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads", body)

        def all_answered(names: list[str] = names) -> bool:
            # The operator records each answer in a SpeculationDecision, then writes our entry; Kueue
            # resets a Rejected or Retry entry when it deactivates or requeues the workload, so the
            # durable record is read too (both come from the same write path).
            for w in workloads(pool, ns):
                entry = our_entry(w, pool.name) or {}
                if entry.get("state") in FINAL:
                    answers.setdefault(w["metadata"]["name"], entry["state"])
            for d in decisions(pool, ns):
                state = (d.get("status") or {}).get("state")
                if state in FINAL:
                    answers.setdefault(d["metadata"]["name"], state)
            return all(n in answers for n in names)

        wait_until(
            all_answered, timeout=120, interval=0.5, what=f"wave {wave // WAVE} answered",
            describe=lambda names=names: f"{[n for n in names if n not in answers]}\n{op.log_tail(2000)}",
        )  # fmt: skip
        assert op.running, op.log_tail()
        co.delete_collection_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", ns, "workloads", label_selector=f"fuzz-wave={wave // WAVE:03d}"
        )
    took = time.monotonic() - t0
    states: dict[str, int] = {}
    for s in answers.values():
        states[s] = states.get(s, 0) + 1
    figures = {
        "workloads": len(answers),
        "annotationSets": len(answers) * POD_SETS,
        "seconds": round(took, 1),
    }
    figures |= {"sentMiB": round(sent_bytes / 2**20, 1), "largestValueBytes": biggest, "states": states}
    print(json.dumps(figures))
    assert len(answers) * POD_SETS >= SETS
    assert op.running and op.starts == 1, op.log_tail()
    crashes = [r for r in log_records(op) if "exc" in r]
    assert not crashes, crashes[0]["exc"][-2000:]
