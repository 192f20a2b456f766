"""HuggingFace GPT-2 interop, checked against ``transformers``' own GPT2LMHeadModel (randomly
initialised here; nothing is downloaded)."""

import json

import pytest
import safetensors.torch
import torch
import transformers

from light_llm.checkpoints import load
from light_llm.checkpoints.hf_gpt2 import export_hf_gpt2, load_hf_gpt2
from light_llm.checkpoints.hf_gpt2_config import config_from_hf
from light_llm.config import ModelConfig
from light_llm.errors import CheckpointError, ConfigError
from light_llm.generate import generate
from light_llm.models.gpt import GPT
from light_llm.tokenizers import CharTokenizer, GPT2Tokenizer, load_tokenizer

VOCAB = 50257


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """A random GPT-2 with the seed's shape (6 layers, 6 heads, 384 wide, vocab 50257; 256
    positions to keep it small), saved by ``save_pretrained`` as safetensors."""
    torch.manual_seed(1234)
    config = transformers.GPT2Config(
        n_layer=6, n_head=6, n_embd=384, vocab_size=VOCAB, n_positions=256
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    folder = tmp_path_factory.mktemp("hf-gpt2")
    model.save_pretrained(folder, safe_serialization=True)
    return folder, model


def hf_logits(model, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(idx).logits


def our_logits(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(idx)[0]


def test_loaded_gpt2_gives_transformers_logits(hf_folder):
    folder, hf_model = hf_folder
    ours = load(folder)
    idx = torch.randint(0, VOCAB, (2, 64))
    assert (our_logits(ours, idx) - hf_logits(hf_model, idx)).abs().max().item() <= 1e-4
    assert ours.lm_head.weight is ours.transformer.wte.weight


def test_greedy_continuations_are_identical(hf_folder):
    folder, hf_model = hf_folder
    ours = load(folder)
    prompt = torch.tensor([GPT2Tokenizer().encode("The meaning of life is")])
    with torch.no_grad():
        expected = hf_model.generate(
            prompt,
            max_new_tokens=32,
            min_new_tokens=32,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    continuation = generate(ours, prompt, 32, temperature=0.0)
    assert continuation.shape == (1, prompt.size(1) + 32)
    assert torch.equal(continuation, expected)


def test_gpt2_folder_implies_gpt2_tokenizer(hf_folder):
    folder, _ = hf_folder
    assert load_tokenizer(folder).name == "gpt2"


def test_export_loads_in_transformers_with_the_same_logits(tmp_path, hf_folder):
    folder, _ = hf_folder
    ours = load(folder)
    export_hf_gpt2(ours, tmp_path / "exported")
    reloaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "exported").eval()
    idx = torch.randint(0, VOCAB, (2, 48))
    assert (hf_logits(reloaded, idx) - our_logits(ours, idx)).abs().max().item() <= 1e-4


def test_export_then_import_round_trips_bit_exactly(tmp_path, hf_folder):
    folder, _ = hf_folder
    original = safetensors.torch.load_file(folder / "model.safetensors")
    export_hf_gpt2(load(folder), tmp_path / "exported")
    exported = safetensors.torch.load_file(tmp_path / "exported" / "model.safetensors")
    assert set(exported) == set(original)
    for name, tensor in original.items():
        assert torch.equal(exported[name], tensor), name
    assert config_from_hf(json.loads((tmp_path / "exported" / "config.json").read_text())) == (
        config_from_hf(json.loads((folder / "config.json").read_text()))
    )


def export_a_random_model(folder, **changes) -> tuple[GPT, torch.Tensor]:
    """A small GPT of ``changes`` with weights moved off their init, exported to ``folder``;
    asserts that transformers' GPT-2 loads it with its logits. Returns the model and ids."""
    config = ModelConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=16, **changes)
    ours = GPT(config).eval()
    with torch.no_grad():
        for parameter in ours.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    export_hf_gpt2(ours, folder)
    reloaded = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    idx = torch.randint(0, 50, (2, 16))
    assert (hf_logits(reloaded, idx) - our_logits(ours, idx)).abs().max().item() <= 1e-5
    return ours, idx


@pytest.mark.parametrize(
    "changes",
    [
        {"activation": "gelu"},
        {"activation": "relu"},
        {"tie_embeddings": False},
        {"n_inner": 24},
    ],
)
def test_expressible_variants_export_to_transformers(tmp_path, changes):
    ours, _ = export_a_random_model(tmp_path / "exported", **changes)
    round_trip = load_hf_gpt2(tmp_path / "exported")
    assert round_trip.config == ours.config
    for name, tensor in ours.state_dict().items():
        assert torch.equal(round_trip.state_dict()[name], tensor), name


def test_a_model_without_biases_exports_with_gpt2s_biases_at_zero(tmp_path):
    """nanoGPT's model (bias=False, as ``--preset nanogpt-cpu``): transformers' GPT-2 with
    zero biases gives its logits, and the folder loads back with biases that are all zero."""
    ours, idx = export_a_random_model(tmp_path / "exported", bias=False)
    round_trip = load_hf_gpt2(tmp_path / "exported")
    biases = {name: t for name, t in round_trip.state_dict().items() if name.endswith(".bias")}
    assert len(biases) == 2 * 6 + 1  # per layer ln_1, c_attn, c_proj, ln_2, c_fc, mlp.c_proj
    assert all(not tensor.any() for tensor in biases.values())
    assert (our_logits(round_trip, idx) - our_logits(ours, idx)).abs().max().item() <= 1e-6


def test_export_with_a_char_tokenizer_keeps_it(tmp_path):
    tokenizer = CharTokenizer.from_text("hello world")
    ours = GPT(
        ModelConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=8)
    )
    export_hf_gpt2(ours, tmp_path / "exported", tokenizer=tokenizer)
    assert load_tokenizer(tmp_path / "exported").encode("low") == tokenizer.encode("low")


@pytest.mark.parametrize(
    "changes, option",
    [
        ({"positions": "rotary"}, "positions"),
        ({"positions": "sinusoidal"}, "positions"),
        ({"positions": "none"}, "positions"),
        ({"norm": "rmsnorm"}, "norm"),
        ({"activation": "swiglu"}, "activation"),
        ({"block_order": "post"}, "block_order"),
        ({"attention": "linear"}, "attention"),
        ({"activation": "relu2"}, "activation"),
        ({"qk_norm": True}, "qk_norm"),
        ({"logit_softcap": 30.0}, "logit_softcap"),
        ({"smear": True}, "smear"),
    ],
)
def test_variants_gpt2_cannot_express_are_refused(tmp_path, changes, option):
    ours = GPT(ModelConfig(vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=8, **changes))
    with pytest.raises(ConfigError, match=f"cannot export {option}="):
        export_hf_gpt2(ours, tmp_path / "exported")
    assert not (tmp_path / "exported").exists()


def test_config_from_hf_reads_transformers_config():
    hf_config = transformers.GPT2Config(
        n_layer=3,
        n_head=4,
        n_embd=64,
        vocab_size=99,
        n_positions=77,
        n_inner=100,
        activation_function="gelu_pytorch_tanh",
        layer_norm_epsilon=1e-6,
        resid_pdrop=0.0,
        tie_word_embeddings=False,
    ).to_dict()
    config = config_from_hf(hf_config)
    assert (config.n_layer, config.n_head, config.n_embd) == (3, 4, 64)
    assert (config.vocab_size, config.block_size, config.n_inner) == (99, 77, 100)
    assert config.activation == "gelu_tanh" and config.norm_eps == 1e-6
    assert not config.tie_embeddings


@pytest.mark.parametrize(
    "option, value",
    [
        ("scale_attn_by_inverse_layer_idx", True),
        ("scale_attn_weights", False),
        ("add_cross_attention", True),
        ("activation_function", "silu"),
    ],
)
def test_unsupported_gpt2_options_are_named(tmp_path, option, value):
    hf_config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=10).to_dict()
    hf_config[option] = value
    with pytest.raises(ConfigError, match=option if option != "activation_function" else "silu"):
        config_from_hf(hf_config)
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps(hf_config))
    with pytest.raises(CheckpointError, match="not supported"):
        load(tmp_path / "hf")


def test_weights_of_a_bare_gpt2model_load_too(tmp_path):
    """Folders saved from GPT2Model (as OpenAI's originals) lack the ``transformer.`` prefix."""
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=40, n_positions=8)
    full = transformers.GPT2LMHeadModel(config).eval()
    full.transformer.save_pretrained(tmp_path / "bare", safe_serialization=True)
    ours = load(tmp_path / "bare")
    idx = torch.randint(0, 40, (1, 8))
    assert (our_logits(ours, idx) - hf_logits(full, idx)).abs().max().item() <= 1e-5
