"""The chat page in Debian's headless Chromium, driven over the DevTools
protocol (with the `websockets` package): it loads, connects, sends a
message, the reply streams in (the text grows in several steps), tokens/s
is shown, Stop cancels a reply, an image attached to a message goes with
it to a model that reads images, and a screenshot is kept in the build
folder (test-artifacts/chat_page.png) as a CI artifact."""
import asyncio
import base64
import itertools
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import Server

websockets = pytest.importorskip("websockets")


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class DevTools:
    """A minimal Chrome DevTools Protocol client for one page."""

    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(self, method, **params):
        i = next(self.ids)
        await self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            msg = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def js(self, expression):
        r = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    async def wait_js(self, expression, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.js(expression):
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {expression}")


@pytest.fixture(scope="module")
def chromium():
    path = find_chromium()
    if path is None:
        pytest.skip("no chromium (Debian: apt-get install chromium; scripts/setup --tests does)")
    profile = tempfile.mkdtemp(prefix="troupe-chromium-")
    proc = subprocess.Popen([path, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                             "--window-size=1000,800", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = pathlib.Path(profile) / "DevToolsActivePort"
    deadline = time.time() + 60
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail("chromium did not start its DevTools endpoint")
        time.sleep(0.1)
    port = int(port_file.read_text().split()[0])
    yield port
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(profile, ignore_errors=True)


def page_ws_url(port):
    deadline = time.time() + 30
    while time.time() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        if pages:
            return pages[0]["webSocketDebuggerUrl"]
        time.sleep(0.1)
    raise AssertionError("no page target in chromium")


# Records every length the reply's text takes, as the page updates it.
OBSERVE = """
window.__lengths = [];
new MutationObserver(() => {
  const bubbles = document.querySelectorAll('.msg.assistant');
  const body = bubbles.length ? bubbles[bubbles.length - 1].firstChild : null;
  if (body) window.__lengths.push(body.textContent.length);
}).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
true
"""


def test_chat_page_streams_and_stops(server, chromium, artifacts):
    async def go():
        async with websockets.connect(page_ws_url(chromium), max_size=None) as ws:
            dt = DevTools(ws)
            await dt.call("Page.enable")
            await dt.call("Page.navigate", url=server.url("/"))
            await dt.wait_js("document.readyState === 'complete' && !document.getElementById('send').disabled")
            assert await dt.js("document.getElementById('model').textContent") == "stories260K"
            await dt.js(OBSERVE)
            await dt.js("document.getElementById('max-tokens').value = '120';"
                        "document.getElementById('temperature').value = '0';"
                        "document.getElementById('prompt').value = 'Tell me a story about a cat.';"
                        "document.getElementById('composer').requestSubmit(); true")
            await dt.wait_js("document.querySelector('.msg.assistant[data-done]') !== null")
            reply = await dt.js("document.querySelector('.msg.assistant').firstChild.textContent")
            done = await dt.js("document.querySelector('.msg.assistant').dataset.done")
            tokens = int(await dt.js("document.querySelector('.msg.assistant').dataset.tokens"))
            lengths = await dt.js("window.__lengths")
            stats = await dt.js("document.getElementById('stats').textContent")
            shot = await dt.call("Page.captureScreenshot", format="png")
            (artifacts / "chat_page.png").write_bytes(base64.b64decode(shot["data"]))

            # A long reply, stopped after its first tokens.
            await dt.js("document.getElementById('max-tokens').value = '480';"
                        "document.getElementById('temperature').value = '0.8';"
                        "document.getElementById('prompt').value = 'And another one.';"
                        "document.getElementById('composer').requestSubmit(); true")
            await dt.wait_js("(() => { const b = document.querySelectorAll('.msg.assistant');"
                             " return b.length === 2 && Number(b[1].dataset.tokens || 0) >= 2; })()")
            await dt.js("document.getElementById('stop').click(); true")
            await dt.wait_js("document.querySelectorAll('.msg.assistant')[1].dataset.done !== undefined")
            stopped = await dt.js("document.querySelectorAll('.msg.assistant')[1].dataset.done")
            stopped_tokens = int(await dt.js("document.querySelectorAll('.msg.assistant')[1].dataset.tokens"))
            return reply, done, tokens, lengths, stats, stopped, stopped_tokens

    reply, done, tokens, lengths, stats, stopped, stopped_tokens = asyncio.run(go())
    assert done in ("stop", "length")
    assert len(reply) > 20
    assert tokens > 5
    # The text appeared piece by piece: many distinct lengths, growing.
    growing = [x for x in lengths if x > 0]
    assert len(set(growing)) >= 5, lengths
    assert growing == sorted(growing)
    assert "tokens/s" in stats
    assert (artifacts / "chat_page.png").stat().st_size > 1000
    assert stopped == "cancelled"
    assert stopped_tokens < 480


def test_chat_page_sends_attached_images(chromium, artifacts, request):
    """With a model that reads images (the tiny Gemma 3 fixture), the page
    shows its attach button; a PNG attached through the file input goes with
    the message as an image_url part, shows in the user's bubble, and the
    reply streams (the image counted in the prompt: prompt tokens as
    transformers counts them for this chat)."""
    troupe = os.path.abspath(request.config.getoption("--troupe"))
    fixture = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "hf" / "gemma3_vision"
    reference = json.loads((fixture / "reference.json").read_text())
    case = reference["cases"][0]  # the image, then a question
    s = Server(troupe, str(fixture), ["-t", "1"], artifacts / "serve-browser-vision.log")
    try:
        async def go():
            async with websockets.connect(page_ws_url(chromium), max_size=None) as ws:
                dt = DevTools(ws)
                await dt.call("Page.enable")
                await dt.call("DOM.enable")
                await dt.call("Page.navigate", url=s.url("/"))
                await dt.wait_js("document.readyState === 'complete' && !document.getElementById('send').disabled")
                assert await dt.js("document.getElementById('attach').hidden") is False
                doc = await dt.call("DOM.getDocument")
                node = await dt.call("DOM.querySelector", nodeId=doc["root"]["nodeId"], selector="#image-input")
                await dt.call("DOM.setFileInputFiles", files=[str(fixture / "image0.png")], nodeId=node["nodeId"])
                await dt.wait_js("document.querySelectorAll('#attached img').length === 1")
                question = case["messages"][0]["content"][1]["text"]
                await dt.js("document.getElementById('max-tokens').value = '8';"
                            "document.getElementById('temperature').value = '0';"
                            f"document.getElementById('prompt').value = {json.dumps(question)};"
                            "document.getElementById('composer').requestSubmit(); true")
                await dt.wait_js("document.querySelector('.msg.assistant[data-done]') !== null")
                return (await dt.js("document.querySelectorAll('.msg.user img').length"),
                        await dt.js("document.querySelectorAll('#attached img').length"),
                        await dt.js("document.querySelector('.msg.assistant').dataset.done"),
                        await dt.js("document.getElementById('stats').textContent"))

        in_bubble, left_attached, done, stats = asyncio.run(go())
    finally:
        s.stop()
    assert in_bubble == 1
    assert left_attached == 0
    assert done in ("stop", "length"), stats
    # The image's 16 tokens, framed as Gemma 3's processor frames them.
    assert f"{len(case['prompt_ids'])} prompt tokens" in stats, stats
