"""Models for the explorer's tests: a GPT trained for a few iterations by ``light-llm train``
(so that it has a trainer state and a metrics log) and a tiny random encoder with a masked-LM
head, both saved as folders the server loads; test clients of the server on each."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import torch
import uvicorn
from fastapi.testclient import TestClient

from light_llm.checkpoints import load, load_tokenizer, save
from light_llm.cli import main
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.serve import ExplorerModel, create_app
from light_llm.tokenizers import BertTokenizer
from tests.train.helpers import tiny_flags, write_corpus


def local_client(app) -> TestClient:
    """A test client of ``app`` as a browser on this machine calls it (Host 127.0.0.1; the
    explorer refuses other host names)."""
    return TestClient(app, base_url="http://127.0.0.1")


@pytest.fixture(scope="session")
def gpt_run(tmp_path_factory):
    """A training output folder: 10 iterations of the tiny character-level GPT on a small
    corpus (one token a character, so that the tests can count a prompt's tokens)."""
    folder = tmp_path_factory.mktemp("explorer")
    corpus = write_corpus(folder / "corpus.txt", n_lines=300)
    out = folder / "run"
    assert main(["train", *tiny_flags(corpus, out, n_layer=2, tokenizer="char")]) == 0
    return out


@pytest.fixture(scope="session")
def bpe_run(tmp_path_factory):
    """The same over the default tokenizer, a BPE learned from the corpus (fewer ids)."""
    folder = tmp_path_factory.mktemp("explorer-bpe")
    corpus = write_corpus(folder / "corpus.txt", n_lines=300)
    out = folder / "run"
    assert main(["train", *tiny_flags(corpus, out, n_layer=2, max_iters=2)]) == 0
    return out


@pytest.fixture(scope="session")
def encoder_folder(tmp_path_factory):
    """A random 2-layer encoder with an MLM head and the packaged WordPiece vocabulary."""
    tokenizer = BertTokenizer.packaged()
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size, block_size=24, n_layer=2, n_head=2, n_embd=16
    )
    folder = tmp_path_factory.mktemp("encoder") / "checkpoint"
    save(BertEncoder(config).eval(), folder, tokenizer=tokenizer)
    return folder


@pytest.fixture(scope="module")
def gpt(gpt_run):
    """The run's model and tokenizer, loaded apart from the server's."""
    return load(gpt_run), load_tokenizer(gpt_run)


@pytest.fixture(scope="module")
def client(gpt_run):
    with local_client(create_app(ExplorerModel(gpt_run, "test"))) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def encoder_client(encoder_folder):
    with local_client(create_app(ExplorerModel(encoder_folder, "test"))) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def live(gpt_run):
    """(base URL, the ExplorerModel it serves)."""
    explorer = ExplorerModel(gpt_run, "test")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(explorer), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server stopped before it started"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/", explorer
    server.should_exit = True
    thread.join()
    sock.close()
