"""PNG plots of the multi-seed suite (matplotlib, imported only here): speed-up vs slack, the fixed-k
sweep against decide()'s budget, and goodput with 95 % intervals per pool and policy."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sovereignspec.evidence.suite import SuiteRun


def write_plots(run: SuiteRun, out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    fig, ax = plt.subplots(figsize=(6, 4))
    c2 = [m["c2"] for m in run.micros]
    for k in (1, 3, 5):
        ys = np.array([[p[f"k{k}"] for p in pts] for pts in c2])
        xs = np.array([[p["slack"] for p in pts] for pts in c2]).mean(axis=0)
        ax.errorbar(xs, ys.mean(axis=0), yerr=ys.std(axis=0), fmt="o-", label=f"k={k}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("true slack of the plain step (memory floor / step time)")
    ax.set_ylabel("measured speed-up (mean over seeds)")
    ax.set_title("H100, batch 8, EAGLE-3: speed-up vs slack")
    ax.legend()
    files.append(str(out / "speedup_vs_slack.png"))
    fig.savefig(files[-1], dpi=110, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    sweep = run.micros[0]["budgetSweep"]
    for key in ("1", "3", "5", "8"):
        ax.plot([p["slack"] for p in sweep], [p["fixedK"][key] for p in sweep], "o-", label=f"fixed k={key}")
    ax.plot([p["slack"] for p in sweep], [p["slackAware"] for p in sweep], "s-k", label="decide() budget")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("true slack of the plain step (memory floor / step time)")
    ax.set_ylabel("measured speed-up")
    ax.set_title("H100, batch 64, growing co-located load: fixed k vs slack-aware budget")
    ax.legend(fontsize=7)
    files.append(str(out / "budget_vs_fixed_k.png"))
    fig.savefig(files[-1], dpi=110, bbox_inches="tight")
    plt.close(fig)
    for pool, body in run.result["pools"].items():
        fig, ax = plt.subplots(figsize=(7, 4))
        names = list(body["policies"])
        share = [body["policies"][n]["bestKnownShare"] for n in names]
        m = np.array([s["mean"] for s in share])
        lo = m - np.array([s["ci95"][0] for s in share])
        hi = np.array([s["ci95"][1] for s in share]) - m
        ax.bar(np.arange(len(names)), m, yerr=[lo, hi], capsize=3)
        ax.axhline(0.97, color="red", lw=0.8)
        ax.set_ylim(max(0.0, float(m.min()) - 0.05), 1.01)
        ax.set_xticks(np.arange(len(names)), names, rotation=40, ha="right", fontsize=7)
        ax.set_ylabel("share of the per-seed best known goodput")
        ax.set_title(f"{pool}: mean and 95 % CI over {len(run.result['seeds'])} seeds")
        files.append(str(out / f"best_known_share_{pool}.png"))
        fig.savefig(files[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    return files
