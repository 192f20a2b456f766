"""``light-llm embed``: the packaged MiniLM's sentence embeddings, as sentence-transformers
gives them, and one sentence for bad input."""

import json
import os

import numpy as np
import pytest

from light_llm.checkpoints import save
from light_llm.checkpoints.hf_bert import packaged_minilm_path
from light_llm.cli import main
from light_llm.config import ModelConfig
from light_llm.models.gpt import GPT

SENTENCES = ["I love chess", "I love soccer", "The bank of the river was flooded!"]


@pytest.fixture(scope="module")
def reference_vectors():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(packaged_minilm_path()), device="cpu")
    return model.encode(SENTENCES)


def run_json(capsys, *argv):
    assert main(["embed", "--json", *argv]) == 0
    return np.array(json.loads(capsys.readouterr().out))


def test_json_vectors_match_sentence_transformers(capsys, reference_vectors):
    vectors = run_json(capsys, *SENTENCES)
    assert vectors.shape == (3, 384)
    cosines = (vectors * reference_vectors).sum(-1) / np.linalg.norm(reference_vectors, axis=-1)
    assert np.all(cosines >= 0.99999)


def test_similarity_matrix_is_the_reference_cosines(capsys, reference_vectors):
    matrix = run_json(capsys, "--similarity", *SENTENCES)
    unit = reference_vectors / np.linalg.norm(reference_vectors, axis=-1, keepdims=True)
    np.testing.assert_allclose(matrix, unit @ unit.T, atol=1e-5)


def test_text_output_names_each_sentence(capsys):
    assert main(["embed", *SENTENCES]) == 0
    out = capsys.readouterr().out
    assert "384 dimensions" in out and all(f"] {s}" in out for s in SENTENCES)
    assert main(["embed", "--similarity", *SENTENCES]) == 0
    table = capsys.readouterr().out.splitlines()[-3:]
    assert [line.split()[0] for line in table] == ["[0]", "[1]", "[2]"]
    assert [float(line.split()[i + 1]) for i, line in enumerate(table)] == [1.0, 1.0, 1.0]


def test_cls_pooling_and_a_short_max_length_change_the_vectors(capsys):
    mean = run_json(capsys, "The bank of the river was flooded!")
    cls = run_json(capsys, "--pooling", "cls", "The bank of the river was flooded!")
    short = run_json(capsys, "--max-length", "4", "The bank of the river was flooded!")
    same_start = run_json(capsys, "the bank")  # [CLS] the bank [SEP]: what 4 positions keep
    assert not np.allclose(mean, cls) and not np.allclose(mean, short)
    np.testing.assert_allclose(short, same_start, atol=1e-6)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("light-llm embed: error: ") and "\n" not in err
    return err


def test_a_gpt_checkpoint_is_refused_in_one_sentence(tmp_path, capsys):
    save(
        GPT(ModelConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)),
        tmp_path / "gpt",
    )
    assert main(["embed", "--checkpoint", str(tmp_path / "gpt"), "a sentence"]) == 2
    assert "holds a GPT, not a BERT-style encoder" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-length", "1"], "--max-length must be an integer from 2 to"),
        (["--batch-size", "0"], "batch-size must be an integer from 1 to"),
        (["--checkpoint", "/nonexistent/folder"], "no checkpoint folder"),
    ],
)
def test_bad_options_get_one_sentence(capsys, argv, message):
    assert main(["embed", *argv, "a sentence"]) == 2
    assert message in one_error_line(capsys)


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_an_empty_sentence_is_refused_as_the_server_refuses_it(capsys, blank):
    """The server answers 422 "sentence 1 is empty: ..." for ["a bank", ""]; the CLI says it
    in the same words, in one sentence, rather than embedding [CLS] [SEP]."""
    assert main(["embed", "a bank", blank, "a river"]) == 2
    line = one_error_line(capsys)
    assert "sentence 1 is empty" in line and line.endswith(".")
