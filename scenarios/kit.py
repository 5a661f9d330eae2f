"""What built-in scenarios (and users' own scripts, if they like) share: common arguments and
the runtime they run on.

Every scenario takes ``--steps``, ``--backend``, ``--device``, ``--dynamic`` and ``--seed`` so
that ``lazyscope trace NAME --steps N`` and ``python -m lazyscope_scenarios.NAME --steps N``
mean the same. Traced, a scenario runs on the trace's backend, and its device and ``dynamic``
come from the trace's options (``lazyscope trace --device cuda NAME``) unless its own arguments
say otherwise. This module imports no torch: the CLI validates a scenario's arguments before
anything heavy loads.
"""

from __future__ import annotations

import argparse

import lazyscope
from lazyscope.padding import read_lengths

DYNAMIC_CHOICES = {"auto": None, "true": True, "false": False}


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def lengths_file(text: str) -> list[int]:
    """argparse type: a file with one positive integer length per line (blank lines skipped)."""
    try:
        return read_lengths(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def n_params(model: object) -> int:
    """The number of parameters of a torch module."""
    return sum(t.numel() for t in model.parameters())  # type: ignore[attr-defined]


def base_parser(description: str, *, default_steps: int = 20,
                prog: str | None = None) -> argparse.ArgumentParser:
    """An ArgumentParser with the arguments every scenario shares."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--steps", type=positive_int, default=default_steps, help="number of steps")
    parser.add_argument(
        "--backend", choices=lazyscope.backend_names(), default=_default_backend(),
        help="where the workload runs (default: the backend of the trace in progress, else xla)",
    )
    parser.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default=None,
        help="device for the eager/compile backends (default: the trace's --device, else auto; "
        "the XLA backend uses PJRT_DEVICE)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument(
        "--dynamic", choices=sorted(DYNAMIC_CHOICES), default=None,
        help="torch.compile's dynamic= for --backend compile (default: the trace's --dynamic, "
        "else auto: static first, dynamic after a shape recompiles)",
    )
    return parser


def _default_backend() -> str:
    """The backend of the trace in progress, else ``xla``."""
    options = lazyscope.tracing()
    return options.backend if options is not None else "xla"


def runtime_from_args(args: argparse.Namespace) -> lazyscope.Runtime:
    """The runtime a scenario's parsed arguments ask for; what they leave open comes from the
    trace in progress."""
    dynamic_arg = getattr(args, "dynamic", None)
    return lazyscope.runtime(args.backend, device=getattr(args, "device", None),
                             dynamic=DYNAMIC_CHOICES[dynamic_arg] if dynamic_arg is not None
                             else None)
