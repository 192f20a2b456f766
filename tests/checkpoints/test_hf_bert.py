"""HuggingFace BERT weights in the light-llm encoder, against sentence-transformers and
transformers themselves."""

import json
import os

import pytest
import safetensors.torch
import torch
import torch.nn.functional as F

from light_llm.checkpoints import load
from light_llm.checkpoints.hf_bert import load_hf_bert, packaged_minilm_path
from light_llm.errors import CheckpointError
from light_llm.models.bert import embed_sentences
from light_llm.tokenizers import BertTokenizer

SENTENCES = [
    "I love dogs.",
    "I love dogs. Dogs are great.",
    "The bank of the river was flooded!",
    "To be, or not to be, that is the question.",
    "A man, a plan, a canal: Panama",
    "Café déjà vu — naïve résumé",
    "GPUs multiply matrices; CPUs wait patiently.",
    "x",
    "",
    "Shall I compare thee to a summer's day? Thou art more lovely and more temperate: rough "
    "winds do shake the darling buds of May, and summer's lease hath all too short a date.",
    "Numbers like 3.14159 and 2,718 tokenize into pieces.",
    "東京 is the capital of Japan.",
]


@pytest.fixture(scope="module")
def minilm():
    return load_hf_bert(packaged_minilm_path())


@pytest.fixture(scope="module")
def sentence_transformer():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(packaged_minilm_path()), device="cpu")


def test_minilm_embeddings_match_sentence_transformers(minilm, sentence_transformer):
    reference = torch.from_numpy(sentence_transformer.encode(SENTENCES, batch_size=5))
    ours = embed_sentences(minilm, BertTokenizer.packaged(), SENTENCES, batch_size=5)
    assert ours.dtype == torch.float32 and ours.shape == reference.shape == (len(SENTENCES), 384)
    cosines = F.cosine_similarity(ours, reference, dim=-1)
    assert torch.all(cosines >= 0.99999), cosines
    torch.testing.assert_close(ours.norm(dim=-1), torch.ones(len(SENTENCES)))


def test_minilm_hidden_states_match_transformers_on_a_padded_pair_batch(minilm):
    from transformers import BertModel

    reference_model = BertModel.from_pretrained(str(packaged_minilm_path())).eval()
    batch = BertTokenizer.packaged().batch_encode_plus(
        [("I love chess", "I love soccer"), "The bank of the river was flooded!", "x"],
        padding="longest",
    )
    inputs = {key: torch.tensor(value) for key, value in batch.items()}
    with torch.no_grad():
        expected = reference_model(**inputs).last_hidden_state
        ours = minilm.encode(**inputs)
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(ours[real], expected[real], atol=2e-5, rtol=1e-4)


def test_batching_never_changes_minilm_embeddings(minilm):
    tokenizer = BertTokenizer.packaged()
    batched = embed_sentences(minilm, tokenizer, SENTENCES, batch_size=len(SENTENCES))
    for i, sentence in enumerate(SENTENCES):
        alone = embed_sentences(minilm, tokenizer, [sentence])
        torch.testing.assert_close(batched[i], alone[0], atol=1e-6, rtol=1e-5)


MASKED_LM_SHAPE = dict(
    vocab_size=61,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=48,
    max_position_embeddings=24,
)


def loaded_and_compared(folder, reference):
    """``reference`` (a transformers masked-LM model) with its zero-initialised biases and
    LayerNorms moved off 0 and 1, saved to ``folder`` and loaded by light-llm; its logits
    against light-llm's on a padded batch of two sentences with token types. The model."""
    with torch.no_grad():
        for name, parameter in reference.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                parameter.add_(0.1 * torch.randn_like(parameter))
    reference.eval().save_pretrained(folder)
    model = load(folder, architecture="bert")
    ids = torch.randint(1, 61, (2, 11))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    types = torch.zeros_like(ids)
    types[:, 4:] = 1
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
        ours, _ = model(ids, attention_mask=mask, token_type_ids=types)
    real = mask.bool()
    torch.testing.assert_close(ours[real], expected[real], atol=1e-5, rtol=1e-4)
    return model


@pytest.mark.parametrize(
    "tie, hidden_act",
    [(True, "gelu"), (False, "gelu"), (True, "relu"), (True, "gelu_new"), (False, "gelu_new")],
)
def test_masked_lm_head_matches_transformers(tmp_path, tie, hidden_act):
    """The head's transform applies the checkpoint's hidden_act, as transformers does."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(**MASKED_LM_SHAPE, hidden_act=hidden_act, tie_word_embeddings=tie)
    torch.manual_seed(1)
    model = loaded_and_compared(tmp_path, BertForMaskedLM(config))
    assert model.config.n_inner == 48 and model.config.tie_embeddings == tie


@pytest.mark.parametrize("tie", [True, False])
def test_a_roformer_folder_loads_as_a_rotary_encoder(tmp_path, tie):
    """RoFormerForMaskedLM (BERT with rotary positions on q and k, base 10000) saved by
    transformers: light-llm's rotary encoder computes the same logits on a padded pair batch."""
    from transformers import RoFormerConfig, RoFormerForMaskedLM

    torch.manual_seed(2)
    config = RoFormerConfig(**MASKED_LM_SHAPE, tie_word_embeddings=tie)
    model = loaded_and_compared(tmp_path, RoFormerForMaskedLM(config))
    assert model.config.positions == "rotary" and model.config.tie_embeddings == tie


def test_a_roformer_folder_light_llm_cannot_compute_is_one_sentence(tmp_path):
    """Values turned too (rotary_value), or a table of positions that is not the formula's."""
    from transformers import RoFormerConfig, RoFormerForMaskedLM

    shape = dict(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=16, max_position_embeddings=8)  # fmt: skip
    RoFormerForMaskedLM(RoFormerConfig(**shape, rotary_value=True)).save_pretrained(tmp_path / "v")
    with pytest.raises(CheckpointError, match="rotary_value"):
        load(tmp_path / "v", architecture="bert")
    RoFormerForMaskedLM(RoFormerConfig(**shape)).save_pretrained(tmp_path / "t")
    weights = tmp_path / "t" / "model.safetensors"
    tensors = safetensors.torch.load_file(weights)
    tensors["roformer.encoder.embed_positions.weight"] += 0.5
    safetensors.torch.save_file(tensors, weights)
    with pytest.raises(CheckpointError, match="not RoFormer's table of sines and cosines"):
        load(tmp_path / "t", architecture="bert")


def test_refuses_pickled_weights(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not opened")
    with pytest.raises(CheckpointError, match="safetensors"):
        load_hf_bert(tmp_path)


def test_refuses_a_folder_that_is_not_bert(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    with pytest.raises(CheckpointError, match="not a HuggingFace BERT folder"):
        load_hf_bert(tmp_path)
    with pytest.raises(CheckpointError, match="roberta model, not a BERT-style encoder"):
        load(tmp_path, architecture="bert")


def test_unsupported_position_embeddings_are_refused(tmp_path):
    hf_config = json.loads((packaged_minilm_path() / "config.json").read_text())
    hf_config["position_embedding_type"] = "relative_key"
    (tmp_path / "config.json").write_text(json.dumps(hf_config))
    (tmp_path / "model.safetensors").symlink_to(packaged_minilm_path() / "model.safetensors")
    with pytest.raises(CheckpointError, match="relative_key"):
        load_hf_bert(tmp_path)


def test_load_config_of_a_huggingface_bert_points_to_load():
    """load_config reads light-llm checkpoints' configs; a HuggingFace BERT's is read with its
    weights (a tied head shows only there): one sentence naming load, which reads it."""
    from light_llm.checkpoints import load_config

    with pytest.raises(CheckpointError, match="is a HuggingFace BERT folder") as refused:
        load_config(packaged_minilm_path(), architecture="bert")
    assert 'load(folder, architecture="bert")' in str(refused.value)
    assert load(packaged_minilm_path(), architecture="bert").config.n_layer == 6


@pytest.mark.parametrize("cased", [False, True])
def test_a_bert_folder_transformers_saved_without_vocab_txt_reads_its_tokenizer_json(
    tmp_path, monkeypatch, cased
):
    """transformers 5 saves a BERT folder's tokenizer as tokenizer.json alone: light-llm reads
    it, to BertTokenizerFast's ids on accented, cased and CJK text, cased or not as its
    normalizer says; and the model in that folder gives transformers' hidden states."""
    import transformers

    from light_llm.tokenizers import load_tokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = packaged_minilm_path()
    theirs = transformers.AutoTokenizer.from_pretrained(source, do_lower_case=not cased)
    theirs.save_pretrained(tmp_path)
    transformers.AutoModel.from_pretrained(source).save_pretrained(tmp_path)
    assert not (tmp_path / "vocab.txt").exists() and (tmp_path / "tokenizer.json").is_file()
    ours = load_tokenizer(tmp_path)
    text = "Héllo, WORLD! naïve CAFÉ 東京 [MASK] unbelievable"
    assert ours.encode(text) == theirs.encode(text, add_special_tokens=False)
    assert ours.lowercase is not cased
    ids = torch.tensor([ours.encode_plus("The river bank.")["input_ids"]])
    with torch.no_grad():
        expected = transformers.AutoModel.from_pretrained(tmp_path)(ids).last_hidden_state
        hidden = load(tmp_path, architecture="bert").encode(ids)
    torch.testing.assert_close(hidden, expected, atol=2e-5, rtol=1e-4)
