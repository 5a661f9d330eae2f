"""The sampler holds no frame of the program's thread while it does anything that can let that
thread run on: a frame held there keeps its locals alive after the function returned, and on
XLA a tensor kept alive is one more output of the next graph (a compilation the program never
made). Classifying a code object (its file's path resolved: system calls, which release the
GIL) is such a thing."""

from __future__ import annotations

import threading
import weakref
from types import CodeType

from lazyscope.backends import sampler as sampler_mod


class _Local:
    """Stands for a tensor the program's function holds in a local."""


def test_a_function_s_locals_die_when_it_returns_mid_sample() -> None:
    in_work = threading.Event()
    go = threading.Event()
    returned = threading.Event()
    refs: list[weakref.ref[_Local]] = []

    def work() -> None:
        local = _Local()
        refs.append(weakref.ref(local))
        in_work.set()
        go.wait(10)

    def program() -> None:
        work()
        returned.set()

    thread = threading.Thread(target=program)
    thread.start()
    assert in_work.wait(10)
    s = sampler_mod.Sampler(lambda: thread.ident, rate=0)
    seen_alive: list[bool] = []
    classify = s._is_user

    def while_classifying(code: CodeType) -> bool:
        if not seen_alive:  # the program's thread runs on, and returns from work()
            go.set()
            assert returned.wait(10)
            seen_alive.append(refs[0]() is not None)
        return classify(code)

    s._is_user = while_classifying  # type: ignore[method-assign]
    s._sample()
    thread.join(10)
    assert seen_alive == [False], "the sample held work()'s frame, and its local with it"
    assert sum(s.phases.values()) == 1  # the sample was counted


def test_a_sample_counts_the_user_s_innermost_line_and_its_part() -> None:
    stop = threading.Event()
    started = threading.Event()

    def user_loop() -> None:
        started.set()
        stop.wait(10)  # the innermost line of this (user's) file

    thread = threading.Thread(target=user_loop)
    thread.start()
    assert started.wait(10)
    s = sampler_mod.Sampler(lambda: thread.ident, rate=0)
    s._is_user = lambda code: code.co_filename == __file__  # type: ignore[method-assign]
    s._sample()
    stop.set()
    thread.join(10)
    (part, file, line, function, callee), = s.lines
    assert (part, file, function) == ("host", __file__, "user_loop")
    assert callee.endswith("threading.wait")  # the library function the user's line was in
    assert line == user_loop.__code__.co_firstlineno + 2
