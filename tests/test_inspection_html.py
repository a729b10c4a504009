"""The HTML report in a real headless Chromium: it renders, the reader labels samples, and the exported
labels file is accepted by record_review. Skipped (with the reason) where Chromium is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from skill.inspection.gate import record_review
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, ReviewRequest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium) - the HTML check is skipped"
    ),
]


class DevTools:
    """The smallest Chrome DevTools Protocol client this test needs."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self.socket = connect(url, max_size=None)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=30))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result["result"].get("value")


def test_html_report_exports_labels_that_record_review_accepts(tmp_path):
    from test_inspection import SOUND, planted, tagged_samples

    report = inspect_rewards(InspectionRequest(rewards=SOUND, samples=tagged_samples()))
    profile, downloads = tmp_path / "profile", tmp_path / "downloads"
    downloads.mkdir()
    browser = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            Path(report.paths["html"]).as_uri(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.is_file() and port_file.read_text().strip():
                break
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10).read())
        page = next(p for p in pages if p["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        tools.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
        for _ in range(100):
            if tools.evaluate("document.readyState") == "complete":
                break
            time.sleep(0.1)
        assert tools.evaluate("document.querySelectorAll('.sample').length") == len(report.samples)
        assert "Reward inspection" in tools.evaluate("document.title")
        traps = set(planted(report))
        for sample in report.samples:
            choice = "disagree" if sample.id in traps else "agree"
            tools.evaluate(f'document.querySelector("input[name=s{sample.id}][value={choice}]").click()')
        tools.evaluate("document.getElementById('reviewer').value = 'Ana'; document.getElementById('export').click()")
        exported = json.loads(tools.evaluate("document.getElementById('exported').textContent"))
        files = []
        for _ in range(50):
            files = list(downloads.glob("*.labels.json"))
            if files:
                break
            time.sleep(0.1)
    finally:
        browser.kill()
        browser.wait(timeout=10)
    assert files, "the export did not produce a labels file"
    saved = json.loads(files[0].read_text())
    assert saved == exported
    result = record_review(ReviewRequest.model_validate(saved))
    assert result.verdict == "passed", result.verdict_reasons
    assert result.review.reviewer == "Ana"
