"""Loads a report page in headless Chromium and says what a reader's browser would: console
errors, failed loads, load time, where the triage table sits, and a screenshot.

Chromium is driven through the DevTools protocol over a pipe (--remote-debugging-pipe: JSON
messages separated by NUL bytes on file descriptors 3 and 4), which needs no port, no websocket
library and no network. Used by the browser test and to take docs/report.md's screenshot:

    python3 -m reports screenshot results/report/index.html reports/screenshot.png
"""

import base64
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

# The page a reader sees first: the "visible without scrolling at 1400x900".
VIEWPORT = (1400, 900)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
# Chromium's own limit for one page load; the report must load in under 2 s.
LOAD_TIMEOUT_S = 30


# Probes of the triage (issue 18), evaluated in the loaded page.
# Where the gate's sentence and each group's row sit: {"verdict": [top, bottom] or null,
# "groups": [{"key", "kernel", "rank", "top", "bottom"}, ...]} in page order.
TRIAGE_LAYOUT_PROBE = """(() => {
  const box = (element) => { const r = element.getBoundingClientRect(); return [r.top, r.bottom]; };
  const verdict = document.getElementById('triage-verdict');
  const groups = [...document.querySelectorAll('#triage-table tbody.triage-group')].map((body) => {
    const [top, bottom] = box(body.querySelector('tr.group'));
    return {key: body.dataset.key, kernel: body.querySelector('td.kernel').textContent.trim(),
            rank: [...body.classList].find((c) => c.startsWith('rank-')).slice(5), top, bottom};
  });
  return {verdict: verdict ? box(verdict) : null, groups};
})()"""
# Every cell of the triage (its folded rows opened) whose content reaches past its own box:
# [{"text", "cell": [left, right], "content": [left, right]}]; [] when nothing overflows.
TRIAGE_OVERFLOW_PROBE = """(() => {
  for (const details of document.querySelectorAll('#triage-table details')) details.open = true;
  const wide = [];
  for (const cell of document.querySelectorAll('#triage-table td, #triage-table th')) {
    const box = cell.getBoundingClientRect();
    const range = document.createRange();
    range.selectNodeContents(cell);
    const content = range.getBoundingClientRect();
    if (cell.scrollWidth > cell.clientWidth + 1 || content.right > box.right + 1 ||
        content.left < box.left - 1) {
      wide.push({text: cell.textContent.trim().slice(0, 80), cell: [box.left, box.right],
                 content: [content.left, content.right]});
    }
  }
  return wide;
})()"""


class BrowserError(Exception):
    pass


def find_chromium():
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageLoad:
    load_seconds: float  # navigation start to the end of the load event (Navigation Timing)
    console_errors: list = field(default_factory=list)  # console errors, exceptions, failed loads
    triage_top: float | None = None  # px from the top of the viewport; None without a table
    triage_bottom: float | None = None
    screenshot: bytes = b""
    probe: object = None  # what the probe expression returned, after the load


class Chromium:
    def __init__(self, binary=None):
        binary = binary or find_chromium()
        if not binary:
            raise BrowserError("no Chromium found (Debian: apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="attnbench-chromium-")
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()

        def wire_pipes():
            # The child reads commands on fd 3 and writes replies on fd 4. Copies first: a pipe
            # end may already be fd 3 or 4, and dup2 onto itself would leave it close-on-exec.
            commands, replies = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        arguments = [binary, "--headless", "--remote-debugging-pipe", "--disable-gpu",
                     "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
                     f"--user-data-dir={self.profile}",
                     f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}"]
        if os.geteuid() == 0:
            arguments.append("--no-sandbox")  # Chromium refuses to run as root with it
        self.process = subprocess.Popen(arguments + ["about:blank"], preexec_fn=wire_pipes,
                                        close_fds=False, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def close(self):
        try:
            self.send("Browser.close")
        except BrowserError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise BrowserError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, session=None, timeout=LOAD_TIMEOUT_S, **params):
        """Sends one command and returns its result; events read meanwhile are kept."""
        self.next_id += 1
        command = {"id": self.next_id, "method": method, "params": params}
        if session:
            command["sessionId"] = session
        os.write(self.to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method, timeout=LOAD_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(self._read_message(deadline))

    def load(self, page_path, viewport=VIEWPORT, probe=None):
        """Opens a file:// page at the viewport size and reports on it; `probe`, a JavaScript
        expression, is evaluated once the page has loaded (before the screenshot, so what it
        changes shows) and its value returned."""
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session)
        self.send("Emulation.setDeviceMetricsOverride", session, width=viewport[0],
                  height=viewport[1], deviceScaleFactor=1, mobile=False)
        self.events.clear()
        url = pathlib.Path(page_path).resolve().as_uri()
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired")
        load_ms = self.evaluate(session, "performance.getEntriesByType('navigation')[0]"
                                         ".loadEventEnd")
        box = self.evaluate(session, "(() => { const t = document.getElementById('triage-table')"
                                     " || document.getElementById('triage'); if (!t) return null;"
                                     " const r = t.getBoundingClientRect();"
                                     " return [r.top, r.bottom]; })()")
        probed = self.evaluate(session, probe) if probe else None
        shot = self.send("Page.captureScreenshot", session, format="png")["data"]
        return PageLoad(load_ms / 1000.0, self._errors(),
                        box[0] if box else None, box[1] if box else None,
                        base64.b64decode(shot), probed)

    def evaluate(self, session, expression):
        reply = self.send("Runtime.evaluate", session, expression=expression, returnByValue=True)
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression}: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    def _errors(self):
        """Console errors, uncaught exceptions and log entries at error level (a missing image
        or stylesheet shows up there as 'Failed to load resource')."""
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                       for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                errors.append(details.get("exception", {}).get("description")
                              or details.get("text", "exception"))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                errors.append(f"{entry.get('text')} {entry.get('url', '')}".strip())
        return errors


def load_page(page_path, binary=None, viewport=VIEWPORT, probe=None):
    with Chromium(binary) as browser:
        return browser.load(page_path, viewport, probe)
