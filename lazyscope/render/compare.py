"""Rendering a comparison (``compare.json``'s dict) and a bucket advice dict.

``render_compare_text(result) -> str``: the table and the ratios.
``write_compare_png(result, path) -> Path``: bars (real tokens/s including compilation, with
compiles and padding efficiency annotated) next to cumulative wall time against step.
With ``result["backends"]`` (``compare --backends``) rows are ``backend/policy``: one table and
one picture across backends.
``render_advice_text(advice) -> str``: the advisor's table.
matplotlib is imported only inside the plotting function (Agg).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lazyscope.render.plots import figure

COMPARE_PNG = "compare.png"


def _eff(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def render_compare_text(result: dict[str, Any]) -> str:
    rows = result["rows"]
    args = " ".join(result.get("args") or [])
    backends = result.get("backends") or []
    w = max([16, *(len(r["policy"]) + 1 for r in rows)])
    what = "each backend x policy" if backends else "each policy"
    lines = [
        f"lazyscope compare: {result['scenario']} {args} ({result['steps']} steps, {what} "
        "in a fresh process)" + (f"; backends {', '.join(backends)}" if backends else ""),
        "",
        f"  {'backend/policy' if backends else 'policy':<{w}} {'compiles':>8} {'graphs':>6} {'compile s':>10} {'execute s':>10} "
        f"{'wall s':>8} {'real tok/s':>11} {'pad eff':>8}  status",
    ]
    for r in rows:
        status = r["status"] + (f": {r['error']}" if r.get("error") else "")
        lines.append(
            f"  {r['policy']:<{w}} {r['compiles']:>8} {r['distinct_graphs']:>6} "
            f"{r['compile_s']:>10.2f} {r['execute_s']:>10.2f} {r['wall_s']:>8.2f} "
            f"{r['tokens_per_s']:>11.0f} {_eff(r['padding_efficiency']):>8}  {status}"
        )
    buckets = [(r["policy"], r["buckets"]) for r in rows if r.get("buckets")]
    if buckets:
        lines += ["", "  buckets: " + "; ".join(f"{p} {b}" for p, b in buckets)]
    if result.get("ratios"):
        lines += ["", "  real tokens/s including compilation, ratios:"]
        kw = max([28, *(len(k) for k in result["ratios"])])
        lines += [f"    {k:<{kw}} {v:6.2f}x" for k, v in result["ratios"].items()]
    ok = [r for r in rows if r["status"] == "ok" and r["tokens_per_s"] > 0]
    if ok:
        best = max(ok, key=lambda r: r["tokens_per_s"])
        lines += ["", f"verdict: {best['policy']} is fastest end to end "
                  f"({best['tokens_per_s']:.0f} real tokens/s, {best['compiles']} compiles, "
                  f"padding efficiency {_eff(best['padding_efficiency'])})"]
    return "\n".join(lines) + "\n"


def write_compare_png(result: dict[str, Any], path: Path) -> Path:
    """Bars of real tokens/s (including compilation) per policy, and cumulative wall time
    against step for every policy. Returns ``path``."""

    rows = result["rows"]
    with figure(path, ncols=2, figsize=(11, 4.2)) as (fig, (ax1, ax2)):
        import matplotlib.pyplot as plt

        names = [r["policy"] for r in rows]
        tps = [r["tokens_per_s"] for r in rows]
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        bars = ax1.bar(range(len(rows)), tps, color=[colors[i % len(colors)] for i in range(len(rows))])
        for bar, r in zip(bars, rows, strict=True):
            ax1.annotate(f"{r['compiles']} compiles\neff {_eff(r['padding_efficiency'])}",
                         (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                         ha="center", va="bottom", fontsize=7)
        ax1.set_xticks(range(len(rows)), names, rotation=20, fontsize=8)
        ax1.set_ylabel("real tokens/s (including compilation)")
        ax1.margins(y=0.2)
        ax1.grid(axis="y", alpha=0.3)
        for i, r in enumerate(rows):
            ys = r["cumulative_wall_s"]
            ax2.plot(range(len(ys)), ys, label=r["policy"], color=colors[i % len(colors)],
                     marker=".", markersize=3, linewidth=1.2)
        ax2.set_xlabel("step")
        ax2.set_ylabel("cumulative wall time (s)")
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=8)
        per = "backend x policy" if result.get("backends") else "policy"
        fig.suptitle(f"{result['scenario']} {' '.join(result.get('args') or [])}: "
                     f"{result['steps']} steps per {per}", fontsize=9)
    return Path(path)


def _secs(v: float, calibrated: bool) -> str:
    return f"{v:8.1f} s" if calibrated else f"{v / 1e6:8.2f} Mu"


def render_advice_text(advice: dict[str, Any]) -> str:
    """The advisor's table: each K, then pow2 and pad-to-max, then alternatives that win."""
    cm = advice["cost_model"]
    cal = bool(cm["calibrated"])
    lines = [
        f"bucket advice: {advice['lengths']} sequence lengths, batch {advice['batch']}, "
        f"max length {advice['top']}, histogram of {advice['histogram_of']}, "
        f"horizon {advice['horizon']} steps",
        f"  cost per row = L + L^2/{cm['crossover']:.0f}; "
        + (f"calibrated on the run: {cm['unit_s'] * 1e6:.3f} us per unit, "
           f"{cm['compile_s']:.2f} s per compile, {cm['graphs_per_shape']:.1f} graphs per shape"
           if cal else "uncalibrated: times in million units (Mu), a compile priced as "
           "20 full-length steps"),
        "",
        f"  {'plan':<26} {'graphs':>6} {'pad eff':>8} {'execute':>11} {'compile':>11} "
        f"{'total':>11}  boundaries",
    ]

    def row(p: dict[str, Any], mark: str = "") -> str:
        b = p["boundaries"]
        bs = ",".join(str(x) for x in b) if len(b) <= 12 else f"{len(b)} boundaries"
        return (f"  {p['name'] + mark:<26} {p['graphs']:>6.0f} {p['padding_efficiency']:>8.2f} "
                f"{_secs(p['predicted_execute'], cal):>11} {_secs(p['predicted_compile'], cal):>11} "
                f"{_secs(p['predicted_total'], cal):>11}  {bs}")

    best = advice["best"]
    for p in advice["per_k"]:
        lines.append(row(p, "  <- best" if p is best or p == best else ""))
    lines.append(row(advice["pow2"]))
    lines.append(row(advice["max"]))
    wins = [a for a in advice["alternatives"] if a.get("wins")]
    for a in wins:
        lines.append(row(a, "  (would win)"))
    lines += ["", f"advice: {best['buckets']} bucket(s) {best['boundaries']} "
              f"(padding efficiency {best['padding_efficiency']:.2f}, "
              f"{best['graphs']:.0f} graph(s))"
              + (f"; better still: {', '.join(a['name'] for a in wins)}" if wins else "")]
    return "\n".join(lines) + "\n"
