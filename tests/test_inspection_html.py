"""The reading page in a real headless Chromium, driven with the keyboard as a reader would: label blind (no score
anywhere on the page or in its source, progress counting), the labels surviving a reload, the export record_review
takes; then the page record_review wrote again: the reveal (scores and the disagreement by sample id), the resolve
(an amendment for a misread), exported again, which passes the gate. Skipped, with the reason, only where Chromium
is not installed (`make test` installs it)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from skill.data import ADDITION_QUESTION
from skill.inspection.gate import record_review
from skill.inspection.reports import load_report
from skill.inspection.run import inspect_rewards
from skill.inspection.schema import InspectionRequest, ReviewRequest, SuppliedSample
from skill.rewards.spec import RewardSpec
from skill.state import STATE_ROOT_ENV

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Chromium is not installed (make test installs it: apt-get install -y chromium)"
    ),
]

REWARDS = [
    RewardSpec(name="format", role="format", weight=0.2, params={"pattern": "number"}),
    RewardSpec(name="exact_match", role="correctness", params={"extract": "last_number"}),
    # a shaping reward: not labelled, its figures (e.g. -0.467) shown only after the reveal
    RewardSpec(name="length_penalty", role="shaping", weight=0.1, params={"mode": "target", "target": 3}),
]
KEY_CODES = {"p": 80, "f": 70, "u": 85, "j": 74, "k": 75, "Escape": 27, "ArrowDown": 40, "ArrowUp": 38}


def addition_samples() -> list[SuppliedSample]:
    """80 addition answers: right and bare, off by one, or wrong and wordy."""
    rng, samples = random.Random(1), []
    for i in range(80):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        completion = [str(a + b), str(a + b + 1), f"I think it is {a * b}"][i % 3]
        prompt = [{"role": "user", "content": ADDITION_QUESTION.format(a=a, b=b)}]
        samples.append(SuppliedSample(prompt=prompt, completion=completion, columns={"answer": str(a + b)}, group=i))
    return samples


def judged(completion: str, answer: str) -> dict[str, str]:
    """The reader's own judgment, made without the rewards."""
    numbers = re.findall(r"-?\d+", completion)
    right = bool(numbers) and numbers[-1] == answer
    return {
        "correctness": "pass" if right else "fail",
        "format": "pass" if re.fullmatch(r"\s*-?\d+\s*", completion) else "fail",
    }


def unrounded(text: str) -> list[str]:
    """Decimal figures in the text with more than 3 significant digits.

    >>> unrounded("0.0133, 1.15, -0.467, 0.28618176042508353, 12.5")
    ['0.28618176042508353']
    """
    return [n for n in re.findall(r"\d+\.\d+", text) if len(n.replace(".", "").lstrip("0")) > 3]


class Chromium:
    """Headless Chromium on one page, spoken to over the DevTools protocol; every process it starts is stopped."""

    def __init__(self, profile: Path, url: str) -> None:
        flags = (
            "--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update "
            "--disable-sync --disable-crash-reporter --no-first-run --remote-debugging-port=0"
        )
        command = [CHROMIUM, *flags.split()]
        self.process = subprocess.Popen(
            [*command, f"--user-data-dir={profile}", "--window-size=1200,900", url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the renderers and helpers are stopped with it
        )
        self.next_id, self.socket = 0, None
        try:
            self.socket = self._connect(profile / "DevToolsActivePort")
            self.wait_loaded()
        except BaseException:
            self.close()
            raise

    def _connect(self, port_file: Path):
        from websockets.sync.client import connect

        for _ in range(300):
            if port_file.is_file() and port_file.read_text().strip():
                break
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        pages = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10).read())
        return connect(next(p for p in pages if p["type"] == "page")["webSocketDebuggerUrl"], max_size=None)

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # a renderer or helper left behind
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        for _ in range(100):  # until the last of the group is gone
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)

    def call(self, method: str, **params):
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=30))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait_loaded(self, new_document: bool = False) -> None:
        loaded = "document.readyState === 'complete' && Boolean(document.querySelector('#progress')?.innerText)"
        if new_document:  # not the old page, still complete while a reload has only begun
            loaded = f"!window.beforeReload && {loaded}"
        deadline = time.time() + 30
        while time.time() < deadline:
            with contextlib.suppress(RuntimeError):  # the old page's context was destroyed by the navigation
                if self.js(loaded):
                    return
            time.sleep(0.05)
        raise AssertionError("the page did not load")

    def key(self, key: str) -> None:
        text = {"text": key} if len(key) == 1 else {}
        code = f"Key{key.upper()}" if len(key) == 1 else key
        for kind in ("keyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=KEY_CODES[key], **text
            )

    def type_into(self, selector: str, text: str) -> None:
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)
        self.key("Escape")  # leaves the field: the labelling keys work again

    def exported(self, downloads: Path, name: str) -> dict:
        """Press Export; the JSON shown on the page, checked equal to the file downloaded."""
        self.js("document.getElementById('export').click()")
        shown = json.loads(self.js("document.getElementById('exported').textContent"))
        path = downloads / name
        for _ in range(100):
            with contextlib.suppress(ValueError, OSError):  # not there yet, or half written
                if json.loads(path.read_text()) == shown:
                    break
            time.sleep(0.05)
        assert json.loads(path.read_text()) == shown
        path.unlink()  # the next export downloads under the same name
        return shown

    def reload(self) -> None:
        self.js("window.beforeReload = true")
        self.call("Page.reload", ignoreCache=True)
        self.wait_loaded(new_document=True)

    def text(self, selector: str = "body") -> str:
        return self.js(f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.innerText).join('\\n')")


@pytest.fixture
def browser_report(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))  # no earlier read's labels carry over
    report = inspect_rewards(InspectionRequest(rewards=REWARDS, samples=addition_samples()))
    browser = Chromium(tmp_path / "profile", Path(report.paths["html"]).as_uri())
    downloads = tmp_path / "downloads"
    browser.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
    try:
        yield report, browser, downloads
    finally:
        browser.close()


def label_with_keys(browser: Chromium, roles: list[str], labels: dict[str, str]) -> None:
    for role in roles:
        browser.key(labels[role][0])  # p, f or u: labels the current role, then moves on


def test_reading_page_label_reload_export_reveal_resolve_export(browser_report):
    report, browser, downloads = browser_report
    order, roles = [s.id for s in report.samples], report.read_roles
    assert sorted(roles) == ["correctness", "format"] and len(order) == 60
    first = {s.id: judged(s.completion, s.columns["answer"]) for s in report.samples}
    misread = next(i for i in order if first[i]["correctness"] == "pass")
    first[misread]["correctness"] = "fail"  # the reader misreads one sample: the reveal names it
    unsure = next(i for i in order if i != misread)
    first[unsure]["format"] = "unsure"
    whole = load_report(report.id)  # what the rewards said, sealed until the labels
    shaping = {f"{s.scores['length_penalty']:.3g}" for s in whole.samples if s.scores["length_penalty"]}
    assert shaping, "the test needs a shaping score to look for"
    source = Path(report.paths["html"]).read_text()
    assert not [figure for figure in shaping if figure in source], "a score in the blind page's source"

    # Label, blind: no score, no extracted answer, no total, no statistics anywhere on the page.
    def assert_blind() -> None:
        page = browser.text()
        assert not [figure for figure in shaping if figure in page], page
        assert "total:" not in page and "Statistics" not in page and "read '" not in page
        assert not any(name in browser.text(".sample") for name in ("exact_match", "length_penalty"))

    assert browser.js("document.querySelectorAll('.sample').length") == 60
    assert "0 of 60 labelled" in browser.text(".bar")
    assert_blind()
    browser.type_into("#reviewer", "Ana")
    for sample_id in order[:10]:
        label_with_keys(browser, roles, first[sample_id])
    assert "10 of 60 labelled" in browser.text(".bar")
    current = "document.querySelector('.sample.current').dataset.id"
    assert int(browser.js(current)) == order[10]
    browser.key("k")
    assert int(browser.js(current)) == order[9]
    in_view = "(r => r.top >= 0 && r.top < innerHeight)(document.querySelector('.current').getBoundingClientRect())"
    assert browser.js(in_view), "the current sample is scrolled into view"
    browser.key("ArrowDown")
    assert int(browser.js(current)) == order[10]

    # A reload keeps the labels and the reviewer, and resumes at the first unlabelled sample.
    browser.reload()
    assert "10 of 60 labelled" in browser.text(".bar")
    assert browser.js("document.getElementById('reviewer').value") == "Ana"
    assert int(browser.js(current)) == order[10]
    for sample_id in order[10:]:
        label_with_keys(browser, roles, first[sample_id])
    assert "60 of 60 labelled" in browser.text(".bar")
    assert "send it to record_review" in browser.text("#status")
    assert_blind()

    # Export: the file record_review takes, with the labels as given; record_review reveals and names the misread.
    request = ReviewRequest.model_validate(browser.exported(downloads, f"{report.id}.review.json"))
    assert request.reviewer == "Ana" and request.reviewer_kind == "human"
    assert request.labels == first and request.amendments == []
    revealed = record_review(request)
    assert revealed.verdict == "pending" and [d.sample_id for d in revealed.review.disagreements] == [misread]

    # The page record_review wrote: every score (rounded), what was extracted, the disagreement; labels locked.
    browser.reload()
    page = browser.text()
    assert [figure for figure in shaping if figure in page] and "Statistics" in page
    assert not unrounded(page), unrounded(page)
    card = browser.text(f"#s-{misread}")
    assert "exact_match (correctness): 1 — pass, read" in card and "you said fail" in card
    disagreements = browser.text("#disagreements li")
    assert f"sample {misread}: exact_match said pass" in disagreements and "you said fail" in disagreements
    assert browser.js("document.querySelectorAll('#disagreements li').length") == 1
    browser.key("p")
    assert "labels are locked" in browser.text("#status")

    # Resolve: the misread is amended to the reward's judgment, with the reason, and exported again.
    browser.js(
        "const s = document.querySelector('#disagreements select'); s.value = 'pass';"
        "s.dispatchEvent(new Event('change', {bubbles: true}))"
    )
    browser.type_into("#disagreements input", "misread: the sum is right")
    assert "resolved by this amendment" in browser.text("#disagreements li")
    assert "0 unresolved; 1 label(s) amended" in browser.text("#amend-count")
    request = ReviewRequest.model_validate(browser.exported(downloads, f"{report.id}.review.json"))
    assert request.labels == first  # as first given, which record_review already has
    assert [a.model_dump() for a in request.amendments] == [
        {"sample_id": misread, "role": "correctness", "label": "pass", "reason": "misread: the sum is right"}
    ]
    result = record_review(request)
    assert result.verdict == "passed", result.verdict_reasons

    # The stored report, reopened with nothing kept in the browser, shows its labels as given and the reveal.
    browser.js("localStorage.clear()")
    browser.reload()
    page = browser.text()
    assert "passed" in browser.text(".verdict") and "Fisher p" in page
    assert "recorded" in browser.text("#disagreements li")
    assert browser.js("[...document.querySelectorAll('.sample button')].every(b => b.disabled)")
    assert browser.js(f"document.querySelector('#s-{unsure} [data-role=format] .on').dataset.label") == "unsure"
