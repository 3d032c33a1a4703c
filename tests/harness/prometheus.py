"""Scrape targets for the test bed's Prometheus: file_sd JSON files in PROMETHEUS_TARGETS_DIR.

Prometheus re-reads that directory every 5s, so adding an endpoint (the telemetry simulator, the
operator) needs no restart. `reload()` forces a config reload through the lifecycle API."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from .cluster import LocalCluster

_SAFE = set("abcdefghijklmnopqrstuvwxyz0123456789-_")


def _target_file(cluster: LocalCluster, name: str) -> Path:
    if not name or set(name) - _SAFE:
        raise ValueError(f"target name {name!r}: use lowercase letters, digits, '-' and '_'")
    return cluster.prometheus_targets_dir / f"{name}.json"


def add_scrape_target(
    cluster: LocalCluster,
    name: str,
    targets: list[str],
    labels: dict[str, str] | None = None,
) -> Path:
    """Write `NAME.json` (atomically). `labels` may set `job` and `__metrics_path__`."""
    path = _target_file(cluster, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([{"targets": targets, "labels": {"job": name, **(labels or {})}}]))
    os.replace(tmp, path)
    return path


def remove_scrape_target(cluster: LocalCluster, name: str) -> None:
    _target_file(cluster, name).unlink(missing_ok=True)


def reload(cluster: LocalCluster, timeout: float = 10) -> None:
    """POST /-/reload (Prometheus runs with --web.enable-lifecycle)."""
    request = urllib.request.Request(f"{cluster.prometheus_url}/-/reload", method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        if response.status != 200:
            raise RuntimeError(f"Prometheus reload answered HTTP {response.status}")
