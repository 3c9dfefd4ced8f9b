"""A minimal DevTools client for headless Chromium over ``--remote-debugging-pipe`` (no browser download).

Chromium reads protocol messages (JSON, each ended by a NUL byte) from file descriptor 3 and
writes replies and events to file descriptor 4. Used by the report's browser tests.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Browser:
    """One headless Chromium process and one page (tab) driven over the DevTools pipe."""

    def __init__(self, profile: str, width: int = 1200, height: int = 900) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed")
        cmd_r, cmd_w = os.pipe()  # we write commands to cmd_w; chromium reads fd 3
        res_r, res_w = os.pipe()  # chromium writes fd 4; we read res_r
        hi_r, hi_w = os.dup(cmd_r), os.dup(res_w)

        def child() -> None:
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        args = [CHROMIUM, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", f"--user-data-dir={profile}", "about:blank"]  # fmt: skip
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=child, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)  # fmt: skip
        for fd in (cmd_r, res_w, hi_r, hi_w):
            os.close(fd)
        self.w, self.r = cmd_w, res_r
        self.buf, self.next_id, self.pending = b"", 0, []
        target = self.send("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, page=False)[
            "sessionId"
        ]
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})  # fmt: skip

    # -- protocol ------------------------------------------------------------------------
    def send(self, method: str, params: dict[str, Any] | None = None, page: bool = True, timeout: float = 60) -> Any:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if page:
            msg["sessionId"] = self.session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        my_id = self.next_id
        reply = self._wait(lambda m: m.get("id") == my_id, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _read(self, timeout: float) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while b"\0" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                chunk = os.read(self.r, 1 << 20)
                if not chunk:
                    raise EOFError("chromium closed the DevTools pipe")
                self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def _wait(self, pred: Any, timeout: float) -> dict[str, Any]:
        for i, m in enumerate(self.pending):
            if pred(m):
                return self.pending.pop(i)
        end = time.monotonic() + timeout
        while True:
            m = self._read(max(0.0, end - time.monotonic()))
            if pred(m):
                return m
            self.pending.append(m)

    # -- page --------------------------------------------------------------------------
    def open(self, url: str, scripts: bool = True) -> None:
        """Navigate and wait for the load event (and for every image to be decoded)."""
        self.send("Emulation.setScriptExecutionDisabled", {"value": not scripts})
        self.pending = [m for m in self.pending if m.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", {"url": url})
        self._wait(lambda m: m.get("method") == "Page.loadEventFired", 60)
        self.images_loaded()

    def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page (works with page scripts disabled) and return the value."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"JavaScript error: {r['exceptionDetails']}")
        return r["result"].get("value")

    def images_loaded(self) -> None:
        """Wait (at most 20 s) until every image that is not lazy-loaded has loaded and been decoded."""
        self.eval("Promise.race([new Promise(r => setTimeout(r, 20000)), Promise.all(Array.from(document.images)"
                  ".filter(i => i.loading !== 'lazy').map(i => i.decode().catch(() => 0)))])")  # fmt: skip

    def screenshot(self) -> bytes:
        """PNG of the viewport."""
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])

    def close(self) -> None:
        try:
            self.send("Browser.close", page=False, timeout=10)
        except Exception:  # noqa: BLE001 - already gone
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.w)
        os.close(self.r)
