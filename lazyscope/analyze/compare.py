"""A comparison: one workload run under several padding policies (and backends), side by side.

Pure (no I/O): :func:`compare_row` reads one run into a :class:`CompareRow`; :class:`Comparison`
holds the rows with the workload they ran, its :meth:`Comparison.verdict` (which policy is
fastest end to end and by how much, :class:`Verdict`) and the ratios; ``to_json()`` is
``compare.json`` (``from_json`` reads it back, files of the previous release included).

Each row: ``policy`` (``backend/policy`` with several backends), ``path``, ``status``, ``steps``,
``compiles``, ``distinct_graphs``, ``distinct_shapes`` (padded lengths seen), ``compile_s``,
``execute_s``, ``wall_s``, ``real_tokens``, ``computed_tokens``, ``tokens_per_s`` (real tokens
over wall time *including* compilation), ``padding_efficiency`` (real / computed tokens),
``buckets`` (as the run recorded them), ``resolved`` (what ``auto`` / ``bucket:auto`` ran),
``ran`` (the concrete policy every run recorded: two rows that ran the same one differ only by
the machine's noise, :meth:`Comparison.same_runs`), ``graph_memory`` (the bytes of its largest
compiled graph, where the backend measures them), ``cumulative_wall_s`` and
``cumulative_tokens`` (per step, for the plot; kept out of tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from lazyscope.analyze.report import build_report
from lazyscope.model import Run

#: compare.json's layout: 2 adds ``verdict`` and ``resolved``
COMPARE_SCHEMA = 2
_OMIT_NONE = {"omit_none": True}
_OMIT_EMPTY = {"omit_empty": True}


@dataclass(frozen=True)
class CompareRow:
    """One policy's run, measured (module docstring)."""

    policy: str
    path: str
    status: str
    steps: int = 0
    compiles: int = 0
    distinct_graphs: int = 0
    distinct_shapes: int = 0
    compile_s: float = 0.0
    execute_s: float = 0.0
    wall_s: float = 0.0
    real_tokens: int = 0
    computed_tokens: int = 0
    tokens_per_s: float = 0.0
    padding_efficiency: float | None = None
    buckets: list[int] | None = None
    resolved: str | None = field(default=None, metadata=_OMIT_NONE)
    ran: str | None = field(default=None, metadata=_OMIT_NONE)
    backend: str | None = field(default=None, metadata=_OMIT_NONE)
    error: str | None = field(default=None, metadata=_OMIT_NONE)
    cumulative_wall_s: tuple[float, ...] = ()
    #: real tokens processed by the end of each step (the plot's y against cumulative_wall_s)
    cumulative_tokens: tuple[int, ...] = field(default=(), metadata=_OMIT_EMPTY)
    #: real tokens/s of each repeat (``compare --repeat N``); the row is the median one
    repeats: tuple[float, ...] = field(default=(), metadata=_OMIT_EMPTY)
    #: the padded lengths its batches took (sorted): rows with the same ran the same shapes
    shapes: tuple[int, ...] = field(default=(), metadata=_OMIT_EMPTY)
    #: the bytes of its largest compiled graph (its report's peak graph); None: not measured
    graph_memory: int | None = field(default=None, metadata=_OMIT_NONE)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.tokens_per_s > 0

    @property
    def name(self) -> str:
        """The policy without its backend."""
        return self.policy.split("/", 1)[1] if self.backend else self.policy

    @classmethod
    def json_upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Rows of the first compare.json files may lack a path or a status (they were ok)."""
        data.setdefault("path", "")
        data.setdefault("status", "ok")
        return data


def compare_row(policy: str, run: Run) -> CompareRow:
    """The comparison numbers of one run."""
    report = build_report(run)
    s = report.summary
    peak = report.memory.peak if report.memory is not None else None
    steps = run.steps
    real = sum(int(v) for v in steps.annotation("real_tokens").values())
    computed = sum(int(v) for v in steps.annotation("computed_tokens").values())
    cumulative = tuple(round(float(t), 6) for t in np.cumsum(steps.values("wall_s")))
    per_step = steps.annotation("real_tokens")
    tokens = tuple(int(t) for t in np.cumsum([int(per_step.get(i, 0)) for i in range(len(steps))]))
    wall = s.wall_seconds
    shapes = set(steps.annotation("seq_len").values())
    work = run.meta.run_info.workload
    resolved = work.resolved_policy if work.policy in ("auto", "bucket:auto") else None
    return CompareRow(
        policy=policy, path=str(run.path), status=s.status, steps=s.steps,
        compiles=s.compiles or 0, distinct_graphs=s.distinct_graphs,
        distinct_shapes=len(shapes), compile_s=s.compile_seconds or 0.0,
        execute_s=s.execute_seconds or 0.0, wall_s=wall, real_tokens=real,
        computed_tokens=computed, tokens_per_s=real / wall if wall > 0 else 0.0,
        padding_efficiency=real / computed if computed else None,
        buckets=work.buckets, resolved=resolved, ran=work.resolved_policy,
        cumulative_wall_s=cumulative, cumulative_tokens=tokens,
        shapes=tuple(sorted(int(v) for v in shapes)),
        graph_memory=peak.total if peak is not None else None,
    )


def compare_rows(named_runs: list[tuple[str, Run]]) -> list[CompareRow]:
    """One row per ``(policy, run)``, in the given order."""
    return [compare_row(name, run) for name, run in named_runs]


def failed_row(policy: str, path: str, error: str) -> CompareRow:
    """A row for a policy whose run could not be loaded at all."""
    return CompareRow(policy=policy, path=path, status="failed", error=error)


def ratios(rows: list[CompareRow], baseline: str = "longest") -> dict[str, float]:
    """Real-tokens/s of every policy over the baseline's (and over ``max``'s), when present."""
    by = {r.name: r for r in rows if r.tokens_per_s > 0}
    out: dict[str, float] = {}
    for base in (baseline, "max"):
        if base not in by:
            continue
        for name, r in by.items():
            if name != base and not (base == "max" and name == baseline):
                out[f"{name} / {base}"] = r.tokens_per_s / by[base].tokens_per_s
    return out


@dataclass(frozen=True)
class Verdict:
    """Which row is fastest end to end (real tokens/s, compilation included) and by how much:
    ``margins`` holds its speed over each other successful row whose difference is a win, best
    row first; ``noise`` the rows whose difference from it is not (they ran the same padded
    shapes, or differ by less than the run-to-run ``spread`` measured with repeats)."""

    best: CompareRow = field(metadata={"json": False})
    margins: tuple[tuple[str, float], ...] = field(metadata={"json": False})
    failed: tuple[str, ...] = ()
    noise: tuple[tuple[str, float], ...] = field(default=(), metadata={"json": False})
    #: the largest relative spread of a row's repeats (``compare --repeat N``); None: one run
    #: a row, not measured
    spread: float | None = None

    #: compare.json's ``verdict``: the best policy, its real tokens/s, its speed over each
    #: other row (``over``) and over the rows within noise (``noise``)
    JSON_EXTRA: ClassVar[dict[str, str]] = {"best": "best_policy", "tokens_per_s": "tokens_per_s",
                                            "over": "over", "noise": "noise_ratios"}

    @property
    def best_policy(self) -> str:
        return self.best.policy

    @property
    def tokens_per_s(self) -> float:
        return self.best.tokens_per_s

    @property
    def over(self) -> dict[str, float]:
        return dict(self.margins)

    @property
    def noise_ratios(self) -> dict[str, float]:
        return dict(self.noise)

    @property
    def runner_up(self) -> tuple[str, float] | None:
        return self.margins[0] if self.margins else None


def spread_of(rows: list[CompareRow]) -> float | None:
    """The largest relative spread ((max - min) / min) of a row's repeats; None without
    repeats."""
    spreads = [max(r.repeats) / min(r.repeats) - 1 for r in rows
               if len(r.repeats) > 1 and min(r.repeats) > 0]
    return max(spreads) if spreads else None


@dataclass(frozen=True)
class Comparison:
    """A ``lazyscope compare``: the workload (``scenario``, ``steps``, ``args``), the
    ``policies`` and ``backends`` asked for, one :class:`CompareRow` per run, the ``ratios``
    and the policies that ``failed``."""

    scenario: str
    steps: int
    args: list[str]
    policies: list[str]
    rows: list[CompareRow]
    backends: list[str] = field(default_factory=list)
    ratios: dict[str, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    repeat: int = 1
    schema_version: int = COMPARE_SCHEMA

    JSON_EXTRA: ClassVar[dict[str, str]] = {"verdict": "verdict"}

    @property
    def verdict(self) -> Verdict | None:
        """The fastest row and its margins over the others; None when no run succeeded."""
        ok = sorted((r for r in self.rows if r.ok), key=lambda r: -r.tokens_per_s)
        if not ok:
            return None
        best = ok[0]
        spread = spread_of(ok)
        same = next((g for g in self.same_runs() if best in g), [])
        margins: list[tuple[str, float]] = []
        noise: list[tuple[str, float]] = []
        for r in ok[1:]:
            ratio = best.tokens_per_s / r.tokens_per_s
            in_noise = r in same or (spread is not None and ratio - 1 <= spread)
            (noise if in_noise else margins).append((r.policy, ratio))
        return Verdict(best, tuple(margins), tuple(self.failed), tuple(noise), spread)

    def same_runs(self) -> list[list[CompareRow]]:
        """Groups of successful rows (two or more) that ran the same thing on the same backend:
        the same concrete policy (``auto`` resolved to one of the others), or the same padded
        shapes with the same real tokens in them, whatever their names (``pow2`` and ``max``
        both padding every batch to 256). Their difference in real tokens/s is measurement
        noise. Packing fills the same shapes with more real tokens: the same graphs, not the
        same work."""
        groups: dict[tuple[Any, ...], list[CompareRow]] = {}
        for r in self.rows:
            if not r.ok:
                continue
            key: tuple[Any, ...] = ((r.backend, "shapes", r.shapes, r.real_tokens) if r.shapes
                                    else (r.backend, "ran", r.ran) if r.ran else ())
            if key:
                groups.setdefault(key, []).append(r)
        return [g for g in groups.values() if len(g) > 1]

    def row(self, policy: str) -> CompareRow | None:
        return next((r for r in self.rows if r.policy == policy), None)

    @classmethod
    def json_upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """compare.json as any release wrote it (schema 1 has no verdict or ``resolved``:
        computed again / left empty; the first files no ``policies``); ValueError when it is no
        comparison."""
        if not isinstance(data.get("rows"), list):
            raise ValueError("not a lazyscope comparison (no rows)")
        if not data.get("policies"):
            data["policies"] = [r.get("policy") for r in data["rows"] if isinstance(r, dict)]
        data["repeat"] = data.get("repeat") or 1
        data.setdefault("schema_version", 1)
        return data
