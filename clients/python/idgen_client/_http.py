"""One idgen service over HTTP: a small pool of keep-alive connections,
requests with a timeout each, answers read up to a size limit. No retries
here: the Client retries GETs, and the Generator decides what a failed
lease call means."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import time
import urllib.parse
import weakref
from dataclasses import dataclass

from .errors import BadResponseError, TransportError, problem_error

__all__ = ["Transport", "Answer", "MAX_BODY"]

# What the client reads of one answer at most. The largest answer idgen
# gives (its --max-count of IDs with their ranges) is well below it.
MAX_BODY = 8 << 20

# Idle connections kept per transport.
_POOL_SIZE = 8


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class Transport:
    """Requests to one idgen service (a node, or a load balancer), safe for
    concurrent use. The token, if any, is sent as a bearer token and shows
    up in no message and no repr."""

    def __init__(self, base_url: str, token: str | None, user_agent: str) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
            raise ValueError("base URL must be http(s)://host[:port][/prefix]")
        if u.username is not None or u.password is not None:
            raise ValueError("base URL must not carry credentials: pass token=")
        try:
            port = u.port
        except ValueError as e:
            raise ValueError(f"base URL: bad port: {e}") from None
        if token is not None:
            if not isinstance(token, str) or not token:
                raise ValueError("token must be a non-empty str (or None)")
            if any(c <= " " or c == "\x7f" or not c.isascii() for c in token):
                raise ValueError("token must be printable ASCII without spaces")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = port
        self._prefix = u.path.rstrip("/")
        self._auth = f"Bearer {token}" if token else None
        self._ua = user_agent
        self._ctx = ssl.create_default_context() if self._https else None
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._closed = False
        self.base_url = urllib.parse.urlunsplit((u.scheme, u.netloc, self._prefix, "", ""))
        _transports.add(self)

    def __repr__(self) -> str:
        return f"Transport({self.base_url!r})"

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ctx)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _take(self) -> http.client.HTTPConnection | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _POOL_SIZE:
                self._idle.append(conn)
                return
        conn.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        timeout: float,
        request_id: str | None = None,
        limit: int = MAX_BODY,
    ) -> Answer:
        """Sends one request (a JSON body when ``body`` is not None) and
        returns the answer, whatever its status. Raises TransportError when
        no answer came within ``timeout`` seconds (per blocking step:
        connecting, sending, each read), BadResponseError for an answer
        above ``limit`` bytes.

        A request on a kept-alive connection that the server had closed
        meanwhile fails before any answer; it is sent once more on a new
        connection. Every request of idgen tolerates that: GETs change
        nothing, and the lease API's calls are made to be sent again
        (docs/leases.md, "An acquire whose answer was lost")."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {
            "Accept": "application/json, application/problem+json",
            "User-Agent": self._ua,
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._auth:
            headers["Authorization"] = self._auth
        if request_id:
            headers["X-Request-ID"] = request_id
        url = self._prefix + path
        for attempt in (0, 1):
            conn = self._take() if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = self._connect(timeout)
            else:
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
            try:
                conn.request(method, url, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read(limit + 1)
                hdrs = {k.lower(): v for k, v in resp.getheaders()}
                will_close = resp.will_close
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.close()
                if reused:
                    continue  # the server closed the idle connection: once more, afresh
                raise TransportError(f"idgen client: {method} {path}: {e or type(e).__name__}") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise TransportError(f"idgen client: {method} {path}: {e or type(e).__name__}") from e
            if len(raw) > limit:
                conn.close()
                raise BadResponseError(f"idgen client: {method} {path}: answer larger than {limit} bytes")
            if will_close:
                conn.close()
            else:
                self._give_back(conn)
            return Answer(resp.status, hdrs, raw)
        raise AssertionError("unreachable")

    def call(
        self,
        method: str,
        path: str,
        *,
        want: int,
        body: object = None,
        timeout: float,
        request_id: str | None = None,
    ) -> dict[str, object]:
        """request, then the JSON object of an answer of status ``want``.
        Raises ProblemError for another status, and as request."""
        a = self.request(method, path, body=body, timeout=timeout, request_id=request_id)
        if a.status != want:
            raise problem_error(a.status, a.headers, a.body, time.time())
        try:
            doc = json.loads(a.body)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadResponseError(f"idgen client: {method} {path}: answer is not JSON: {e}") from None
        if not isinstance(doc, dict):
            raise BadResponseError(f"idgen client: {method} {path}: answer is not a JSON object")
        return doc

    def close(self) -> None:
        """Closes the idle connections; later requests open new ones."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def _forget_after_fork(self) -> None:
        # A child process must not share the parent's connections: requests
        # of both would interleave on one socket. Closing the child's copy
        # of a socket leaves the parent's connection open (no shutdown, no
        # TLS close_notify is sent).
        idle, self._idle = self._idle, []
        self._lock = threading.Lock()
        for c in idle:
            c.close()


_transports: weakref.WeakSet[Transport] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for t in list(_transports):
        t._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
