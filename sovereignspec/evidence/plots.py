"""PNG plots of the standard suite (matplotlib, imported only here): speed-up vs slack, TPOT CDFs,
neighbour SLO violations caused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def write_plots(raw: dict[str, Any], out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    fig, ax = plt.subplots(figsize=(6, 4))
    pts = raw["micro"]["c2"]
    for k in (1, 3, 5):
        ax.plot([p["slack"] for p in pts], [p[f"k{k}"] for p in pts], "o-", label=f"k={k}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("true slack of the plain step (memory floor / step time)")
    ax.set_ylabel("measured speed-up")
    ax.set_title("H100, batch 8, EAGLE-3: speed-up vs slack")
    ax.legend()
    files.append(str(out / "speedup_vs_slack.png"))
    fig.savefig(files[-1], dpi=110, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    sweep = raw["micro"]["budgetSweep"]
    ax.plot([p["slack"] for p in sweep], [p["fixedK5"] for p in sweep], "o-", label="fixed k=5")
    ax.plot([p["slack"] for p in sweep], [p["slackAware"] for p in sweep], "s-", label="decide() budget")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("true slack of the plain step (memory floor / step time)")
    ax.set_ylabel("measured speed-up")
    ax.set_title("H100, batch 64, growing co-located load: fixed k vs slack-aware budget")
    ax.legend()
    files.append(str(out / "budget_vs_fixed_k.png"))
    fig.savefig(files[-1], dpi=110, bbox_inches="tight")
    plt.close(fig)
    for scen in ("mixed", "saturated", "stress"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, s in raw[scen].runs.items():
            act = s.active & (s.tokens > 0)
            v, w = s.tpot[act] * 1000, s.tokens[act]
            o = np.argsort(v)
            ax.plot(v[o], np.cumsum(w[o]) / w.sum(), label=name)
        ax.set_xscale("log")
        ax.set_xlabel("TPOT (ms, token-weighted)")
        ax.set_ylabel("CDF")
        ax.set_title(f"TPOT CDF, {scen}")
        ax.legend(fontsize=7)
        files.append(str(out / f"tpot_cdf_{scen}.png"))
        fig.savefig(files[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(raw["mixed"].table)
    x = np.arange(len(names))
    for i, scen in enumerate(("mixed", "saturated", "stress")):
        ax.bar(x + 0.27 * i, [raw[scen].table.get(n, {}).get("sloViolationsCaused", 0) for n in names], 0.27,
               label=scen)  # fmt: skip
    ax.set_xticks(x + 0.27, names, rotation=30, fontsize=7)
    ax.set_ylabel("neighbour SLO-violation windows caused")
    ax.legend()
    files.append(str(out / "violations.png"))
    fig.savefig(files[-1], dpi=110, bbox_inches="tight")
    plt.close(fig)
    return files
