"""Integration tests of `troupe serve`: each module starts real servers on
free loopback ports with the stories260K model and drives them with real
clients. ctest passes --troupe (the built binary), --model (the GGUF) and
--artifacts (a folder in the build tree for screenshots and server logs)."""
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.request

import pytest


def pytest_addoption(parser):
    parser.addoption("--troupe", default=os.environ.get("TROUPE_BIN", "build/release/troupe"))
    parser.addoption("--model", default=os.environ.get("TROUPE_TEST_MODEL",
                                                       "../shared/models/stories260K/stories260K.gguf"))
    parser.addoption("--artifacts", default=os.environ.get("TROUPE_TEST_ARTIFACTS", "build/test-artifacts"))


def pytest_sessionfinish(session, exitstatus):
    """A module skipped whole (a client package or chromium missing) leaves
    no test run: report that to ctest as skipped (77), not as a failure."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = 77


class Server:
    """A `troupe serve` process on 127.0.0.1 and a free port."""

    def __init__(self, troupe, model, args, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        cmd = [troupe, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0", *args]
        self.log.write("$ " + " ".join(cmd) + "\n")
        self.log.flush()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.time() + 60
        self.base = None
        while self.base is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"troupe serve exited early; see {log_path}")
            self.log.write(line)
            m = re.search(r"listening on (http://[\d.]+:\d+)/", line)
            if m:
                self.base = m.group(1)
            if time.time() > deadline:
                raise RuntimeError("troupe serve did not start listening in time")
        self.port = int(self.base.rsplit(":", 1)[1])
        self.wait_ready(deadline)

    def wait_ready(self, deadline):
        while True:
            try:
                with urllib.request.urlopen(self.base + "/ready", timeout=5) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as e:
                if e.code != 503:
                    raise
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("troupe serve did not become ready in time")
            time.sleep(0.05)

    def url(self, path):
        return self.base + path

    def ws_url(self, path="/v1/stream"):
        return "ws://127.0.0.1:%d%s" % (self.port, path)

    def metrics(self):
        """The /metrics samples as {series: value}."""
        with urllib.request.urlopen(self.base + "/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def wait_metric(self, series, predicate, timeout=20):
        deadline = time.time() + timeout
        value = None
        while time.time() < deadline:
            value = self.metrics().get(series)
            if value is not None and predicate(value):
                return value
            time.sleep(0.05)
        raise AssertionError(f"{series} is {value} after {timeout} s")

    def stop(self):
        """SIGTERM; the server must exit cleanly (0), which under ASan also
        means without leaks."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"troupe serve did not stop on SIGTERM; see {self.log_path}")
        rest = self.proc.stdout.read()
        self.log.write(rest)
        self.log.close()
        assert self.proc.returncode == 0, f"troupe serve exited with {self.proc.returncode}; see {self.log_path}"


@pytest.fixture(scope="session")
def artifacts(request):
    path = pathlib.Path(request.config.getoption("--artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def start_server(request, artifacts):
    """start_server(*flags) -> Server; every server is stopped (and must
    exit cleanly) when the module ends."""
    troupe = os.path.abspath(request.config.getoption("--troupe"))
    model = os.path.abspath(request.config.getoption("--model"))
    if not os.path.exists(troupe):
        pytest.skip(f"no troupe binary at {troupe}")
    servers = []

    def start(*args):
        log = artifacts / f"serve-{request.module.__name__}-{len(servers)}.log"
        s = Server(troupe, model, [str(a) for a in args], log)
        servers.append(s)
        return s

    yield start
    errors = []
    for s in servers:
        try:
            s.stop()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, errors


@pytest.fixture(scope="module")
def server(start_server):
    return start_server()


@pytest.fixture(scope="session")
def reference_text(request):
    """The published greedy output of stories260K from BOS (the README next
    to the model, quoting llama2.c's output)."""
    readme = pathlib.Path(request.config.getoption("--model")).parent / "README.md"
    text = readme.read_text()
    section = text[text.index("## Reference output"):]
    return section.split("```\n", 1)[1].split("\n```", 1)[0]
