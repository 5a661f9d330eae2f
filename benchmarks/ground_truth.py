"""Ground truth for a traced run: run a program unmodified, without lazyscope, and print
torch_xla's own counters (compilations, executions, device-to-host transfers), to set beside
what ``lazyscope trace`` reported for the same program and arguments.

    PJRT_DEVICE=CPU python benchmarks/ground_truth.py tests/programs/hf_classifier.py --steps 10
"""

from __future__ import annotations

import runpy
import sys


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(sys.argv) < 2 else sys.stdout)
        return 2 if len(sys.argv) < 2 else 0
    program, *args = sys.argv[1:]
    sys.argv = [program, *args]
    try:
        runpy.run_path(program, run_name="__main__")
    finally:
        import torch_xla.debug.metrics as met

        for name in ("CompileTime", "ExecuteTime", "TransferFromDeviceTime"):
            data = met.metric_data(name)
            print(f"GROUND TRUTH {name}: {data[0] if data else 0} samples, "
                  f"{(data[1] / 1e9 if data else 0):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
