"""Process wiring: logging, metrics and health servers, leader election, then the kopf controller."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket

import kopf
from kubernetes import client, config
from prometheus_client import REGISTRY, start_http_server

from sovereignspec.operator.collector import tune_collector
from sovereignspec.operator.decision_metrics import DecisionCollector
from sovereignspec.operator.health import HealthState, start_health_server
from sovereignspec.operator.leader import LeaseElector
from sovereignspec.operator.logs import configure_logging
from sovereignspec.operator.metrics import LEADER
from sovereignspec.operator.settings import OperatorSettings

log = logging.getLogger("sovereignspec.operator")


def load_api_client(settings: OperatorSettings) -> client.ApiClient:
    """kubeconfig when given (or $KUBECONFIG), else the in-cluster service account."""
    if settings.kubeconfig:
        os.environ["KUBECONFIG"] = settings.kubeconfig
    if os.environ.get("KUBECONFIG"):
        config.load_kube_config()
    else:
        config.load_incluster_config()
    cfg = client.Configuration.get_default_copy()
    cfg.connection_pool_maxsize = settings.api_concurrency  # one kept-alive connection per writer thread
    return client.ApiClient(cfg)


def run_operator(settings: OperatorSettings) -> int:
    configure_logging(settings.log_format, settings.log_level)
    try:
        return asyncio.run(_amain(settings))
    except config.ConfigException as exc:
        log.error("cannot reach the Kubernetes API: %s", exc)
        return 2


async def _amain(settings: OperatorSettings) -> int:
    from sovereignspec.operator.controller import Controller
    from sovereignspec.operator.handlers import build_registry

    tune_collector(settings.gc_young_threshold)  # everything is imported: freeze it
    api = load_api_client(settings)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    lost = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr=settings.bind_address)
    health = HealthState()
    runner = None
    if settings.health_port:
        runner = await start_health_server(health, settings.bind_address, settings.health_port)

    if settings.leader_election:
        identity = settings.identity or f"{socket.gethostname()}-{os.getpid()}"

        def on_lost() -> None:
            loop.call_soon_threadsafe(lost.set)
            loop.call_soon_threadsafe(stop.set)

        elector = LeaseElector(
            name=settings.lease_name,
            namespace=settings.lease_namespace,
            identity=identity,
            lease_duration=settings.lease_duration_seconds,
            renew_deadline=settings.lease_renew_deadline_seconds,
            retry_period=settings.lease_retry_period_seconds,
            on_lost=on_lost,
        )
        elector.start()
        health.ready = True  # a standby replica is healthy and ready to take over
        health.reasons = ["standby: waiting for the leader lease"]
        log.info("waiting for leader lease", extra={"identity": identity, "lease": settings.lease_name})
        while not elector.leading.is_set() and not stop.is_set():
            await asyncio.sleep(0.2)
        if stop.is_set():
            return 1 if lost.is_set() else 0

    LEADER.set(1)
    health.leading = True
    health.ready = False
    health.reasons = ["starting controller"]
    controller = Controller(settings=settings, api=api, health=health)
    registry = build_registry(controller)
    decision_metrics = DecisionCollector(lambda: controller.mirror.decisions.items)
    REGISTRY.register(decision_metrics)
    try:
        await kopf.operator(
            registry=registry,
            standalone=True,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            stop_flag=stop,
            memo=kopf.Memo(controller=controller),
        )
    finally:
        REGISTRY.unregister(decision_metrics)
        LEADER.set(0)
        await controller.close()
        if runner is not None:
            await runner.cleanup()
    return 1 if lost.is_set() else 0
