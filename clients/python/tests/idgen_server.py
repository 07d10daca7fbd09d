"""The real idgen for the tests: the binary IDGEN_BIN names (make py-test
builds it and sets it), else one built from this repository with the go
command on PATH. Neither there is an error, never a skip: the tests of this
package run against the real server or fail.

A Node is one `idgen serve` on SQLite, on a free loopback port, with a
tokens file and an admin token; every wait on it is bounded."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT = 60.0  # a bound on a hang, sized for a loaded machine

_build_lock = threading.Lock()
_built: str | None = None


def idgen_binary() -> str:
    """The idgen binary: $IDGEN_BIN, else built once per test run."""
    global _built
    given = os.environ.get("IDGEN_BIN")
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise RuntimeError(f"IDGEN_BIN={given!r} is not an executable file (make py-test builds it)")
        return os.path.abspath(given)
    with _build_lock:
        if _built is not None:
            return _built
        go = shutil.which("go")
        if go is None:
            raise RuntimeError("no idgen binary: set IDGEN_BIN to a built idgen (make py-test does), or put go on PATH")
        out = os.path.join(tempfile.mkdtemp(prefix="idgen-py-bin-"), "idgen")
        r = subprocess.run([go, "build", "-o", out, "./cmd/idgen"], cwd=REPO_ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"go build ./cmd/idgen failed (set IDGEN_BIN to use a built binary):\n{r.stderr}")
        _built = out
        return out


def wait_for(what: str, cond: "object", timeout: float = 30.0, every: float = 0.05) -> None:
    """Polls cond() until it is true; fails after timeout seconds (a bound
    on a hang, not a timing)."""
    assert callable(cond)
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Node:
    """One idgen serve process. ``tokens`` maps a caller's name to its
    scopes; each gets a random secret (``secret[name]``). Nodes of one
    cluster share a ``dsn``, a ``tokens_file`` (with ``secrets_of``, the
    secrets of its callers) and an ``admin_token``."""

    def __init__(
        self,
        directory: str,
        name: str = "node",
        *,
        dsn: str | None = None,
        tokens: dict[str, str] | None = None,
        tokens_file: str | None = None,
        args: list[str] | None = None,
        secrets_of: dict[str, str] | None = None,
        admin_token: str | None = None,
    ) -> None:
        self.dir = directory
        self.name = name
        self.dsn = dsn or f"sqlite:{os.path.join(directory, 'idgen.db')}"
        self.admin_token = admin_token or secrets.token_urlsafe(24)
        self.secret: dict[str, str] = dict(secrets_of or {})
        if tokens_file is None and tokens:
            lines = []
            for caller, scopes in tokens.items():
                s = self.secret.setdefault(caller, secrets.token_urlsafe(24))
                lines.append(f"{caller} {scopes} {sha256_hex(s)}\n")
            tokens_file = os.path.join(directory, f"{name}.tokens")
            with open(tokens_file, "w") as f:
                f.writelines(lines)
            os.chmod(tokens_file, 0o600)
        self.addr_file = os.path.join(directory, f"{name}.addr")
        self.log_path = os.path.join(directory, f"{name}.log")
        argv = [
            idgen_binary(),
            "serve",
            "--listen", "127.0.0.1:0",
            "--addr-file", self.addr_file,
            "--dsn", self.dsn,
            "--holder", name,
            "--admin-token", self.admin_token,
            "--shutdown-timeout", "5s",
            "--drain-window", "0",
        ]
        if tokens_file is not None:
            argv += ["--tokens-file", tokens_file]
        argv += args or []
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = ""
        try:
            self._wait_started()
        except BaseException:
            self.kill()
            raise

    def _wait_started(self) -> None:
        def listening() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{self.tail()}")
            try:
                addr = Path(self.addr_file).read_text().strip()
            except FileNotFoundError:
                return False
            if addr:
                self.url = f"http://{addr}"
            return bool(addr)

        wait_for(f"{self.name} listening", listening, START_TIMEOUT)

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{self.tail()}")
            return self.get("/readyz")[0] == 200

        wait_for(f"{self.name} ready", ready, START_TIMEOUT)

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""

    def request(self, method: str, path: str, body: object = None, token: str | None = None) -> tuple[int, object, dict[str, str]]:
        """One plain request (no retries), for checks beside the client."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw, status, hdrs = resp.read(), resp.status, dict(resp.headers)
        except urllib.error.HTTPError as e:
            raw, status, hdrs = e.read(), e.code, dict(e.headers)
        except OSError:
            return 0, None, {}
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = raw.decode(errors="replace")
        return status, doc, hdrs

    def get(self, path: str, token: str | None = None) -> tuple[int, object]:
        status, doc, _ = self.request("GET", path, token=token)
        return status, doc

    def admin(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        status, doc, _ = self.request(method, path, body, token=self.admin_token)
        return status, doc

    def lease_row(self, dc: int, worker: int) -> dict[str, object]:
        status, doc = self.admin("GET", "/admin/leases")
        assert status == 200 and isinstance(doc, dict), (status, doc)
        for row in doc["leases"]:
            if row["datacenter"] == dc and row["worker"] == worker:
                return dict(row)
        return {}

    def lease_events(self, **filters: object) -> list[dict[str, object]]:
        """Every lease event matching the filters, page by page (bounded)."""
        out: list[dict[str, object]] = []
        after = 0
        for _ in range(1000):
            q = "&".join([f"after={after}", "limit=1000"] + [f"{k}={v}" for k, v in filters.items()])
            status, doc = self.admin("GET", f"/admin/lease-events?{q}")
            assert status == 200 and isinstance(doc, dict), (status, doc)
            out.extend(doc["events"])
            if doc.get("next_after") is None:
                return out
            after = int(doc["next_after"])
        raise AssertionError("lease events: too many pages")

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, then SIGKILL after timeout; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()
