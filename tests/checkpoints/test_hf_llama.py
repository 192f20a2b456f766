"""HuggingFace Llama and Qwen3 export and import, checked against ``transformers``' own
LlamaForCausalLM and Qwen3ForCausalLM (through AutoModelForCausalLM, no remote code) and
AutoTokenizer; nothing is downloaded. The models are small, their weights shaken off their
initial values so that the logits are far from uniform."""

import json

import numpy as np
import pytest
import safetensors.torch
import torch
import transformers

from light_llm.checkpoints import load, load_config
from light_llm.checkpoints.hf_architectures import hf_architecture
from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2
from light_llm.checkpoints.hf_llama import export_hf_llama
from light_llm.config import ModelConfig, preset
from light_llm.errors import CheckpointError, ConfigError
from light_llm.generate import generate
from light_llm.models.gpt import GPT
from light_llm.tokenizers import CharTokenizer, GPT2Tokenizer
from light_llm.tokenizers.bpe import train_bpe
from tests.conftest import shaken

CORPUS = (
    "The quick brown fox jumps over the lazy dog, and the dog sleeps on. "
    "A tokenizer learns its merges from the text it is given: the more often a pair of "
    "symbols occurs, the sooner it becomes a token of its own. Then the model learns, "
    "token by token, which token is likely to come next.\n"
) * 4
UNSEEN = "Ünïcödé ναι, 你好 — 🎉 naïve café\n\ttabs  and <|endoftext|> too"
LLAMA_SHAPE = dict(
    block_size=32,
    n_layer=2,
    n_head=4,
    n_embd=32,
    bias=False,
    positions="rotary",
    norm="rmsnorm",
    activation="swiglu",
)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def bpe():
    return train_bpe(CORPUS, 320)


def shaken_gpt(config: ModelConfig) -> GPT:
    return shaken(GPT(config).eval())


def their_model(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager"
    ).eval()


def max_logit_difference(ours: GPT, theirs, idx: torch.Tensor) -> float:
    with torch.no_grad():
        return (ours(idx)[0] - theirs(idx).logits).abs().max().item()


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize(
    "qk_norm, class_name", [(False, "LlamaForCausalLM"), (True, "Qwen3ForCausalLM")]
)
def test_exported_logits_equal_transformers(tmp_path, bpe, qk_norm, class_name, tied):
    config = ModelConfig(
        vocab_size=bpe.vocab_size, qk_norm=qk_norm, tie_embeddings=tied, **LLAMA_SHAPE
    )
    ours = shaken_gpt(config)
    export_hf_llama(ours, tmp_path / "hf", bpe)
    theirs = their_model(tmp_path / "hf")
    assert type(theirs).__name__ == class_name
    idx = torch.randint(0, config.vocab_size, (2, config.block_size))
    assert max_logit_difference(ours, theirs, idx) <= 1e-4
    assert theirs.config.eos_token_id == bpe.eos_id == 0


@pytest.mark.parametrize("qk_norm", [False, True])
def test_greedy_text_equals_transformers_generate(tmp_path, bpe, qk_norm):
    config = ModelConfig(vocab_size=bpe.vocab_size, qk_norm=qk_norm, **LLAMA_SHAPE)
    ours = shaken_gpt(config)
    export_hf_llama(ours, tmp_path / "hf", bpe)
    theirs = their_model(tmp_path / "hf")
    prompt = torch.tensor([bpe.encode("The quick brown")])
    n_new = config.block_size - prompt.size(1)
    with torch.no_grad():
        expected = theirs.generate(
            prompt,
            max_new_tokens=n_new,
            min_new_tokens=n_new,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    assert torch.equal(generate(ours, prompt, n_new, temperature=0.0), expected)


def test_auto_tokenizer_gives_the_ids_of_a_learned_bpe(tmp_path, bpe):
    export_hf_llama(
        shaken_gpt(ModelConfig(vocab_size=bpe.vocab_size, **LLAMA_SHAPE)), tmp_path, bpe
    )
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ids = bpe.encode(UNSEEN)
    assert theirs(UNSEEN)["input_ids"] == ids
    assert theirs.decode(ids) == UNSEEN
    assert theirs.eos_token_id == bpe.eos_id


def test_auto_tokenizer_gives_gpt2s_ids_beside_a_llama(tmp_path):
    tokenizer = GPT2Tokenizer()
    config = ModelConfig(vocab_size=tokenizer.vocab_size, **LLAMA_SHAPE)
    export_hf_llama(GPT(config), tmp_path, tokenizer)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ids = tokenizer.encode(UNSEEN)
    assert theirs(UNSEEN)["input_ids"] == ids and tokenizer.eos_id in ids
    assert theirs.decode(ids) == UNSEEN


def test_auto_tokenizer_gives_the_ids_of_a_char_tokenizer(tmp_path):
    tokenizer = CharTokenizer.from_text(UNSEEN + CORPUS)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, **LLAMA_SHAPE)
    export_hf_llama(shaken_gpt(config), tmp_path, tokenizer)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    text = "dog — 你好 🎉, naïve\n\tthe fox"
    assert theirs(text)["input_ids"] == tokenizer.encode(text)
    assert theirs.decode(tokenizer.encode(text)) == text
    hf_config = json.loads((tmp_path / "config.json").read_text())
    assert hf_config["bos_token_id"] is hf_config["eos_token_id"] is None


def test_gpt2_export_of_a_char_model_names_no_special_token_it_lacks(tmp_path):
    """transformers' GPT2Config says eos 50256 when config.json does not say otherwise."""
    tokenizer = CharTokenizer.from_text(CORPUS)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=8
    )
    export_hf_gpt2(GPT(config), tmp_path, tokenizer)
    theirs = transformers.AutoConfig.from_pretrained(tmp_path)
    assert theirs.eos_token_id is None and theirs.bos_token_id is None
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert hf_tokenizer("the lazy dog")["input_ids"] == tokenizer.encode("the lazy dog")


def test_the_default_model_is_refused_naming_its_blocking_switches():
    with pytest.raises(ConfigError) as refusal:
        hf_architecture(preset("bpe-cpu"))
    sentence = str(refusal.value)
    assert "activation='relu2' (ReLU² has no gate" in sentence
    assert "logit_softcap=15.0" in sentence
    assert "with activation='swiglu' and logit_softcap=None it would export as Qwen3" in sentence
    assert ". " not in sentence and sentence.endswith("(Qwen3ForCausalLM).")  # one sentence


def test_each_expressible_shape_gets_its_architecture():
    small = dict(vocab_size=40, block_size=16, n_head=2, n_embd=8)
    assert hf_architecture(ModelConfig(**small)) == "GPT-2"
    assert hf_architecture(ModelConfig(**{**small, **LLAMA_SHAPE})) == "Llama"
    assert hf_architecture(ModelConfig(**{**small, **LLAMA_SHAPE, "qk_norm": True})) == "Qwen3"


@pytest.mark.parametrize(
    "changes, architecture",
    [
        ({"norm": "rmsnorm"}, "GPT-2"),  # one switch from GPT-2, five from Llama
        ({**LLAMA_SHAPE, "positions": "learned"}, "Llama"),
        ({**LLAMA_SHAPE, "qk_norm": True, "attention": "linear"}, "Qwen3"),
    ],
)
def test_the_nearest_architecture_is_the_one_with_fewest_blockers(changes, architecture):
    config = ModelConfig(vocab_size=40, **{"block_size": 16, "n_head": 2, "n_embd": 8, **changes})
    with pytest.raises(ConfigError, match=f"it would export as {architecture} "):
        hf_architecture(config)


@pytest.mark.parametrize(
    "changes",
    [
        {"tie_embeddings": False},
        {"tie_embeddings": True, "position_base": 500.0, "norm_eps": 1e-6},
        {"qk_norm": True, "tie_embeddings": False, "n_inner": 40},
        {"qk_norm": True, "tie_embeddings": True, "dropout": 0.1},
    ],
)
def test_out_and_back_in_gives_bit_identical_weights(tmp_path, bpe, changes):
    config = ModelConfig(vocab_size=bpe.vocab_size, **{**LLAMA_SHAPE, **changes})
    ours = shaken_gpt(config)
    export_hf_llama(ours, tmp_path / "hf", bpe)
    assert load_config(tmp_path / "hf") == config
    back = load(tmp_path / "hf")
    assert set(back.state_dict()) == set(ours.state_dict())
    for name, tensor in ours.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor), name
    numpy_engine = load(tmp_path / "hf", engine="numpy")
    for name, array in numpy_engine.params.items():
        assert np.array_equal(array, ours.state_dict()[name].numpy()), name


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_a_folder_transformers_saved_loads_with_its_logits(tmp_path, model_type):
    torch.manual_seed(5)
    shape = dict(
        vocab_size=61,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=8,
        max_position_embeddings=24,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
    )
    hf_config = transformers.AutoConfig.for_model(model_type, **shape)
    theirs = transformers.AutoModelForCausalLM.from_config(hf_config).eval()
    with torch.no_grad():
        for name, parameter in theirs.named_parameters():
            if not name.endswith(("q_norm.weight", "k_norm.weight")):
                parameter.add_(0.3 * torch.randn_like(parameter))
    theirs.save_pretrained(tmp_path)
    ours = load(tmp_path)
    assert ours.config.qk_norm == (model_type == "qwen3")
    idx = torch.randint(0, 61, (2, 24))
    assert max_logit_difference(ours, theirs, idx) <= 1e-4


def test_a_damaged_folder_names_the_tensor_and_both_shapes(tmp_path, bpe):
    export_hf_llama(
        shaken_gpt(ModelConfig(vocab_size=bpe.vocab_size, **LLAMA_SHAPE)), tmp_path, bpe
    )
    tensors = safetensors.torch.load_file(tmp_path / "model.safetensors")
    tensors["model.layers.1.mlp.up_proj.weight"] = torch.zeros(80, 32)
    safetensors.torch.save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError) as refusal:
        load(tmp_path)
    assert "model.layers.1.mlp.up_proj.weight has shape (80, 32) but the config needs (88, 32)" in (
        str(refusal.value)
    )


def test_a_qwen3_norm_gain_light_llm_lacks_is_refused(tmp_path, bpe):
    config = ModelConfig(vocab_size=bpe.vocab_size, qk_norm=True, **LLAMA_SHAPE)
    export_hf_llama(shaken_gpt(config), tmp_path, bpe)
    tensors = safetensors.torch.load_file(tmp_path / "model.safetensors")
    tensors["model.layers.0.self_attn.k_norm.weight"][3] = 1.5
    safetensors.torch.save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="k_norm.weight is not all ones"):
        load(tmp_path)


@pytest.mark.parametrize(
    "option, value",
    [
        ("num_key_value_heads", 2),
        ("hidden_act", "gelu"),
        ("attention_bias", True),
        ("rope_parameters", {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}),
    ],
)
def test_llama_options_light_llm_does_not_compute_are_named(tmp_path, bpe, option, value):
    export_hf_llama(
        shaken_gpt(ModelConfig(vocab_size=bpe.vocab_size, **LLAMA_SHAPE)), tmp_path, bpe
    )
    hf_config = json.loads((tmp_path / "config.json").read_text())
    hf_config[option] = value
    (tmp_path / "config.json").write_text(json.dumps(hf_config))
    with pytest.raises(CheckpointError, match="cannot be loaded: .*(not supported|RoPE scaling)"):
        load(tmp_path)


@pytest.mark.parametrize("qk_norm", [False, True])
def test_transformer_lens_reads_an_export_with_the_same_logits_and_patterns(tmp_path, bpe, qk_norm):
    """TransformerLens 4's bridge over the exported folder: its logits, and each layer's
    attention pattern (hook_pattern, after TransformerLens's own RoPE), equal light-llm's."""
    import transformer_lens  # here: a second or so to import, which other tests need not pay

    config = ModelConfig(vocab_size=bpe.vocab_size, qk_norm=qk_norm, **LLAMA_SHAPE)
    ours = shaken_gpt(config)
    export_hf_llama(ours, tmp_path, bpe)
    bridge = transformer_lens.TransformerBridge.boot_transformers(
        str(tmp_path),
        hf_model=their_model(tmp_path),
        tokenizer=transformers.AutoTokenizer.from_pretrained(tmp_path),
        device="cpu",
    )
    idx = torch.randint(0, config.vocab_size, (2, config.block_size))
    for block in ours.transformer.h:
        block.attn.record_weights = True
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(idx)
        assert (logits - ours(idx)[0]).abs().max().item() <= 1e-4
    for i, block in enumerate(ours.transformer.h):
        pattern = cache[f"blocks.{i}.attn.hook_pattern"]
        assert (pattern - block.attn.last_weights).abs().max().item() <= 1e-5


def int8(model):
    from light_llm.models.quantize import quantize_gpt

    return quantize_gpt(model)


def unmerged_lora(model):
    from light_llm.nn.lora import add_lora, lora_layers

    add_lora(model, "c_attn", rank=2)
    for layer in lora_layers(model).values():  # B = 0 at first: make the adapters count
        torch.nn.init.normal_(layer.lora_B)
    return model


@pytest.mark.parametrize(("kind", "words"), [(int8, "int8"), (unmerged_lora, "LoRA")])
@pytest.mark.parametrize(
    ("export", "shape"),
    [
        (export_hf_llama, LLAMA_SHAPE),
        (export_hf_gpt2, dict(block_size=32, n_layer=1, n_head=2, n_embd=32)),
    ],
)
def test_a_model_a_huggingface_folder_cannot_hold_is_refused(tmp_path, export, shape, kind, words):
    # int8 codes written as weights (no scales), or adapters left out of the weights, made a
    # folder transformers could not load or that computed the base model's logits
    tokenizer = CharTokenizer(list("abcdefghijklmnop"))
    model = kind(shaken_gpt(ModelConfig(vocab_size=tokenizer.vocab_size, **shape)))
    with pytest.raises(ConfigError, match=words):
        export(model, tmp_path / "hf", tokenizer)
    assert not (tmp_path / "hf").exists()
