"""Headless Chromium for tests, driven over the DevTools protocol with aiohttp's websocket.

Debian's ``chromium`` (installed by ``scripts/setup.sh``) runs with no network of its own
(the background-networking flags keep it off the internet) and a fresh profile; a test
opens a page, evaluates JavaScript in it (what is on the page, where, how big) and
takes screenshots.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-quic", "--disable-dev-shm-usage"]


class Browser:
    """One Chromium process and its first page."""

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        self.size = (width, height)
        self._profile = tempfile.TemporaryDirectory(prefix="forksync-chromium-")
        self._proc: subprocess.Popen[bytes] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._next = 0
        self._events: list[dict[str, Any]] = []

    async def __aenter__(self) -> Browser:
        if not Path(CHROMIUM).exists():
            raise RuntimeError(f"{CHROMIUM} is missing: scripts/setup.sh installs Debian's "
                               "chromium")
        self._proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self._profile.name}",
             f"--window-size={self.size[0]},{self.size[1]}", "--remote-debugging-port=0",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)  # its own process group: its helpers go with it
        port = await asyncio.wait_for(asyncio.to_thread(self._devtools_port), 60)
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as r:
            pages = [t for t in await r.json() if t.get("type") == "page"]
        self._ws = await self._session.ws_connect(pages[0]["webSocketDebuggerUrl"],
                                                  max_msg_size=0)
        await self.call("Page.enable")
        await self.call("Emulation.setDeviceMetricsOverride", width=self.size[0],
                        height=self.size[1], deviceScaleFactor=1, mobile=False)
        return self

    def _devtools_port(self) -> int:
        assert self._proc is not None and self._proc.stderr is not None
        for raw in self._proc.stderr:
            line = raw.decode(errors="replace")
            if "DevTools listening on ws://" in line:
                return int(line.split("ws://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        raise RuntimeError(f"chromium did not start (exit {self._proc.wait()})")

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None
                        ) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._proc is not None:
            # Killing only the browser process left its helpers writing into the profile
            # while it was removed ("Directory not empty: 'Default'" in one CI run).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=30)
        for attempt in range(10):
            try:
                self._profile.cleanup()
                break
            except OSError:
                if attempt == 9:
                    raise
                await asyncio.sleep(0.2)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; events that arrive meanwhile are kept for :meth:`wait_for`."""
        assert self._ws is not None
        self._next += 1
        ident = self._next
        await self._ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads((await asyncio.wait_for(self._ws.receive(), 60)).data)
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            self._events.append(msg)

    async def wait_for(self, event: str) -> dict[str, Any]:
        assert self._ws is not None
        while True:
            for k, msg in enumerate(self._events):
                if msg.get("method") == event:
                    del self._events[: k + 1]
                    params: dict[str, Any] = msg.get("params", {})
                    return params
            self._events.append(json.loads((await asyncio.wait_for(self._ws.receive(),
                                                                   60)).data))

    async def open(self, path: Path) -> None:
        """Load a local page and wait until it has loaded."""
        self._events.clear()
        await self.call("Page.navigate", url=path.resolve().as_uri())
        await self.wait_for("Page.loadEventFired")

    async def js(self, expression: str) -> Any:
        """The value of a JavaScript expression on the page."""
        out = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression}: {out['exceptionDetails']}")
        return out["result"].get("value")

    async def screenshot(self, path: Path, selector: str | None = None) -> bytes:
        """A PNG of the viewport, or of the element ``selector`` (scrolled to), into ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            box = await self.js(
                f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                "e.scrollIntoView(); const r = e.getBoundingClientRect();"
                "return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })()")
            params.update(captureBeyondViewport=True, clip={
                "x": box[0], "y": box[1], "width": box[2], "height": min(box[3], 4000),
                "scale": 1})
        data = base64.b64decode((await self.call("Page.captureScreenshot", **params))["data"])
        path.write_bytes(data)
        return data
