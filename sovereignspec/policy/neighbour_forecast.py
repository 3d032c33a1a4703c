"""The neighbour forecast: the SLO margin a co-located engine keeps if its own batch rises, read from the
telemetry window it was measured over (docs/decision.md, "The idle scenario with a neighbour forecast").

A neighbour's margin is measured over the last window, and its load can rise after a decision. The
forecast batch is the reading plus as much as the engine dipped below it in the window
(`running + (running - running_min)`): an engine whose batch swings is expected to swing up by as much
as it was seen to swing down. The margin at that batch (`speedup.margin_at_slack`, through the engine's
own step curve) is never above the measured one. Only the idle-scenario budget reads it
(`conditions.NeighbourTable.bounds(forecast=True)`); the conservative budget keeps the measured margin.
"""

from __future__ import annotations

from sovereignspec.model.speedup import margin_at_slack


def forecast_batch(running: float, running_min: float | None) -> float:
    """The batch a neighbour may rise to: as far above its reading as it dipped below it."""
    if running_min is None or running_min >= running:
        return running
    return running + (running - running_min)


def forecast_margin(margin: float, sigma: float, sigma_at_forecast: float) -> float:
    """The neighbour's margin at its forecast batch, never above the measured `margin` (a forecast that
    lowers the batch, or a curve that cannot tell, leaves it as measured)."""
    if sigma <= 0.0:
        return margin
    return min(margin, margin_at_slack(margin, sigma, sigma_at_forecast))
