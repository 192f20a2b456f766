"""What the explorer refuses before any route sees a request: its one line of defence as an
unauthenticated server on this machine.

- **A foreign Host header** (421): a web page on another site can make the browser send
  requests to 127.0.0.1 under its own host name once its DNS answers 127.0.0.1 (DNS
  rebinding); only the loopback names (localhost, 127.0.0.1, [::1]) and the --host given are
  answered.
- **Another site's page** (403): a request whose ``Origin`` is not one of those hosts; with
  no permissive CORS headers either, another origin can neither read the API nor start a
  generation.
- **A body over** :data:`MAX_BODY_BYTES` (413): refused from its Content-Length before it is
  read, or as soon as a body without one has sent more.

Each refusal is one sentence in ``{"detail": ...}``, as every other error of the API.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from light_llm.limits import format_bytes
from light_llm.serve.fields import MAX_PROMPT_CHARACTERS

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# the largest body a valid request can be: 64 sentences of the longest prompt, each character
# a JSON escape such as \u00e9 (6 bytes), and room for the other fields
MAX_BODY_BYTES = 64 * MAX_PROMPT_CHARACTERS * 6 + 2**16
UNSPECIFIED = frozenset({"0.0.0.0", "::", ""})  # listening on every interface


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine only."""
    return host.strip("[]").lower() in LOOPBACK_HOSTS or host.startswith("127.")


def allowed_hosts(listen_host: str | None) -> frozenset[str]:
    """The host names the explorer answers: the loopback names, the ``--host`` it listens on,
    and, listening on every interface (0.0.0.0, ::), this machine's name."""
    names = set(LOOPBACK_HOSTS)
    if listen_host:
        host = listen_host.strip("[]").lower()
        if host in UNSPECIFIED:
            names.update({socket.gethostname().lower(), socket.getfqdn().lower()})
        else:
            names.add(host)
    return frozenset(names)


def host_name(value: str) -> str:
    """The name in a Host header: without its port, without the brackets of an IPv6
    address, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """ASGI middleware refusing a foreign Host, a foreign Origin and an oversized body
    (module docstring) before ``app`` sees the request."""

    def __init__(self, app, hosts: Iterable[str], max_body: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.hosts = frozenset(hosts)
        self.max_body = max_body

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", [])
        }
        host = host_name(headers.get("host", ""))
        if host not in self.hosts:
            await refuse(
                send,
                421,
                f"this explorer answers requests for {', '.join(sorted(self.hosts))} only, "
                f"not for the host {host or '(none)'!r}.",
            )
            return
        origin = headers.get("origin")
        if origin is not None and host_name(urlsplit(origin).netloc) not in self.hosts:
            await refuse(send, 403, f"requests from pages of {origin} are not answered here.")
            return
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            await refuse(send, 413, self.too_large())
            return
        started = refused = False  # the app's response began; the body was refused here

        async def tracked_send(message) -> None:
            nonlocal started
            if refused:  # the app answering a request refused while it read the body
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        async def too_large() -> None:
            nonlocal refused
            if not started and not refused:
                refused = True
                await refuse(send, 413, self.too_large())

        await self.app(scope, self.bounded(receive, too_large), tracked_send)

    def too_large(self) -> str:
        return f"the request body is larger than the {format_bytes(self.max_body)} allowed."

    def bounded(self, receive, refuse_body):
        """``receive`` that answers 413 (``refuse_body``) and reports the client gone once the
        body passes the bound (a body sent without a Content-Length, or a false one)."""
        received = 0

        async def receive_bounded():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    await refuse_body()
                    return {"type": "http.disconnect"}
            return message

        return receive_bounded


async def refuse(send, status: int, sentence: str) -> None:
    """Answer ``status`` with ``{"detail": sentence}``."""
    body = json.dumps({"detail": sentence}).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
