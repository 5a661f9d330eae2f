"""Is the advice's predicted gain the gain a user gets? advise -> emit -> paste -> trace ->
check -> diff on three programs written the way people write them, one after another on a quiet
machine (a timing benchmark: never run beside other work):

* ``text_classifier``: ``(tokens, label)`` items, a ``pad_sequence`` collate (the
  ``--no-model-changes`` advice, pasted as the loader);
* ``causal_lm``: documents of varying length, a ``pad_sequence`` collate, a decoder that takes
  ``position_ids`` and a mask (the advice as it is: packed rows where they win, pasted as the
  loader);
* ``hf_classifier``: a Hugging Face ``Trainer`` with ``DataCollatorWithPadding`` (the
  advisor's ``data_collator = Bucketed(data_collator, [...])``: the program's own collator
  wrapped, pasted as the collator).

For each: trace the program as it is for N steps; ``lazyscope advise RUN --horizon S`` (S: the
steps the run recorded, the run the user does: the same data), its prediction of the recommended plan's real tokens/s over the
run's own policy; ``advise --emit`` pasted into the program; trace that for the plan's steps
(the same data: packed rows take fewer steps); ``check`` both; ``diff``'s measured real
tokens/s (compiles included) B/A. The gain is within 20% of the prediction, and the emitted
code's first snippet is the plan ranked first, or the script exits 1.

    PJRT_DEVICE=CPU python benchmarks/advice_gain.py [--out DIR] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "tests" / "programs"
TOLERANCE = 0.20

#: name -> (program, its arguments, steps, advise options, how the advice is pasted)
CASES = {
    "text_classifier": ("text_classifier.py", [], 24, ["--no-model-changes"], "loader"),
    "causal_lm": ("causal_lm.py", [], 24, [], "loader"),
    "hf_classifier": ("hf_classifier.py", [], 16, [], "data_collator"),
}


def lazyscope(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PJRT_DEVICE": "CPU",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    cmd = [sys.executable, "-m", "lazyscope", *args]
    print("$ lazyscope " + " ".join(args), flush=True)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)


def must(proc: subprocess.CompletedProcess[str], *ok: int) -> str:
    if proc.returncode not in (ok or (0,)):
        sys.exit(f"exit {proc.returncode}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def run_case(name: str, out: Path) -> dict:
    program, args, steps, options, paste = CASES[name]
    path = PROGRAMS / program
    base = out / name / "as_written"
    must(lazyscope("trace", "--out", str(base), "--no-views", str(path), *args,
                   "--steps", str(steps)))
    # the horizon is the steps the run recorded (a Trainer's first barrier, before its first
    # step, is one more): diff measures the runs over all their steps
    sys.path.insert(0, str(REPO))
    from lazyscope.store import load_run

    horizon = str(len(load_run(base).steps))
    advice = json.loads(must(lazyscope("advise", str(base), "--horizon", horizon,
                                       "--format", "json", *options)))
    plan = advice["recommended"]
    ran = next(p for p in advice["plans"] if p["kind"] == "longest")
    predicted = plan["predicted_tokens_per_s"] / ran["predicted_tokens_per_s"]
    emitted = must(lazyscope("advise", str(base), "--horizon", horizon, "--emit", *options))
    # the first snippet is the plan ranked first, its prediction beside it
    leads = emitted.splitlines()[0].startswith(f"# lazyscope advise: {plan['name']} -- predicted ")
    if paste == "loader":
        pasted = out / name / "loader.py"
        pasted.write_text(emitted)
        extra = ["--loader", str(pasted)]
    else:
        found = re.search(r"data_collator\s*=\s*(Bucketed\(data_collator, \[[^\]]*\]\))",
                          emitted)
        if not found:
            sys.exit(f"{name}: no data_collator= line in the emitted advice:\n{emitted}")
        extra = ["--data-collator", found.group(1)]
    after = out / name / "advised"
    plan_steps = max(1, round(plan["steps"]))
    must(lazyscope("trace", "--out", str(after), "--no-views", str(path), *args, *extra,
                   "--steps", str(plan_steps)))
    before_check = lazyscope("check", str(base)).returncode
    after_check = lazyscope("check", str(after)).returncode
    diff = json.loads(must(lazyscope("diff", str(base), str(after), "--format", "json")))
    metrics = {m["name"]: m for m in diff["metrics"]}
    measured = metrics["real_tokens_per_second"]["ratio"]
    return {"program": name, "plan": plan["name"], "steps": f"{steps} -> {plan_steps}",
            "compiles": f"{metrics['compiles']['a']} -> {metrics['compiles']['b']}",
            "padding": f"{metrics['padding_efficiency']['a']:.2f} -> "
                       f"{metrics['padding_efficiency']['b']:.2f}",
            "check": f"{before_check} -> {after_check}", "predicted": predicted, "leads": leads,
            "measured": measured,
            "off": measured / predicted - 1 if measured and predicted else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/advice_gain"))
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), default=sorted(CASES))
    args = parser.parse_args()
    rows = [run_case(name, args.out) for name in args.only]
    print(f"\n{'program':<16} {'plan':<16} {'steps':>9} {'compiles':>9} {'pad eff':>13} "
          f"{'check':>7} {'leads':>5} {'predicted':>9} {'measured':>9} {'off':>6}")
    bad = 0
    for r in rows:
        off = r["off"]
        bad += off is None or abs(off) > TOLERANCE or r["check"] != "1 -> 0" or not r["leads"]
        print(f"{r['program']:<16} {r['plan']:<16} {r['steps']:>9} {r['compiles']:>9} "
              f"{r['padding']:>13} {r['check']:>7} {'yes' if r['leads'] else 'NO':>5} "
              f"{r['predicted']:>8.2f}x "
              f"{(r['measured'] or 0):>8.2f}x {('-' if off is None else f'{off:+.0%}'):>6}")
    print(f"\n{len(rows) - bad} of {len(rows)} within {TOLERANCE:.0%} of the predicted gain "
          "with check failing before and passing after, the emitted code leading with the plan "
          "ranked first")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
