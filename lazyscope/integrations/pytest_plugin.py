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

Each marker is checked when the tests are collected (``marker_error``): positional arguments,
an unknown keyword, a bad value or no rule at all is pytest's usage error naming the test and
the marker, before anything runs. Given with ``-p lazyscope.integrations.pytest_plugin`` while the entry
point is installed too, the plugin is loaded once.

Loading the plugin imports lazyscope (no torch, no torch_xla); a test without the marker or
the fixture runs as it would without it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Generator
from typing import Any

import pytest

MARKER = "lazyscope"
FIXTURE = "lazyscope_guard"
MARKER_HELP = (
    "lazyscope(max_recompiles=0, warmup_steps=2, max_syncs_per_step=None, no_fallbacks=False, "
    "no_graph_breaks=False, max_input_share=None, max_tracing_share=None, backend='auto', "
    "out=None): run the test inside lazyscope.guard(): "
    "it fails at the step barrier where a rule breaks, naming the line to change")


#: the marker's keyword arguments (lazyscope.guard's, but ``target``) and the types they take
MARKER_KWARGS: dict[str, tuple[type, ...]] = {
    "max_recompiles": (int, type(None)), "warmup_steps": (int, type(None)),
    "max_syncs_per_step": (int, type(None)), "no_fallbacks": (bool,),
    "no_graph_breaks": (bool,), "backend": (str,), "out": (str, os.PathLike, type(None)),
    "force": (bool,)}
#: the name of the installed entry point (``pytest11``)
ENTRY_POINT = "lazyscope"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


def pytest_plugin_registered(plugin: Any, plugin_name: str, manager: Any) -> None:
    """Loaded once under either name: ``-p lazyscope.integrations.pytest_plugin`` with the entry point
    installed too would register this module twice (pluggy refuses, and pytest prints a page of
    its plugins); the other name is blocked once this module is registered."""
    if plugin is not sys.modules[__name__]:
        return
    other = ENTRY_POINT if plugin_name != ENTRY_POINT else __name__
    if manager.get_plugin(other) is None and not manager.is_blocked(other):
        manager.set_blocked(other)


def _guarded(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARKER) is not None or \
        FIXTURE in getattr(item, "fixturenames", ())


def marker_error(marker: Any) -> str | None:
    """What is wrong with a ``@pytest.mark.lazyscope(...)`` (positional arguments, an unknown
    keyword, a value of the wrong type or range, no rule at all), or None."""
    from lazyscope.core.errors import UsageError
    from lazyscope.integrations.live import make_guard

    if marker.args:
        return (f"takes keyword arguments only, got {len(marker.args)} positional "
                f"({', '.join(repr(a) for a in marker.args[:3])})")
    unknown = [k for k in marker.kwargs if k not in MARKER_KWARGS]
    if unknown:
        return (f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; it "
                f"takes {', '.join(MARKER_KWARGS)}")
    for name, value in marker.kwargs.items():
        if not isinstance(value, MARKER_KWARGS[name]) or (
                bool not in MARKER_KWARGS[name] and isinstance(value, bool)):
            kinds = " or ".join("None" if t is type(None) else t.__name__
                                for t in MARKER_KWARGS[name])
            return f"{name}={value!r}: {kinds} expected"
    try:
        make_guard(**marker.kwargs)
    except UsageError as err:
        return str(err).removeprefix("lazyscope.guard: ")
    return None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Every ``lazyscope`` marker is checked here, at collection: a bad one is pytest's usage
    error naming the test and the marker (exit 4), before any test runs; then, when a test is
    guarded, lazyscope's XLA session is set up."""
    errors = []
    for item in items:
        marker = item.get_closest_marker(MARKER)
        why = marker_error(marker) if marker is not None else None
        if why is not None:
            errors.append(f"{item.nodeid}: @pytest.mark.{MARKER}(...): {why}")
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise pytest.UsageError(*errors[:3], *([more.strip()] if more else []))
    if any(_guarded(item) for item in items) and importlib.util.find_spec("torch_xla"):
        from lazyscope.backends.xla.session import session as xla_session

        xla_session(True)  # before any test compiles (environment only)


def _make(item: pytest.Item) -> Any:
    from lazyscope.integrations.live import make_guard

    marker = item.get_closest_marker(MARKER)
    kwargs = dict(marker.kwargs) if marker is not None else {}
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
