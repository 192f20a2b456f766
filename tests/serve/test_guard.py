"""Classes 4, 10 and 11 of issue 27 for the explorer's server (serve/guard.py, app.py):

- another site's page cannot read the API: no permissive CORS, a foreign Origin refused (403);
- a foreign Host header is refused (421: DNS rebinding), the loopback names and --host answered;
- a body over the bound is refused before it is read (413), with or without Content-Length;
- no path outside the static folder is served;
- a flood of requests leaves it responsive, its memory bounded;
- every field's bounds are the library's, checked before a stream starts (422), and a value of
  another JSON type is refused rather than converted;
- SIGTERM stops `light-llm serve` at once, cutting an open stream;
- a non-loopback --host is warned about on stderr.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import threading

import httpx
import pytest

from light_llm.limits import MAX_NEW_TOKENS, SEED_LIMIT
from light_llm.serve import ExplorerModel, create_app
from light_llm.serve.guard import MAX_BODY_BYTES, allowed_hosts, host_name
from tests.serve.conftest import local_client
from tests.serve.test_queue import read_events

FOREIGN_HOSTS = ["evil.example", "evil.example:8000", "192.168.1.5", "127.0.0.1.evil.example"]
LOOPBACK_HOSTS = ["localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"]


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
@pytest.mark.parametrize("path", ["/api/model", "/", "/static/explorer.js"])
def test_a_foreign_host_header_is_refused(client, host, path):
    response = client.get(path, headers={"Host": host})
    assert response.status_code == 421
    detail = response.json()["detail"]
    assert host_name(host) in detail and "\n" not in detail


def test_a_generation_for_a_foreign_host_never_starts(client):
    body = {"prompt": "the", "max_new_tokens": 2}
    response = client.post("/api/generate", json=body, headers={"Host": "evil.example"})
    assert response.status_code == 421
    assert "event:" not in response.text


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_loopback_host_names_are_answered(client, host):
    assert client.get("/api/model", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize(
    ("listen", "answered"),
    [("10.1.2.3", "10.1.2.3:8000"), ("my-box.lan", "my-box.lan"), ("::", socket.gethostname())],
)
def test_the_host_given_is_answered(gpt_run, listen, answered):
    assert host_name(answered) in allowed_hosts(listen)
    with local_client(create_app(ExplorerModel(gpt_run, "test"), host=listen)) as client:
        assert client.get("/api/model", headers={"Host": answered}).status_code == 200
        assert client.get("/api/model", headers={"Host": "evil.example"}).status_code == 421


@pytest.mark.parametrize("origin", ["http://evil.example", "https://127.0.0.1.evil.example"])
def test_another_sites_page_cannot_read_or_run_the_api(client, origin):
    for response in (
        client.get("/api/model", headers={"Origin": origin}),
        client.post("/api/next-token", json={"prompt": "the"}, headers={"Origin": origin}),
        client.options(
            "/api/model", headers={"Origin": origin, "Access-Control-Request-Method": "GET"}
        ),
    ):
        assert response.status_code == 403
        assert "access-control-allow-origin" not in response.headers


def test_the_page_itself_is_answered_with_no_cors_headers(client):
    response = client.get("/api/model", headers={"Origin": "http://127.0.0.1:8000"})
    assert response.status_code == 200
    assert not any(name.startswith("access-control-") for name in response.headers)


def test_an_oversized_body_is_refused_from_its_length_before_it_is_read(client):
    response = client.post(
        "/api/tokenize",
        content=b"{}",
        headers={"Content-Length": str(300 * 2**20), "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert "larger than" in response.json()["detail"]


def test_an_oversized_body_without_a_length_is_cut_off(client):
    def chunks():  # sent chunked: no Content-Length to judge it by
        yield b'{"text": "'
        for _ in range(MAX_BODY_BYTES // 2**16 + 2):
            yield b"a" * 2**16
        yield b'"}'

    response = client.post(
        "/api/tokenize", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413


def test_a_body_within_the_bound_is_read(client):
    assert client.post("/api/tokenize", json={"text": "the king"}).status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e/%2e%2e/errors.py",
        "/static//etc/passwd",
        "/static/%2fetc%2fpasswd",
        "/static/../../../../../../etc/passwd",
        "/api/explain/attention/figures/..%2f..%2fapp.py",
    ],
)
def test_no_path_outside_the_static_folder_is_served(client, path):
    response = client.get(path)
    assert response.status_code in (404, 400, 421)
    assert "import" not in response.text and "root:" not in response.text


def peak_memory_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def raw_request(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(request)
        connection.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: connection.recv(65536), b""))


def test_a_flood_of_requests_leaves_the_server_responsive_and_its_memory_bounded(live):
    base, _ = live
    port = int(base.rstrip("/").rsplit(":", 1)[1])
    peak_before = peak_memory_kib()
    huge = (  # a 300 MB body announced, never sent: refused from its length
        b"POST /api/tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 314572800\r\nConnection: close\r\n\r\n{"
    )
    foreign = b"GET /api/model HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
    answers: list[bytes] = []

    def flood(count: int) -> None:
        with httpx.Client(base_url=base, timeout=120) as http:
            for index in range(count):
                if index % 3 == 0:
                    answers.append(raw_request(port, huge))
                elif index % 3 == 1:
                    answers.append(raw_request(port, foreign))
                else:
                    status = http.post("api/tokenize", json={"text": "the king " * 50})
                    answers.append(str(status.status_code).encode())

    threads = [threading.Thread(target=flood, args=(40,)) for _ in range(8)]  # 320 requests
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 320
    assert sum(b" 413 " in answer for answer in answers) == 8 * 14
    assert sum(b" 421 " in answer for answer in answers) == 8 * 13
    assert sum(answer == b"200" for answer in answers) == 8 * 13
    # still answering, and the refused 300 MB bodies were never held in memory
    assert httpx.get(base + "api/model", timeout=30).status_code == 200
    assert peak_memory_kib() - peak_before < 100 * 1024


BOUNDS = {
    "seed at 2^63-1": {"seed": 2**63 - 1},
    "seed at 2^32": {"seed": SEED_LIMIT},
    "too many tokens": {"max_new_tokens": MAX_NEW_TOKENS + 1},
    "temperature as a string": {"temperature": "1.0"},
    "top_k as true": {"top_k": True},
    "top_p as a string": {"top_p": "0.5"},
    "seed as a float": {"seed": 3.0},
    "max_new_tokens as a string": {"max_new_tokens": "5"},
}


@pytest.mark.parametrize("field", BOUNDS)
def test_generate_fields_are_checked_by_the_librarys_bounds_before_the_stream(client, field):
    body = {"prompt": "the", "max_new_tokens": 2, **BOUNDS[field]}
    response = client.post("/api/generate", json=body)
    assert response.status_code == 422
    assert "event:" not in response.text
    (error,) = response.json()["detail"]
    assert error["loc"][-1] == next(iter(BOUNDS[field]))


@pytest.mark.parametrize("field", ["temperature", "top_k", "limit"])
def test_next_token_takes_numbers_not_strings_or_booleans(client, field):
    for value in ("1", True):
        response = client.post("/api/next-token", json={"prompt": "the", field: value})
        assert response.status_code == 422, (field, value)


def test_the_largest_seed_the_library_takes_is_taken(client):
    body = {"prompt": "the", "max_new_tokens": 2, "seed": SEED_LIMIT - 1}
    assert "event: done" in client.post("/api/generate", json=body).text


# ---------------------------------------------------------------------- the process
def start_server(folder, *flags):
    process = subprocess.Popen(
        [sys.executable, "-m", "light_llm", "serve", "--checkpoint", folder, "--port", "0"]
        + list(flags),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    for line in process.stdout:
        if line.startswith("open "):
            return process, line.split()[1]
    raise AssertionError(process.stderr.read())


def test_sigterm_stops_serve_at_once_cutting_an_open_stream(gpt_run):
    process, url = start_server(gpt_run)
    try:
        body = {"prompt": "the", "max_new_tokens": 5000, "seed": 1}  # seconds of tokens
        with httpx.stream("POST", url + "api/generate", json=body, timeout=120) as response:
            events = read_events(response)
            assert next(events)[0] == "start"
            process.send_signal(signal.SIGTERM)
            kinds = set()
            with contextlib.suppress(httpx.RemoteProtocolError):  # the stream cut short
                kinds.update(kind for kind, _ in events)
        assert "done" not in kinds  # cut, not run to its last token first
        assert process.wait(timeout=120) in (0, -signal.SIGTERM)
    finally:
        process.kill()
        process.wait()


def test_a_host_that_is_not_loopback_is_warned_about(gpt_run):
    process, _ = start_server(gpt_run, "--host", "0.0.0.0")
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=120)
    lines = [line for line in process.stderr.read().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: --host 0.0.0.0"), lines
    assert "Traceback" not in "".join(lines)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_a_loopback_host_is_not_warned_about(capsys, host):
    from light_llm.cli.serve import warn_if_exposed

    warn_if_exposed(host)
    assert capsys.readouterr().err == ""
