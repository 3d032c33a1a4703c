"""`sovereignspec decide -f SCENARIO -o json|table`: run the exact decision core on a scenario file.

Scenario (YAML or JSON): `workload` (a kueue.x-k8s.io/v1beta2 Workload with status), `objects`
(Namespaces, Nodes, Pods, ResourceFlavors, AdmissionChecks, SpeculationPolicies,
SovereigntyPolicies, SpeculationDecisions, other Workloads), optional `telemetry` (a
TelemetrySnapshot; omitted or stale = missing), and `now` (the clock; required, so that a dry run is
reproducible). Exit codes: 0 decided (Ready, Retry, Rejected or Pending/not actionable), 1 nothing
could be decided (malformed scenario, no check of ours, missing policy), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

NAME = "decide"
HELP = "Dry-run the admission decision for a Workload described in a scenario file."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", required=True, help="scenario file (YAML or JSON); '-' for stdin")
    parser.add_argument("-o", "--output", choices=["json", "table"], default="json")


def load_scenario(text: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"scenario is not valid YAML/JSON{where}: {problem}") from None
    if not isinstance(data, dict):
        raise ValueError("scenario must be a mapping with workload, objects, telemetry and now")
    unknown = sorted(set(data) - {"workload", "objects", "telemetry", "now", "description", "expect"})
    if unknown:
        raise ValueError(f"scenario has unknown top-level keys: {', '.join(unknown)}")
    if not isinstance(data.get("workload"), dict):
        raise ValueError("scenario.workload is missing (a kueue.x-k8s.io/v1beta2 Workload)")
    if "now" not in data:
        raise ValueError("scenario.now is missing (the RFC 3339 clock the decision uses)")
    if data.get("objects") is not None and not isinstance(data["objects"], list):
        raise ValueError("scenario.objects must be a list of Kubernetes objects")
    return data


def decide_scenario(data: dict[str, Any]) -> Any:
    """Parse a loaded scenario and decide; returns the Decision (raises ValueError subclasses)."""
    from sovereignspec.policy.decide import decide
    from sovereignspec.policy.parse import build_snapshot, parse_telemetry, parse_time, parse_workload
    from sovereignspec.policy.request import request_for

    workload = parse_workload(data["workload"])
    telemetry = parse_telemetry(data["telemetry"]) if data.get("telemetry") is not None else None
    from sovereignspec.model.cluster import WorkloadRef

    snapshot = build_snapshot(
        data.get("objects") or [],
        telemetry,
        extra_workloads=[WorkloadRef(namespace=workload.namespace, name=workload.name, uid=workload.uid)],
    )
    now = parse_time(data["now"], "scenario.now")
    request, policies = request_for(workload, snapshot)
    return decide(request, snapshot, policies, now)


def render_table(out: dict[str, Any]) -> str:
    spec = out["speculative"]
    rows = [
        ("WORKLOAD", f"{out['namespace']}/{out['workload']}"),
        ("STATE", out["state"]),
        ("REASON", out["reason"]),
        ("NODE", out["node"] or "-"),
        ("MODE", "on" if spec["enabled"] else "off"),
        ("METHOD", spec.get("method") or "-"),
        ("K", str(spec["numSpeculativeTokens"])),
        ("SCHEDULE", " ".join(f"[{a}-{b}]:{k}" for a, b, k in spec["schedule"]) or "-"),
        ("SPEEDUP", "-" if out["predictedSpeedup"] is None else f"{out['predictedSpeedup']:.3f}"),
        ("SLACK", "-" if out["slack"] is None else f"{out['slack']:.3f}"),
        ("ACCEPTANCE", f"{out['acceptance'].get('source')} alpha={out['acceptance'].get('alpha')}"),
        ("MESSAGE", out["message"]),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    if out["neighbours"]:
        lines.append("NEIGHBOURS")
        for n in out["neighbours"]:
            lines.append(
                f"  {n['namespace']}/{n['pod']}  margin={n.get('marginBefore')}  slowdown={n.get('slowdown')}"
            )
    if out["reasons"]:
        lines.append("REASONS")
        lines.extend(f"  {r['type']}: {r['message']}" for r in out["reasons"])
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        decision = decide_scenario(load_scenario(text))
    except ValueError as exc:  # ParseError, RequestError, pydantic-free messages
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = decision.output()
    text = json.dumps(out, indent=2, sort_keys=False) if args.output == "json" else render_table(out)
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader left; not an error of ours
        sys.stdout = None
    return 0
