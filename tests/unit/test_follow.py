"""What `lazyscope watch` sees at a run directory before the run is there: a trace starting
(nothing yet, the files it writes first, an atomic write of meta.json in progress) is waited
for; a directory of something else is refused with what it holds."""

from __future__ import annotations

from lazyscope.model import Meta
from lazyscope.store.follow import MISSING, NOT_A_RUN, RUN, LocalRun
from lazyscope.store.layout import LOCK_FILE, META_FILE
from lazyscope.store.writer import RunWriter


def test_a_trace_starting_is_waited_for_and_a_foreign_directory_is_not(tmp_path) -> None:
    run = tmp_path / "run"
    assert LocalRun(run).state() == MISSING
    run.mkdir()
    assert LocalRun(run).state() == MISSING
    (run / LOCK_FILE).write_text("")
    (run / f"{META_FILE}.tmp").write_text("{")  # the rename that makes the run comes next
    assert LocalRun(run).state() == MISSING

    (run / "notes.txt").write_text("mine")
    other = LocalRun(run)
    assert other.state() == NOT_A_RUN
    assert other.why.endswith("(no meta.json; it holds notes.txt)")

    fresh = tmp_path / "fresh"
    RunWriter(fresh, Meta(target="t")).finish("ok")
    assert LocalRun(fresh).state() == RUN
