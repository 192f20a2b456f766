"""``light-llm export --format hf`` for a masked-LM encoder: BERT (learned positions) or RoFormer
(rotary), loaded by transformers' AutoModelForMaskedLM with logits equal to light-llm's on a
padded pair batch, and by AutoTokenizer with the same ids. Encoders neither architecture
expresses are refused in one sentence naming every blocking setting, nothing written."""

import pytest
import torch
import transformers

from light_llm.checkpoints import load, save
from light_llm.checkpoints.hf_bert import roformer_position_table
from light_llm.cli import main
from light_llm.models.bert import BertEncoder, EncoderConfig
from light_llm.tokenizers import BertTokenizer
from light_llm.tokenizers.bert import SPECIAL_TOKENS
from tests.conftest import shaken

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = "to be or not that is the question whether tis nobler in mind suffer".split()
TEXTS = [
    ("To be, or not to [MASK]: that is the question.", "Whether tis nobler"),
    ("the mind to suffer", "or not"),
]


def tokenizer() -> BertTokenizer:
    return BertTokenizer([*SPECIAL_TOKENS, *WORDS, ",", ".", ":", "##s", "##er"])


def export(checkpoint, out) -> int:
    return main(["export", "--checkpoint", str(checkpoint), "--format", "hf", "--out", str(out)])


VARIANTS = {
    "bert": {"positions": "learned"},
    "bert-untied-tanh": {"positions": "learned", "tie_embeddings": False,
                         "activation": "gelu_tanh", "head_activation": "gelu_tanh"},
    "bert-relu-ffn-40": {"positions": "learned", "activation": "relu", "head_activation": "relu",
                         "n_inner": 40},
    "roformer": {"positions": "rotary"},
    "roformer-untied": {"positions": "rotary", "tie_embeddings": False},
}  # fmt: skip


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_transformers_computes_the_same_masked_lm_logits(tmp_path, capsys, variant):
    words = tokenizer()
    config = EncoderConfig(
        vocab_size=words.vocab_size, block_size=24, n_layer=2, n_head=2, n_embd=16,
        dropout=0.0, norm_eps=1e-5, **VARIANTS[variant],
    )  # fmt: skip
    model = shaken(BertEncoder(config)).eval()
    save(model, tmp_path / "run", words)
    assert export(tmp_path / "run", tmp_path / "hf") == 0
    name = "RoFormer" if config.positions == "rotary" else "BERT"
    assert f"as a HuggingFace {name} folder ({name.replace('BERT', 'Bert')}ForMaskedLM)" in (
        capsys.readouterr().out
    )
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf").eval()
    assert type(theirs).__name__ == f"{name.replace('BERT', 'Bert')}ForMaskedLM"
    their_words = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    batch = words.batch_encode_plus(TEXTS, padding="longest")
    expected = their_words(TEXTS, padding="longest")
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        assert batch[key] == expected[key], key
    ids, mask, types = (torch.tensor(batch[k]) for k in expected)
    with torch.no_grad():
        ours, _ = model(ids, attention_mask=mask, token_type_ids=types)
        logits = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
    real = mask.bool()
    assert (ours[real] - logits[real]).abs().max().item() <= 2e-5
    back = load(tmp_path / "hf", architecture="bert").eval()  # and read back by light-llm
    with torch.no_grad():
        torch.testing.assert_close(back(ids, attention_mask=mask, token_type_ids=types)[0], ours)


def test_roformers_position_table_is_transformers_own():
    """The table of sines and cosines written into the folder equals the one RoFormer builds."""
    from transformers.models.roformer.modeling_roformer import (
        RoFormerSinusoidalPositionalEmbedding,
    )

    reference = RoFormerSinusoidalPositionalEmbedding(30, 12)
    torch.testing.assert_close(roformer_position_table(30, 12), reference.create_weight())


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"positions": "sinusoidal"}, ["positions='sinusoidal'"]),
        ({"positions": "rotary", "position_base": 500.0}, ["position_base=500"]),
        (
            {"block_order": "pre", "norm": "rmsnorm", "activation": "swiglu", "bias": False},
            ["norm='rmsnorm'", "block_order='pre'", "activation='swiglu'", "bias=False"],
        ),
        ({"head_activation": "relu"}, ["head_activation='relu'"]),
        ({"qk_norm": True}, ["qk_norm=True"]),
    ],
)
def test_an_encoder_no_architecture_expresses_is_one_sentence(tmp_path, capsys, changes, named):
    words = tokenizer()
    config = EncoderConfig(
        vocab_size=words.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=8, **changes
    )
    save(BertEncoder(config), tmp_path / "run", words)
    capsys.readouterr()
    assert export(tmp_path / "run", tmp_path / "hf") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert all(phrase in err for phrase in named), err
    assert not (tmp_path / "hf").exists()
