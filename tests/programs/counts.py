"""Print torch_xla's own compile / execute / transfer counts (``COUNTS {json}``) at exit."""

import json
import os

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met


def report(barriers: int) -> None:
    if torch_xla._XLAC._xla_runtime_is_initialized():
        xm.wait_device_ops()
    counts = {"barriers": barriers, "rank": os.environ.get("RANK")}
    for name in ("CompileTime", "ExecuteTime", "ExecuteReplicatedTime", "TransferToDeviceTime",
                 "TransferFromDeviceTime", "EagerOpCompileTime", "EagerOpExecuteTime"):
        data = met.metric_data(name)
        counts[name] = data[0] if data else 0
    print("COUNTS " + json.dumps(counts), flush=True)
