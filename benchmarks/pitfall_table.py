"""The pitfall table: every planted mistake under ``tests/programs/pitfalls`` traced by the
real CLI (each in a fresh process), its report judged against the marked line; then every
healthy program under ``tests/programs/healthy`` traced and checked with
``lazyscope check`` (defaults).

    python benchmarks/pitfall_table.py                 # both tables
    python benchmarks/pitfall_table.py --only varying_seq_len,clean --jobs 2

Exit 0 when every pitfall is ``exact`` and every healthy program has no finding and passes
``check``; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.programs import healthy, pitfalls  # noqa: E402


def _lazyscope(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                     else "")
    return subprocess.run([sys.executable, "-m", "lazyscope", *args], env=env,
                          capture_output=True, text=True, timeout=900)


def trace(path: Path, out: Path, options: list[str] | None = None) -> tuple[dict | None, str]:
    """Trace ``path`` into ``out``; its JSON report (None on failure) and an error line."""
    proc = _lazyscope("trace", *(options or []), "--out", str(out), "--force", "--no-views",
                      str(path))
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["?"])[-1]
    rep = _lazyscope("report", str(out), "--format", "json")
    if rep.returncode != 0:
        return None, (rep.stderr.strip().splitlines() or ["?"])[-1]
    return json.loads(rep.stdout), ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated names (pitfalls or healthy)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here")
    args = ap.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    base = args.out or Path(tempfile.mkdtemp(prefix="lazyscope-pitfalls-"))
    names = [n for n in pitfalls.PITFALLS if not only or n in only]
    good = [n for n in healthy.HEALTHY if not only or n in only]
    ok = True

    def one_pitfall(name: str) -> tuple[str, str, str]:
        report, err = trace(pitfalls.script(name), base / "pitfalls" / name,
                            pitfalls.trace_args(name))
        if report is None:
            return name, "-", f"failed: {err}"
        return (name, *pitfalls.judge(name, report))

    def one_healthy(name: str) -> tuple[str, str, str, int]:
        out = base / "healthy" / name
        report, err = trace(healthy.script(name), out)
        if report is None:
            return name, f"failed: {err}", "", -1
        check = _lazyscope("check", str(out))
        found = ", ".join(f"{f['kind']} {Path(f['file']).name}:{f['line']}"
                          for f in report["findings"]) or "none"
        return name, found, report["verdict"], check.returncode

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(one_pitfall, names))
        hrows = list(pool.map(one_healthy, good))
    if rows:
        print(f"{'script':<24} {'kind':<15} {'expected':<26} {'reported':<26} verdict")
        for name, reported, verdict in rows:
            kind = pitfalls.PITFALLS[name] or "(none)"
            line = pitfalls.expected_line(name)
            expected = f"{name}.py:{line}" if line else "-"
            print(f"{name:<24} {kind:<15} {expected:<26} {reported:<26} {verdict}")
            ok &= verdict == "exact"
        exact = sum(v == "exact" for _, _, v in rows)
        print(f"\n{exact}/{len(rows)} exact\n")
    if hrows:
        print(f"{'healthy program':<24} {'findings':<30} {'check':<6} verdict")
        for name, found, verdict, code in hrows:
            print(f"{name:<24} {found:<30} {'exit ' + str(code):<6} {verdict}")
            ok &= found == "none" and code == 0
    print(f"\nruns kept in {base}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
