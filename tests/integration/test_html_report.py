"""report.html opened in real headless Chromium (Debian's `chromium`): no console errors, no
exceptions, no failed loads, every image decoded, nothing fetched from the network.

The browser is driven over the DevTools protocol with a tiny stdlib WebSocket client, so the
check sees what a user's browser sees. Broken pages (a bad image, a script error, a
console.error, a network fetch) are checked too, to prove the check can fail.
Set LAZYSCOPE_SKIP_BROWSER=1 to skip where no Chromium can be installed (`make test` installs it).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lazyscope.analyze.buckets import advise
from lazyscope.analyze.findings import Finding, RecompileFacts, VaryingInput
from lazyscope.analyze.report import build_report
from lazyscope.cli import main
from lazyscope.model import Change, Frame
from lazyscope.render.html import page as page_of
from lazyscope.render.html import render_html
from lazyscope.store import load_run

pytestmark = [pytest.mark.xla, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    if os.environ.get("LAZYSCOPE_SKIP_BROWSER") == "1":
        pytest.skip("LAZYSCOPE_SKIP_BROWSER=1")
    if CHROMIUM is None:
        pytest.fail("chromium not found: `make test` installs it (apt-get install -y chromium)")
    profile = tempfile.mkdtemp(prefix="lazyscope-chromium-")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}",
         "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    port_file = Path(profile) / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while not port_file.exists() or not port_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"chromium did not start (exit {proc.poll()})")
        time.sleep(0.2)
    port = int(port_file.read_text().split()[0])
    try:
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


class WebSocket:
    """The smallest WebSocket client CDP needs: text frames, masked out, unmasked in."""

    def __init__(self, url: str, timeout: float = 30):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            .encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake failed")
            head += chunk
        assert b" 101 " in head.split(b"\r\n")[0], head

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return buf

    def send(self, text: str) -> None:
        data = text.encode()
        header = bytes([0x81])
        n = len(data)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            message += self._read(n)
            if b0 & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


def check_page(port: int, path: Path) -> dict[str, Any]:
    """Open ``path`` in a new tab; return its errors and what happened to each image."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=10) as resp:
        target = json.loads(resp.read())
    ws = WebSocket(target["webSocketDebuggerUrl"])
    next_id = 0
    errors: list[str] = []
    requests: list[str] = []
    loaded = False

    def call(method: str, **params: Any) -> dict:
        nonlocal next_id, loaded
        next_id += 1
        my_id = next_id
        ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]
            handle(msg)

    def handle(msg: dict) -> None:
        nonlocal loaded
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            errors.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            errors.append("console.error: " + " ".join(str(a.get("value", a.get("description")))
                                                        for a in p["args"]))
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append("log: " + p["entry"]["text"])
        elif method == "Network.requestWillBeSent":
            requests.append(p["request"]["url"])
        elif method == "Page.loadEventFired":
            loaded = True

    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            call(f"{domain}.enable")
        call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + 30
        while not loaded and time.monotonic() < deadline:
            handle(json.loads(ws.recv()))
        assert loaded, "the page never fired its load event"
        time.sleep(0.3)  # late console messages
        images = call(
            "Runtime.evaluate", returnByValue=True, awaitPromise=True,
            expression="Promise.all(Array.from(document.images).map(i => i.decode().then("
                       "() => [i.alt, i.complete, i.naturalWidth], () => [i.alt, false, 0])))",
        )["result"]["value"]
        call("Runtime.evaluate", expression="1")  # drain events that arrived meanwhile
    finally:
        ws.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/close/{target['id']}",
                                    timeout=10):
            pass
    external = [u for u in requests if not u.startswith(("file:", "data:"))]
    return {"errors": errors, "images": images, "external": external}


def assert_clean(result: dict[str, Any], min_images: int) -> None:
    assert result["errors"] == []
    assert len(result["images"]) >= min_images, result["images"]
    bad = [img for img in result["images"] if not (img[1] and img[2] > 0)]
    assert bad == [], f"images that did not load: {bad}"
    assert result["external"] == [], "the report fetched from the network"


def test_traced_report_renders_clean(browser: int, lazytensor_runs) -> None:
    """report.html as `lazyscope trace` wrote it for a real XLA run."""
    page = Path(lazytensor_runs["dynamic"]) / "report.html"
    assert page.is_file()
    result = check_page(browser, page)
    assert_clean(result, min_images=3)


def test_report_format_html_with_every_section(browser: int, lazytensor_runs,
                                               tmp_path: Path, capsys) -> None:
    """`lazyscope report --format html` and a page with findings, advice and compare filled."""
    run = tmp_path / "run"
    shutil.copytree(lazytensor_runs["dynamic"], run)
    (run / "report.html").unlink()
    assert main(["report", str(run), "--format", "html"]) == 0
    assert capsys.readouterr().out.strip() == str(run / "report.html")
    assert_clean(check_page(browser, run / "report.html"), min_images=3)

    png = (run / "timeline.png").read_bytes()
    finding = Finding("recompile", "train.py", 3, "main", [Frame("train.py", 3, "main")], 18,
                      [1, 2], 2, 4.2, "seq dim varies", "pad to buckets", RecompileFacts(
                          compiled_at=Frame("train.py", 9, "main"),
                          changes=[Change("x", "dim", 1, 17, 33)],
                          varying=[VaryingInput("x", "dim", 1, [17, 33])], graphs=2,
                          dynamic=[], classes={}, verdict="churn", runs=[1, 1]))
    report = replace(build_report(load_run(run)), verdict="recompiled on 18 of 18 steps",
                     findings=[finding], advice=advise([17, 33, 64, 90, 120, 200, 256] * 12,
                                                  batch=4, top=256, horizon=40))
    page = tmp_path / "full.html"
    page.write_text(render_html(report, {"timeline": png, "compare": png}))
    assert_clean(check_page(browser, page), min_images=2)


@pytest.mark.parametrize("broken, expect", [
    ('<img alt="bad" src="data:image/png;base64,AAAA">', "image"),
    ('<img alt="missing" src="missing.png">', "image"),
    ("<script>throw new Error('boom')</script>", "exception: Error: boom"),
    ("<script>console.error('bad thing')</script>", "console.error: bad thing"),
])
def test_the_check_catches_broken_pages(browser: int, tmp_path: Path, broken: str,
                                        expect: str) -> None:
    good = page_of("fine", "<div class=\"verdict ok\">fine</div>")
    page = tmp_path / "broken.html"
    page.write_text(good.replace("</main>", broken + "</main>"))
    result = check_page(browser, page)
    with pytest.raises(AssertionError):
        assert_clean(result, min_images=0)
    if expect == "image":
        assert any(not (img[1] and img[2] > 0) for img in result["images"]), result
    else:
        assert any(e.startswith(expect) for e in result["errors"]), result["errors"]
