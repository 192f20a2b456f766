"""Class 6 of issue 12, the whole API surface: a bad argument to the encoder (forward,
encode, attention maps, fill-mask, embeddings), to the GPT's targets and masks, to sampling,
to the NumPy engine or to LoRA is light-llm's typed error with one sentence, never an
IndexError, TypeError or RuntimeError from inside torch or NumPy, and never a quiet answer
(a mask of the wrong length, a str taken as a list of one-character prompts)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from light_llm import GPT, ModelConfig
from light_llm.checkpoints import load, save
from light_llm.checkpoints.hf_encoder_export import export_hf_encoder
from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
from light_llm.checkpoints.hf_llama import export_hf_llama
from light_llm.errors import LightLLMError
from light_llm.generate import filter_logits, generate, generate_text, sample_next
from light_llm.limits import MAX_BATCH_SIZE
from light_llm.models.bert import BertEncoder, EncoderConfig, embed_sentences, predict_masked
from light_llm.models.quantize import quantize_gpt
from light_llm.nn.lora import add_lora, merge_lora
from light_llm.reference.model import NumpyGPT
from light_llm.reference.sampling import generate as numpy_generate
from light_llm.reference.sampling import generate_text as numpy_generate_text
from light_llm.reference.sampling import sample_next as numpy_sample_next
from light_llm.tokenizers import BertTokenizer, CharTokenizer, GPT2Tokenizer
from light_llm.train import train
from light_llm.train.config import TrainConfig
from light_llm.train.numpy_trainer import train_numpy
from tests.reliability.conftest import snapshot

BERT_TOKENIZER = BertTokenizer.packaged()
V = BERT_TOKENIZER.vocab_size
ENCODER = BertEncoder(
    EncoderConfig(vocab_size=V, block_size=16, n_layer=1, n_head=2, n_embd=16)
).eval()
GPT_CONFIG = ModelConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8)
IDS = torch.tensor([[1, 2]])

ENCODER_CALLS = {
    "id = vocab_size": lambda: ENCODER(torch.tensor([[V]])),
    "negative id": lambda: ENCODER(torch.tensor([[-1]])),
    "float ids": lambda: ENCODER(torch.tensor([[1.5]])),
    "bool ids": lambda: ENCODER(torch.tensor([[True]])),
    "one dimension": lambda: ENCODER(torch.tensor([3])),
    "three dimensions": lambda: ENCODER(torch.tensor([[[3]]])),
    "a list": lambda: ENCODER([[1, 2]]),
    "encode, id beyond": lambda: ENCODER.encode(torch.tensor([[V + 7]])),
    "attention maps, id beyond": lambda: ENCODER.attention_maps(torch.tensor([[V]])),
    "token type 5": lambda: ENCODER(IDS, token_type_ids=torch.tensor([[5, 0]])),
    "token types too short": lambda: ENCODER(IDS, token_type_ids=torch.tensor([[0]])),
    "mask too long": lambda: ENCODER(IDS, attention_mask=torch.tensor([[1, 0, 1]])),
    "mask value 2": lambda: ENCODER(IDS, attention_mask=torch.tensor([[1, 2]])),
    "labels of another shape": lambda: ENCODER(IDS, torch.tensor([[1]])),
    "label beyond": lambda: ENCODER(IDS, torch.tensor([[V + 3, -1]])),
    "embed, batch_size '3'": lambda: embed_sentences(ENCODER, BERT_TOKENIZER, ["hi"], 8, "3"),
    "fill-mask, top_k True": lambda: predict_masked(ENCODER, BERT_TOKENIZER, "[MASK]", None, True),
}


@pytest.mark.parametrize("call", ENCODER_CALLS.values(), ids=ENCODER_CALLS.keys())
def test_bad_encoder_arguments_are_a_typed_error(call):
    with pytest.raises(LightLLMError) as raised:
        call()
    assert "\n" not in str(raised.value)


def numpy_model():
    return NumpyGPT(GPT_CONFIG)


API_CALLS = {
    "GPT targets beyond": lambda: GPT(GPT_CONFIG)(IDS, torch.tensor([[1, 99]])),
    "GPT float targets": lambda: GPT(GPT_CONFIG)(IDS, torch.tensor([[1.0, 2.0]])),
    "GPT targets of another shape": lambda: GPT(GPT_CONFIG)(IDS, torch.tensor([[1]])),
    "GPT mask value 2": lambda: GPT(GPT_CONFIG)(IDS, attention_mask=torch.tensor([[1, 2]])),
    "generate, mask too short": lambda: generate(
        GPT(GPT_CONFIG), IDS, 2, attention_mask=torch.tensor([[1]])
    ),
    "generate, temperature '1'": lambda: generate(GPT(GPT_CONFIG), IDS, 2, temperature="1"),
    "generate, top_p '0.5'": lambda: generate(GPT(GPT_CONFIG), IDS, 2, top_p="0.5"),
    "generate, top_k nan": lambda: generate(GPT(GPT_CONFIG), IDS, 2, top_k=float("nan")),
    "generate, eos_id 'a'": lambda: generate(GPT(GPT_CONFIG), IDS, 2, eos_id="a"),
    "generate, eos_id beyond": lambda: generate(GPT(GPT_CONFIG), IDS, 2, eos_id=99),
    "generate_text, one str": lambda: generate_text(
        GPT(GPT_CONFIG), CharTokenizer.from_text("abcdefghij"), "ab", 2
    ),
    "sample_next, NaN logits": lambda: sample_next(torch.full((1, 10), float("nan"))),
    "sample_next, a list": lambda: sample_next([[1.0, 2.0]]),
    "filter_logits, 0-d": lambda: filter_logits(torch.tensor(1.0), top_k=1),
    "new_cache('2')": lambda: GPT(GPT_CONFIG).new_cache("2"),
    "numpy sample_next, 1-d": lambda: numpy_sample_next(np.zeros(10)),
    "numpy sample_next, NaN": lambda: numpy_sample_next(np.full((1, 10), np.nan)),
    "numpy load_state_dict(None)": lambda: numpy_model().load_state_dict(None),
    "numpy backward(None)": lambda: numpy_model().backward(None),
    "LoRA dropout '0.1'": lambda: add_lora(GPT(GPT_CONFIG), "c_attn", 2, dropout="0.1"),
    "LoRA targets 5": lambda: add_lora(GPT(GPT_CONFIG), 5, 2),
    "LoRA on None": lambda: add_lora(None, "c_attn", 2),
}


@pytest.mark.parametrize("call", API_CALLS.values(), ids=API_CALLS.keys())
def test_bad_arguments_across_the_api_are_a_typed_error(call):
    with pytest.raises(LightLLMError) as raised:
        call()
    assert "\n" not in str(raised.value)


def test_valid_masks_labels_and_types_still_give_the_unchecked_answer():
    """The checks refuse only what is wrong: a bool mask, IGNORE labels and type 1 give the
    same numbers as before."""
    torch.manual_seed(0)
    ids = torch.tensor([[5, 6, 7]])
    hidden = ENCODER.encode(ids, torch.tensor([[True, True, False]]), torch.tensor([[0, 1, 1]]))
    same = ENCODER.encode(ids, torch.tensor([[1, 1, 0]]), torch.tensor([[0, 1, 1]]))
    assert torch.equal(hidden, same)
    logits, loss = ENCODER(ids, torch.tensor([[-1, 9, -1]]))
    expected = torch.nn.functional.cross_entropy(ENCODER(ids)[0][0, 1:2], torch.tensor([9]))
    assert torch.allclose(loss, expected)


# issue 27, class 9: each a typed error naming the argument (checkpoint: a saved char GPT)
NAMED_CALLS = {
    "load, device 'tpu'": (lambda ck: load(ck, device="tpu"), "device"),
    "load, device 'cuda' without a GPU": (lambda ck: load(ck, device="cuda"), "device"),
    "load, device 'cuda:99'": (lambda ck: load(ck, device="cuda:99"), "device"),
    "load, dtype int8": (lambda ck: load(ck, dtype=torch.int8), "dtype"),
    "load, dtype 'half-ish'": (lambda ck: load(ck, dtype="half-ish"), "dtype"),
    "GPT, int8 ids": (lambda ck: GPT(GPT_CONFIG)(IDS.to(torch.int8)), "int8"),
    "GPT, uint8 ids": (lambda ck: GPT(GPT_CONFIG)(IDS.to(torch.uint8)), "uint8"),
    "GPT, int32 targets": (lambda ck: GPT(GPT_CONFIG)(IDS, IDS.to(torch.int32)), "target"),
    "encoder, int8 ids": (lambda ck: ENCODER(IDS.to(torch.int8)), "int8"),
    "generate, int8 ids": (lambda ck: generate(GPT(GPT_CONFIG), IDS.to(torch.int8), 2), "int8"),
    "generate, a NumpyGPT": (lambda ck: generate(numpy_model(), IDS, 2), "model"),
    "generate_text, a NumpyGPT": (
        lambda ck: generate_text(numpy_model(), CharTokenizer.from_text("abcdefghij"), ["a"], 2),
        "model",
    ),
    "generate_text, 65,537 prompts": (
        lambda ck: generate_text(
            GPT(GPT_CONFIG), CharTokenizer.from_text("abcdefghij"), ["a"] * (MAX_BATCH_SIZE + 1), 1
        ),
        "prompts",
    ),
    "generate_text, tokenizer None": (
        lambda ck: generate_text(GPT(GPT_CONFIG), None, ["a"], 2),
        "tokenizer",
    ),
    "generate_text, tokenizer 'char'": (
        lambda ck: generate_text(GPT(GPT_CONFIG), "char", ["a"], 2),
        "tokenizer",
    ),
    "numpy generate_text, tokenizer None": (
        lambda ck: numpy_generate_text(numpy_model(), None, "a", 2),
        "tokenizer",
    ),
    "numpy generate_text, a list of prompts": (
        lambda ck: numpy_generate_text(
            numpy_model(), CharTokenizer.from_text("abcdefghij"), ["a"], 2
        ),
        "prompt",
    ),
    "generate_text, a tokenizer of more ids than the model": (
        lambda ck: generate_text(GPT(GPT_CONFIG), GPT2Tokenizer(), ["a"], 2),
        "tokenizer has 50,257 ids and the model 10",
    ),
    "numpy generate_text, a tokenizer of more ids than the model": (
        lambda ck: numpy_generate_text(numpy_model(), GPT2Tokenizer(), "a", 2),
        "tokenizer has 50,257 ids and the model 10",
    ),
    "numpy generate_text, a PyTorch GPT": (
        lambda ck: numpy_generate_text(
            GPT(GPT_CONFIG), CharTokenizer.from_text("abcdefghij"), "a", 2
        ),
        "model",
    ),
    "numpy generate, a PyTorch GPT": (
        lambda ck: numpy_generate(GPT(GPT_CONFIG), np.array([[1]]), 2),
        "model",
    ),
    "load, numpy engine, device 'tpu'": (
        lambda ck: load(ck, engine="numpy", device="tpu"),
        "device",
    ),
    "load, numpy engine, device 'cuda'": (
        lambda ck: load(ck, engine="numpy", device="cuda"),
        "device",
    ),
    "export_hf_llama, a NumpyGPT": (
        lambda ck: export_hf_llama(numpy_model(), ck.parent / "hf"),
        "model to export must be a GPT",
    ),
    "export_hf_gpt2, None": (lambda ck: export_hf_gpt2(None, ck.parent / "hf"), "model"),
    "export_hf_gpt2, folder 123": (lambda ck: export_hf_gpt2(load(ck), 123), "folder"),
    "export_hf_llama, tokenizer 'bpe'": (
        lambda ck: export_hf_llama(load(ck), ck.parent / "hf", "bpe"),
        "tokenizer must be a light-llm tokenizer",
    ),
    "export_hf_gpt2, a tokenizer of other ids": (
        lambda ck: export_hf_gpt2(load(ck), ck.parent / "hf", GPT2Tokenizer()),
        "the tokenizer has 50,257 ids but the model has",
    ),
    "export_hf_encoder, a GPT": (
        lambda ck: export_hf_encoder(load(ck), ck.parent / "hf", BERT_TOKENIZER),
        "model to export must be a BertEncoder",
    ),
    "export_hf_encoder, a char tokenizer": (
        lambda ck: export_hf_encoder(ENCODER, ck.parent / "hf", CharTokenizer.from_text("ab")),
        "tokenizer must be a BertTokenizer",
    ),
    "merge_lora(None)": (lambda ck: merge_lora(None), "merged into a torch model"),
    "quantize_gpt, a NumpyGPT": (lambda ck: quantize_gpt(numpy_model()), "PyTorch GPT"),
    "quantize_gpt, an encoder": (lambda ck: quantize_gpt(ENCODER), "PyTorch GPT"),
    "save, tokenizer 'char'": (lambda ck: save(GPT(GPT_CONFIG), ck, tokenizer="char"), "tokenizer"),
    "save, numpy, tokenizer 'char'": (
        lambda ck: save(numpy_model(), ck, tokenizer="c"),
        "tokenizer",
    ),
}


@pytest.mark.parametrize("call", NAMED_CALLS.values(), ids=NAMED_CALLS.keys())
def test_bad_arguments_are_a_typed_error_naming_the_argument(char_checkpoint, call):
    function, name = call
    before = snapshot(char_checkpoint)
    with pytest.raises(LightLLMError) as raised:
        function(char_checkpoint)
    assert "\n" not in str(raised.value)
    assert name in str(raised.value)
    assert snapshot(char_checkpoint) == before


@pytest.mark.parametrize("dtype", [torch.float16, "bfloat16", torch.float64])
def test_load_gives_the_dtype_asked_for(char_checkpoint, dtype):
    model = load(char_checkpoint, dtype=dtype)
    expected = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    assert {parameter.dtype for parameter in model.parameters()} == {expected}


@pytest.mark.parametrize("engine", ["torch", "numpy"])
@pytest.mark.parametrize("flags", [{"resume": "no"}, {"overwrite": "yes"}, {"resume": 1}])
def test_a_flag_that_is_not_a_bool_is_refused_before_the_run_folder_is_read(
    tmp_path, corpus, engine, flags
):
    """TrainConfig(resume="no") reached the trainers, which read "no" as true and said
    "--resume found no checkpoint" before anything checked the flag."""
    config = TrainConfig(data=str(corpus), out=str(tmp_path / "out"), **flags)
    with pytest.raises(LightLLMError, match=rf"^{next(iter(flags))} must be true or false"):
        (train if engine == "torch" else train_numpy)(config)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("export", [export_hf_gpt2, export_hf_llama])
def test_export_overwrite_no_keeps_the_users_files(char_checkpoint, tmp_path, export):
    """overwrite="no" was read for its truth, and "no" is true: the user's notes went."""
    folder = tmp_path / "users"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(LightLLMError, match="^overwrite must be true or false, got 'no'"):
        export(load(char_checkpoint), folder, overwrite="no")
    assert [path.name for path in folder.iterdir()] == ["notes.txt"]
