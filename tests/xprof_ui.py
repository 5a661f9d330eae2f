"""A screenshot of XProf's trace viewer (TensorBoard's profile plugin) showing a run's capture,
in headless Chromium, waiting in real time for the viewer to import the trace (Chromium's
``--virtual-time-budget``, which ``shoot`` uses, leaves it at "Importing..."). By hand::

    lazyscope tensorboard --port 6006 RUN &
    python -m tests.xprof_ui 6006 OUT.png [SESSION]

SESSION defaults to the run's only capture. Prints the viewer's first lines of text (its
process and thread names) so a script can check it loaded.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.perfetto_ui import capture, devtools_page


def _json(url: str) -> object:
    """A JSON answer of the plugin (it gzips some whatever the request says)."""
    with urllib.request.urlopen(url, timeout=30) as resp:
        raw = resp.read()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def trace_viewer_url(port: int, session: str, host: str) -> str:
    data = urllib.parse.quote(
        f"/data/plugin/profile/data?run={session}&tag=trace_viewer&host={host}", safe="")
    return (f"http://127.0.0.1:{port}/data/plugin/profile/trace_viewer_index.html"
            f"?is_streaming=false&is_oss=true&trace_data_url={data}")


def shoot(port: int, out: Path, session: str | None = None, wait_s: float = 120) -> str:
    """Open the trace viewer on ``session`` (default: the only one), wait until it imported the
    trace, save a screenshot to ``out``; returns the page's text."""
    base = f"http://127.0.0.1:{port}/data/plugin/profile"
    if session is None:
        (session,) = _json(f"{base}/runs")  # type: ignore[misc]
    hosts = _json(f"{base}/hosts?run={session}&tag=trace_viewer")
    host = (hosts[0].get("hostname", "vm") if isinstance(hosts, list) and hosts
            and isinstance(hosts[0], dict) else "vm")
    text = ""
    with devtools_page() as call:
        call("Page.navigate", url=trace_viewer_url(port, session, host))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            time.sleep(2)
            value = call("Runtime.evaluate", expression="document.body.innerText",
                         returnByValue=True)["result"].get("value") or ""
            text = str(value)
            if "Processes" in text and "Importing" not in text:
                break
        time.sleep(2)  # the timeline draws after the import
        capture(call, out)
    return text


if __name__ == "__main__":
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    args = sys.argv[1:]
    print(shoot(int(args[0]), Path(args[1]), args[2] if len(args) > 2 else None)[:600])
