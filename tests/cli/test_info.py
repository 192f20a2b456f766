"""``light-llm info``: every count against the real model's tensors, or against transformers."""

import json

import pytest
import torch
import transformers
from torch import nn

from light_llm.checkpoints import save
from light_llm.cli import main
from light_llm.config import preset
from light_llm.models.gpt import GPT
from tests.conftest import VARIANTS, save_char_checkpoint, tiny_config


def info_json(capsys, *argv: str) -> dict:
    assert main(["info", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def seed_30m_parameters_from_shapes() -> int:
    """The seed's model counted tensor by tensor (seed 000: V 50257, T_max 1024, 6 layers of
    width 384, 4x MLP, biases, LayerNorm with β, tied head)."""
    V, T, L, d = 50257, 1024, 6, 384
    attention = (d * 3 * d + 3 * d) + (d * d + d)  # c_attn, c_proj
    mlp = (d * 4 * d + 4 * d) + (4 * d * d + d)  # c_fc, c_proj
    layer_norms = 2 * (2 * d)  # ln_1, ln_2
    return V * d + T * d + L * (attention + mlp + layer_norms) + 2 * d  # + ln_f


def test_seed_30m_reports_the_seeds_30m_parameters(capsys):
    report = info_json(capsys, "--preset", "seed-30m")
    expected = seed_30m_parameters_from_shapes()
    assert expected == 30_339_456
    assert report["parameters"]["total"] == expected
    assert report["parameters"]["total"] == sum(
        p.numel() for p in GPT(preset("seed-30m")).parameters()
    )
    assert main(["info", "--preset", "seed-30m"]) == 0
    text = capsys.readouterr().out
    assert "30.3M" in text and "30,339,456" in text


def test_gpt2_124m_matches_transformers_gpt2():
    config = transformers.GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257)
    with torch.device("meta"):  # shapes only, no memory or initialisation
        hf_count = transformers.GPT2LMHeadModel(config).num_parameters()
    assert hf_count == 124_439_808
    from light_llm.cli.info import build_report

    assert build_report(preset("gpt2-124m"), 1024, "float32")["parameters"]["total"] == hf_count


def module_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_count_matches_the_model_built_from_the_checkpoint(tmp_path, capsys, variant):
    model = GPT(tiny_config(**VARIANTS[variant])).eval()
    save(model, tmp_path / "ck")
    report = info_json(capsys, "--checkpoint", str(tmp_path / "ck"))
    params = report["parameters"]
    block = model.transformer.h[0]
    embedding = model.transformer.wte.weight.numel()
    if model.config.positions == "learned":
        embedding += model.transformer.wpe.weight.numel()
    if model.config.value_embeddings:  # a second token table: no matrix product either
        embedding += model.transformer.wve.weight.numel()

    assert params["total"] == module_parameters(model)
    assert params["embedding"] == embedding
    assert params["non_embedding"] == module_parameters(model) - embedding
    assert params["attention_per_layer"] == module_parameters(block.attn)
    assert params["ffn_per_layer"] == module_parameters(block.mlp)
    assert params["norms_per_layer"] == module_parameters(block.ln_1) + module_parameters(
        block.ln_2
    )
    skip = block.x0_gains.numel() if model.config.embedding_skip else 0  # λ_l, μ_l
    assert params["skip_per_layer"] == skip
    parts = ("attention_per_layer", "ffn_per_layer", "norms_per_layer", "skip_per_layer")
    assert sum(params[part] for part in parts) == module_parameters(block)  # the rows add up

    # forward FLOPs: 2 per weight of every matrix product (the head included) + attention;
    # the multi-token head (training only) counts in the training FLOPs alone
    config, T = model.config, model.config.block_size
    second_head = getattr(model, "mtp_proj", None)
    matrix_weights = sum(
        m.weight.numel()
        for m in model.modules()
        if isinstance(m, nn.Linear) and m is not second_head
    )
    if model.config.smear:  # the smear's gate: w · x[:k], a product a token
        matrix_weights += model.transformer.smear.gate.numel()
    if config.attention == "softmax":
        attention = 2 * config.n_layer * T * config.n_embd  # QK^T and AV over T/2 keys
    else:
        attention = 4 * config.n_layer * config.n_embd * config.head_dim
    assert report["flops_per_token"]["forward"] == 2 * matrix_weights + attention
    second_forward = 0
    if second_head is not None:  # (h + W_mtp h) W_U^T: two more products a token
        second_forward = 2 * second_head.weight.numel() + 2 * model.lm_head.weight.numel()
    assert report["flops_per_token"]["training"] == 3 * (
        report["flops_per_token"]["forward"] + second_forward
    )

    if config.attention == "softmax":  # one layer's n_h x T x T matrix, as the model makes it
        maps = model.attention_maps(torch.randint(0, config.vocab_size, (1, T)))
        memory = report["memory_bytes_per_sequence"]
        assert memory["attention_matrix_per_layer"] == maps[0].numel() * 4
        cache = model.new_cache(1)  # allocated for T_max = the default context
        cache_bytes = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))
        assert memory["kv_cache"] == cache_bytes


@pytest.mark.parametrize(
    "dtype, torch_dtype", [("float32", torch.float32), ("bfloat16", torch.bfloat16)]
)
def test_kv_cache_bytes_at_a_context_and_dtype(capsys, dtype, torch_dtype):
    report = info_json(capsys, "--preset", "seed-30m", "--context", "256", "--dtype", dtype)
    config = preset("seed-30m", block_size=256)
    cache = GPT(config.replace(vocab_size=8)).to(torch_dtype).new_cache(1)
    cache_bytes = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))
    assert report["memory_bytes_per_sequence"]["kv_cache"] == cache_bytes
    assert report["context"] == 256


def test_text_report_uses_human_units_and_names_seed_sections(capsys):
    assert main(["info", "--preset", "seed-30m"]) == 0
    text = capsys.readouterr().out
    kv_mib = 2 * 6 * 1024 * 384 * 4 / 2**20  # 2 L T d float32 values
    assert f"{kv_mib:.1f} MiB" in text
    for section in ("seed 000 §9", "seed 002 §8.1", "seed 002 §11.1", "seed 002 §11.2"):
        assert section in text


def test_overrides_apply_on_top_of_the_preset(capsys):
    report = info_json(capsys, "--preset", "char-baby", "--n-layer", "7", "--positions", "rotary")
    expected = GPT(preset("char-baby", n_layer=7, positions="rotary"))
    assert report["parameters"]["total"] == module_parameters(expected)
    assert report["config"]["n_layer"] == 7


def test_switches_apply_on_top_of_the_preset(capsys):
    flags = ("--untie-embeddings", "--no-bias", "--qk-norm")
    report = info_json(capsys, "--preset", "char-baby", *flags)
    changes = dict(tie_embeddings=False, bias=False, qk_norm=True)
    expected, tied = GPT(preset("char-baby", **changes)), GPT(preset("char-baby", bias=False))
    assert report["parameters"]["total"] == module_parameters(expected)
    assert module_parameters(expected) == module_parameters(tied) + 65 * 128  # the V x d head
    assert main(["info", "--preset", "char-baby", *flags]) == 0
    assert "untied embeddings, no biases, QK-norm" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--n-embd", "100"], "divisible by n_head"),
        (["--position-base", "500"], "this model's positions are learned"),
        (["--context", "2048"], "longer than the model's block size"),
        (["--context", "0"], "at least 1 token"),
        (["--checkpoint", "/nonexistent/folder"], "no checkpoint folder"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(capsys, argv, words):
    assert main(["info", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("light-llm info: error: ")
    assert words in captured.err and captured.err.count("\n") == 1


def test_an_int8_checkpoint_reports_the_bytes_its_weights_file_holds(tmp_path, capsys):
    """info --checkpoint on a light-llm quantize folder adds what its weights take as stored:
    the int8 codes and the float values beside them, as the tensors loaded back count them."""
    import numpy as np
    import safetensors.numpy

    folder = save_char_checkpoint(tmp_path / "float", block_size=24, n_layer=2, n_embd=32)[0]
    assert main(["quantize", "--checkpoint", str(folder), "--out", str(tmp_path / "q")]) == 0
    capsys.readouterr()
    stored = info_json(capsys, "--checkpoint", str(tmp_path / "q"))["stored_weights"]
    tensors = safetensors.numpy.load_file(tmp_path / "q" / "model.safetensors").values()
    codes = sum(t.size for t in tensors if t.dtype == np.int8)
    assert 0 < codes and stored["int8_values"] == codes
    assert stored["bytes"] == sum(t.nbytes for t in tensors)
    assert "stored_weights" not in info_json(capsys, "--checkpoint", str(folder))
    assert main(["info", "--checkpoint", str(tmp_path / "q")]) == 0
    assert "as stored, int8" in capsys.readouterr().out
    # a model the checkpoint is not (another shape) has no stored weights to report
    other = info_json(capsys, "--checkpoint", str(tmp_path / "q"), "--n-layer", "5")
    assert "stored_weights" not in other and other["config"]["n_layer"] == 5


@pytest.mark.parametrize("damage", ["int16 codes", "zero scale", "garbage header"])
def test_a_damaged_int8_checkpoint_is_one_sentence(tmp_path, capsys, damage):
    """info refuses what loading refuses (it read the header alone, and raised KeyError on an
    int16 tensor and a library error on a garbage header, or reported a zero scale as fine)."""
    import numpy as np
    import safetensors.numpy

    folder = save_char_checkpoint(tmp_path / "float", block_size=24, n_layer=1, n_embd=32)[0]
    quantized = tmp_path / "q"
    assert main(["quantize", "--checkpoint", str(folder), "--out", str(quantized)]) == 0
    weights = quantized / "model.safetensors"
    tensors = safetensors.numpy.load_file(weights)
    code_name = next(name for name, t in tensors.items() if t.dtype == np.int8)
    if damage == "int16 codes":
        tensors[code_name] = tensors[code_name].astype(np.int16)
    elif damage == "zero scale":
        scale_name = next(name for name in tensors if name.endswith("_scale"))
        tensors[scale_name][0] = 0.0
    if damage == "garbage header":
        weights.write_bytes(b"\xff" * 8 + b"not a header")
    else:
        safetensors.numpy.save_file(tensors, weights)
    capsys.readouterr()
    code = main(["info", "--checkpoint", str(quantized)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and "Traceback" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1 and "model.safetensors" in captured.err


ENCODER_VARIANTS = [
    {},  # BERT's: learned positions, post-LN LayerNorm with biases, GELU, a tied MLM head
    {"positions": "rotary"},
    {"mlm_head": False},  # a sentence-embedding encoder (MiniLM's shape)
    {"tie_embeddings": False},
    {"block_order": "pre", "norm": "rmsnorm", "bias": False, "activation": "swiglu"},
]


@pytest.mark.parametrize("variant", ENCODER_VARIANTS, ids=lambda v: ",".join(v) or "bert")
def test_an_encoder_checkpoint_is_counted_against_its_tensors_and_its_flops(
    tmp_path, capsys, variant
):
    """An encoder's parameters, by component, against the tensors of the model built from
    its config (a tied decoder counted once), and its forward FLOPs per token against
    PyTorch's FlopCounterMode on a forward pass with explicit attention (every token through
    the head, no mask: 4 L T d for QK^T and A V)."""
    from torch.utils.flop_counter import FlopCounterMode

    from light_llm.models.bert import BertEncoder, EncoderConfig
    from light_llm.tokenizers import BertTokenizer
    from light_llm.tokenizers.bert import SPECIAL_TOKENS

    tokenizer = BertTokenizer([*SPECIAL_TOKENS, *"to be or not that is the question".split()])
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size,
        block_size=12,
        n_layer=2,
        n_head=2,
        n_embd=16,
        dropout=0.0,
        **variant,
    )
    model = BertEncoder(config).eval()
    save(model, tmp_path / "encoder", tokenizer)
    report = info_json(capsys, "--checkpoint", str(tmp_path / "encoder"))
    params = report["parameters"]
    assert report["architecture"] == "bert"
    assert params["total"] == sum(p.numel() for p in model.parameters())
    embeddings = model.embeddings
    assert params["token_embedding"] == embeddings.wte.weight.numel()
    assert params["type_embedding"] == embeddings.wtt.weight.numel()
    assert params["embedding_norm"] == sum(p.numel() for p in embeddings.ln.parameters())
    learned = isinstance(embeddings.wpe, nn.Embedding)
    assert params["position_embedding"] == (embeddings.wpe.weight.numel() if learned else 0)
    assert params["layers"] == sum(p.numel() for p in model.h.parameters())
    head = model.mlm_head
    head_tensors = 0 if head is None else sum(p.numel() for p in head.parameters())
    if head is not None and config.tie_embeddings:
        head_tensors -= embeddings.wte.weight.numel()  # the decoder is the token table
    in_head = ("transform", "head_norm", "output_bias", "decoder_untied")
    assert sum(params[key] for key in in_head) == head_tensors
    model.use_fast_attention(False)  # FlopCounterMode does not count the CPU's fused kernel
    ids = torch.randint(0, config.vocab_size, (3, config.block_size))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids)
    assert report["flops_per_token"]["forward"] == counter.get_total_flops() / ids.numel()
    assert main(["info", "--checkpoint", str(tmp_path / "encoder")]) == 0
    text = capsys.readouterr().out
    assert "a BERT-style encoder" in text and f"{params['total']:,}" in text
    assert ("a masked-LM head" in text) == config.mlm_head


def test_a_huggingface_bert_folder_is_one_sentence(capsys):
    from light_llm.tokenizers.bert import packaged_bert_folder

    assert main(["info", "--checkpoint", str(packaged_bert_folder())]) == 2
    err = capsys.readouterr().err
    assert err.startswith("light-llm info: error: ") and "HuggingFace BERT folder" in err
    assert err.count("\n") == 1
