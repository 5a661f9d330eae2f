"""What built-in scenarios (and users' own scripts, if they like) share: common arguments.

Every scenario takes ``--steps``, ``--backend``, ``--device`` and ``--seed`` so that
``lazyscope trace NAME --steps N`` and ``python scenarios/NAME.py --steps N`` mean the same.
This module imports no torch: the CLI validates a scenario's arguments before anything heavy loads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lazyscope.backends import BACKENDS, Backend, get_backend


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def read_lengths(path: str | Path) -> list[int]:
    """A lengths file: one positive integer per line, blank lines skipped.

    Raises ValueError with a message naming the file and the bad line."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"cannot read lengths file {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"lengths file {path} is not text") from None
    values = []
    for n, line in enumerate(raw.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            v = int(line)
        except ValueError:
            raise ValueError(f"lengths file {path} line {n}: {line[:30]!r} is not an integer") from None
        if v < 1:
            raise ValueError(f"lengths file {path} line {n}: length {v} is below 1")
        values.append(v)
    if not values:
        raise ValueError(f"lengths file {path} holds no lengths")
    return values


def base_parser(description: str, *, default_steps: int = 20, prog: str | None = None) -> argparse.ArgumentParser:
    """An ArgumentParser with the arguments every scenario shares."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--steps", type=positive_int, default=default_steps, help="number of steps")
    parser.add_argument(
        "--backend", choices=sorted(BACKENDS), default=_default_backend(),
        help="where the workload runs (default: the backend of the trace in progress, else xla)",
    )
    parser.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default="auto",
        help="device for the eager/compile backends (the XLA backend uses PJRT_DEVICE)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument(
        "--dynamic", choices=["auto", "true", "false"], default="auto",
        help="torch.compile's dynamic= for --backend compile (auto: static first, dynamic after "
        "a shape recompiles)",
    )
    return parser


def _default_backend() -> str:
    """The backend of the trace in progress (a script traced by path gets no --backend), else
    ``xla``."""
    from lazyscope.backends import active_recorder

    recorder = active_recorder()
    if recorder is not None and recorder.writer is not None:
        return recorder.writer.meta.backend
    return "xla"


def backend_from_args(args: argparse.Namespace) -> Backend:
    """The backend a scenario's parsed arguments ask for."""
    backend = get_backend(args.backend)
    if hasattr(backend, "configure"):
        backend.configure(device=getattr(args, "device", "auto"),
                          dynamic=getattr(args, "dynamic", "auto"))
    return backend
