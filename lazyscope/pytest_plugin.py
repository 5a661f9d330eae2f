"""The pytest plugin (the ``pytest11`` entry point ``lazyscope``, installed with the package).

* ``@pytest.mark.lazyscope(max_recompiles=0, warmup_steps=2, ...)`` runs the test inside
  :func:`lazyscope.guard` with those arguments: the test fails at the step barrier where a rule
  breaks, and its report is the finding (the rule that broke, the test's line that reached the
  barrier, then the user's line to change, why, and the fix), not a traceback through
  lazyscope; the rule is the first line, the one pytest's short summary shows.
* the ``lazyscope_guard`` fixture does the same for the test that asks for it (with the
  marker's arguments when the test has one too) and gives the guard to the test.

On XLA a guard has to be entered before torch_xla compiles anything in the process (it reads
its debug settings then): once the tests are collected, when any of them is guarded, the
plugin sets up lazyscope's XLA session (environment variables only: no runtime is started).

Loading the plugin imports lazyscope (no torch, no torch_xla); a test without the marker or
the fixture runs as it would without it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Generator
from typing import Any

import pytest

MARKER = "lazyscope"
FIXTURE = "lazyscope_guard"
MARKER_HELP = (
    "lazyscope(max_recompiles=0, warmup_steps=2, max_syncs_per_step=None, no_fallbacks=False, "
    "no_graph_breaks=False, backend='auto', out=None): run the test inside lazyscope.guard(): "
    "it fails at the step barrier where a rule breaks, naming the line to change")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


def _guarded(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER) is not None or \
        FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if any(_guarded(item) for item in items) and importlib.util.find_spec("torch_xla"):
        from lazyscope.backends.xla.session import session as xla_session

        xla_session(True)  # before any test compiles (environment only)


def _make(item: pytest.Item) -> Any:
    from lazyscope.online import make_guard

    marker = item.get_closest_marker(MARKER)
    kwargs = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.lazyscope takes keyword "
                                "arguments only (max_recompiles=0, warmup_steps=2 ...)")
    return make_guard(**kwargs, target=str(getattr(item, "path", "")))


@pytest.fixture
def lazyscope_guard(request: pytest.FixtureRequest) -> Generator[Any, None, None]:
    """The test body runs inside ``lazyscope.guard()`` (the marker's arguments, if any)."""
    with _make(request.node) as guard:
        yield guard


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    if item.get_closest_marker(MARKER) is None or FIXTURE in getattr(item, "fixturenames", ()):
        return (yield)
    with _make(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    excinfo = call.excinfo
    if excinfo is None or not report.failed or not _guarded(item):
        return report
    from lazyscope.core.errors import GuardError

    if not isinstance(excinfo.value, GuardError):
        return report
    path = str(getattr(item, "path", ""))
    mine = [e for e in excinfo.traceback if str(e.path) == path]
    where = f"{path}:{mine[-1].lineno + 1}: the step barrier where the guard broke" \
        if mine else ""
    # the rule that broke first, as short as it goes: pytest's short summary shows the first
    # line, cut to the terminal's width
    rule, _, rest = str(excinfo.value).partition("\n")
    rule = rule.removeprefix("lazyscope.guard: ")
    report.longrepr = "\n".join(t for t in (rule, where, rest) if t)
    return report
