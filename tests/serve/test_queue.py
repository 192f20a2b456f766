"""Generations queue behind each other while the server keeps answering: a real uvicorn server
on a thread (the test client buffers streams), its generation slot held by the test."""

from __future__ import annotations

import json
import threading

import httpx

PROMPT = "the king"


def read_events(response: httpx.Response):
    """(event, data) pairs as they arrive."""
    kind = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            yield kind, json.loads(line[len("data: ") :])


def test_a_generation_waits_for_the_one_before_and_the_server_answers_meanwhile(live):
    base, explorer = live
    body = {"prompt": PROMPT, "max_new_tokens": 8, "seed": 3}
    alone = [event for event in read_events(httpx.post(base + "api/generate", json=body))]

    explorer.generation_lock.acquire()  # a generation is running
    explorer.generation_queue_position()
    try:
        with httpx.stream("POST", base + "api/generate", json=body, timeout=60) as response:
            events = read_events(response)
            assert next(events) == ("queued", {"ahead": 1})
            # while it waits, the page's other requests are answered
            card = httpx.get(base + "api/model", timeout=10)
            assert card.status_code == 200
            next_token = httpx.post(base + "api/next-token", json={"prompt": PROMPT}, timeout=10)
            assert next_token.status_code == 200
            explorer.leave_generation_queue()
            explorer.generation_lock.release()
            rest = list(events)
    finally:
        if explorer.generation_lock.locked():
            explorer.leave_generation_queue()
            explorer.generation_lock.release()
    assert rest == alone  # the same seeded text, once its turn came
    assert explorer.generations_ahead == 0


def test_two_generations_at_once_both_finish_with_their_own_text(live):
    base, _ = live
    results: dict[int, str] = {}

    def run(seed: int) -> None:
        body = {"prompt": PROMPT, "max_new_tokens": 40, "seed": seed}
        with httpx.stream("POST", base + "api/generate", json=body, timeout=60) as response:
            results[seed] = [data for kind, data in read_events(response) if kind == "done"][0]

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for seed in (1, 2):
        body = {"prompt": PROMPT, "max_new_tokens": 40, "seed": seed}
        alone = list(read_events(httpx.post(base + "api/generate", json=body, timeout=60)))
        assert results[seed] == alone[-1][1]
