"""Active/standby HA with a coordination.k8s.io Lease: only the lease holder runs the controller.

The elector runs in a daemon thread (the kubernetes client's leader election is synchronous). When the
lease is lost the process stops its controller and exits, so the pod restarts as a follower: a
controller that might be acting on stale leadership never keeps writing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

log = logging.getLogger(__name__)


class LeaseElector:
    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: int,
        renew_deadline: int,
        retry_period: int,
        on_lost: Callable[[], None],
    ) -> None:
        self.identity = identity
        self.leading = threading.Event()
        self._on_lost = on_lost
        lock = LeaseLock(name, namespace, identity)
        self._config = electionconfig.Config(
            lock,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            onstarted_leading=self._started,
            onstopped_leading=self._stopped,
        )
        self._thread = threading.Thread(target=self._run, name="lease-elector", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            leaderelection.LeaderElection(self._config).run()
        except Exception:  # the elector must never die silently: treat as a lost lease
            log.exception("leader election failed")
            self._stopped()

    def _started(self) -> None:
        log.info("acquired leader lease", extra={"identity": self.identity})
        self.leading.set()

    def _stopped(self) -> None:
        log.warning("leader lease lost", extra={"identity": self.identity})
        self.leading.clear()
        self._on_lost()
