"""`sovereignspec explain NAMESPACE/WORKLOAD`: why a workload got its speculation mode and its node.

Reads the workload's SpeculationDecision (same name, same namespace) from the cluster, or from a file
with `-f`, and prints the inputs, S_real for every k at the expected batch, the vLLM schedule, the
neighbours with their SLO margins and the ranked candidate nodes. Everything shown comes from the
decision's status: the explanation is what the operator recorded, never a re-computation.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NAME = "explain"
HELP = "Explain the SpeculationDecision of a workload (inputs, S_real per k, schedule, neighbours, node)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target", metavar="NAMESPACE/WORKLOAD", help="the Kueue Workload (its decision has its name)"
    )
    p.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, then in-cluster)")
    p.add_argument("-f", "--file", help="read the SpeculationDecision from this YAML/JSON file instead")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")


def run(args: argparse.Namespace) -> int:
    import yaml
    from pydantic import ValidationError

    from sovereignspec.api.speculation_decision import SpeculationDecision
    from sovereignspec.cli.explain_render import render

    namespace, sep, workload = str(args.target).partition("/")
    if not sep or not namespace or not workload or "/" in workload:
        print(f"sovereignspec explain: expected NAMESPACE/WORKLOAD, got {args.target!r}", file=sys.stderr)
        return 2
    try:
        raw = (
            _from_file(Path(args.file), yaml)
            if args.file
            else _from_cluster(args.kubeconfig, namespace, workload)
        )
    except LookupError as exc:
        print(f"sovereignspec explain: {exc}", file=sys.stderr)
        return 1
    except (OSError, yaml.YAMLError, ValueError) as exc:
        print(f"sovereignspec explain: cannot read the decision: {exc}", file=sys.stderr)
        return 2
    raw = {k: v for k, v in raw.items() if k in ("apiVersion", "kind", "metadata", "spec", "status")}
    raw["metadata"] = {k: v for k, v in (raw.get("metadata") or {}).items() if k in ("name", "namespace")}
    try:
        decision = SpeculationDecision.model_validate(raw)
    except ValidationError as exc:
        print(
            f"sovereignspec explain: not a SpeculationDecision this version understands: {exc}",
            file=sys.stderr,
        )
        return 2
    if args.output == "json":
        print(json.dumps(decision.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))
    else:
        print(render(decision, f"{namespace}/{workload}"))
    return 0


def _from_file(path: Path, yaml: Any) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected one object")
    return data


def _from_cluster(kubeconfig: str | None, namespace: str, workload: str) -> dict[str, Any]:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        else:
            try:
                config.load_kube_config()  # type: ignore[no-untyped-call]
            except config.ConfigException:
                config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException as exc:
        raise ValueError(f"no usable kubeconfig: {exc}") from exc
    api = client.CustomObjectsApi()
    try:
        obj = api.get_namespaced_custom_object(
            "sovereignspec.io", "v1alpha1", namespace, "speculationdecisions", workload
        )
    except ApiException as exc:
        if exc.status == 404:
            raise LookupError(
                f"no SpeculationDecision {namespace}/{workload}: the workload does not exist, "
                "is not admitted through a SovereignSpec AdmissionCheck, or has not been decided yet "
                "(kubectl get speculationdecisions -A)"
            ) from None
        raise ValueError(f"API server answered {exc.status} {exc.reason}") from None
    except HTTPError as exc:
        raise ValueError(f"cannot reach the API server: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError("unexpected answer from the API server")
    return obj
