"""The online rule's cheap part (which steps make the guard or the live alerts look at the run)
and the guard's argument checks; the looks themselves run on real runs in
tests/integration/test_guard.py and test_live_alerts.py."""

from __future__ import annotations

import math

import pytest

import lazyscope
from lazyscope.analyze.check import Rules
from lazyscope.core.errors import GuardError, LazyscopeError, UsageError
from lazyscope.integrations.live import OnlineCheck


def test_a_healthy_steady_step_triggers_nothing() -> None:
    check = OnlineCheck(Rules(max_recompiles=0, max_syncs_per_step=0), warmup_steps=2)
    steady = {"compile_count": 0.0, "from_device_count": 0.0, "fallback_count": math.nan}
    assert check.triggers(5, steady, {"execute": 1}) == []
    # warm-up compilations and reads are not looked at
    assert check.triggers(1, {"compile_count": 3.0, "from_device_count": 1.0}, {}) == []
    assert check.triggers(2, {"compile_count": 1.0}, {}) == ["compile"]
    assert check.triggers(3, {"from_device_count": 0.0}, {"sync": 1}) == ["sync"]
    # rules not asked for trigger nothing
    assert check.triggers(3, {"fallback_count": 2.0}, {"graph_break": 1}) == []


def test_live_alerts_look_at_every_kind() -> None:
    check = OnlineCheck(None, None)
    assert check.triggers(0, {"compile_count": 1.0, "fallback_count": 1.0}, {"sync": 2,
                          "graph_break": 1}) == ["compile", "sync", "fallback", "graph_break"]


def test_guard_arguments() -> None:
    assert issubclass(lazyscope.GuardError, LazyscopeError) and lazyscope.GuardError is GuardError
    assert GuardError("x").exit_code == 1
    with pytest.raises(UsageError, match="warmup_steps must be a whole number"):
        lazyscope.guard(warmup_steps=-1)
    with pytest.raises(UsageError, match="no rule to check"):
        lazyscope.guard(max_recompiles=None)
    with pytest.raises(UsageError, match="unknown backend"):
        lazyscope.guard(backend="tpu")


def test_import_lazyscope_stays_light() -> None:
    import subprocess
    import sys

    code = ("import sys, lazyscope; lazyscope.GuardError; lazyscope.guard; "
            "import lazyscope.integrations.pytest_plugin; "
            "print(sorted(m for m in ('torch', 'torch_xla') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
