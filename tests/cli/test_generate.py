"""``light-llm generate``: output against a plain greedy loop written here and against
transformers' GPT-2; bad input is one sentence and exit code 2."""

import json

import pytest
import safetensors.torch
import torch
import transformers

from light_llm.cli import main
from light_llm.models.gpt import GPT
from light_llm.tokenizers import GPT2Tokenizer
from tests.conftest import save_char_checkpoint


@pytest.fixture
def char_checkpoint(tmp_path):
    """A small char-level model with weights moved away from their initial values."""
    return save_char_checkpoint(tmp_path / "ck", block_size=24, n_layer=2, n_embd=32)


def greedy_by_recomputation(model: GPT, ids: list[int], n: int) -> list[int]:
    """Greedy decoding the slow, obvious way: the whole (cropped) sequence every step."""
    ids = list(ids)
    for _ in range(n):
        window = torch.tensor([ids[-model.config.block_size :]])
        with torch.no_grad():
            logits, _ = model(window)
        ids.append(int(logits[0, -1].argmax()))
    return ids


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["generate", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("mode", ["--no-stream", "stream", "--no-cache"])
def test_greedy_output_matches_a_plain_greedy_loop(capsys, char_checkpoint, mode):
    folder, model, tokenizer = char_checkpoint
    prompt = "to be"
    expected = greedy_by_recomputation(model, tokenizer.encode(prompt), 30)  # past block_size
    argv = ["--checkpoint", str(folder), "--prompt", prompt, "--temperature", "0"]
    argv += ["--max-new-tokens", "30"] + ([] if mode == "stream" else [mode])
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and err == ""
    assert out == tokenizer.decode(expected) + "\n"


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_prompt_longer_than_the_context_is_said_and_read_from_its_end(
    capsys, char_checkpoint, engine
):
    """The model reads its last block_size tokens; the command says how many it cannot see
    (it said nothing, where inspect and attention refuse such a prompt) and the text is the
    plain greedy loop's over the cropped window."""
    folder, model, tokenizer = char_checkpoint
    prompts = ["to be or not to be, that is the question", "to be"]  # 40 and 5 characters
    argv = ["--checkpoint", str(folder), "--temperature", "0", "--max-new-tokens", "6"]
    argv += ["--engine", engine, "--json"]
    code, out, err = run_cli(capsys, *argv, "--prompt", prompts[0], "--prompt", prompts[1])
    assert code == 0
    length, context = len(tokenizer.encode(prompts[0])), model.config.block_size
    assert err == (
        f"note: prompt 1 is {length} tokens and the model reads {context} at a time, so its "
        f"first {length - context} are not seen: the text goes on from the last {context}.\n"
    )
    expected = greedy_by_recomputation(model, tokenizer.encode(prompts[0]), 6)
    completion = json.loads(out)["completions"][0]["completion"]
    assert prompts[0] + completion == tokenizer.decode(expected)


def test_batch_of_prompts_gives_each_prompts_own_continuation(capsys, char_checkpoint):
    folder, model, tokenizer = char_checkpoint
    prompts = ["to be", "or not to be, th", "q"]
    argv = ["--checkpoint", str(folder), "--temperature", "0", "--max-new-tokens", "12", "--json"]
    for prompt in prompts:
        argv += ["--prompt", prompt]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    completions = json.loads(out)["completions"]
    assert [c["prompt"] for c in completions] == prompts
    for prompt, item in zip(prompts, completions, strict=True):
        prompt_ids = tokenizer.encode(prompt)
        expected = greedy_by_recomputation(model, prompt_ids, 12)[len(prompt_ids) :]
        assert item["completion"] == tokenizer.decode(expected)

    code, out, _ = run_cli(capsys, *[a for a in argv if a != "--json"])
    for number, prompt in enumerate(prompts, start=1):
        assert f"=== prompt {number} ===\n{prompt}" in out


def test_seeded_sampling_is_reproducible(capsys, char_checkpoint):
    folder, _, _ = char_checkpoint
    argv = ["--checkpoint", str(folder), "--prompt", "to", "--max-new-tokens", "40"]
    outputs = {run_cli(capsys, *argv, "--seed", "7", "--top-k", "5")[1] for _ in range(2)}
    assert len(outputs) == 1
    assert run_cli(capsys, *argv, "--seed", "7", "--top-p", "0.9")[0] == 0


def test_huggingface_gpt2_folder_generates_what_transformers_generates(tmp_path, capsys):
    hf_config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64)
    hf_model = transformers.GPT2LMHeadModel(hf_config).eval()
    hf_model.save_pretrained(tmp_path / "hf", safe_serialization=True)
    tokenizer = GPT2Tokenizer()
    prompt = "Hello, my name is"
    prompt_ids = torch.tensor([tokenizer.encode(prompt)])
    with torch.no_grad():
        hf_ids = hf_model.generate(
            prompt_ids,
            max_new_tokens=10,
            min_new_tokens=10,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    argv = ["--checkpoint", str(tmp_path / "hf"), "--prompt", prompt, "--temperature", "0"]
    code, out, _ = run_cli(capsys, *argv, "--max-new-tokens", "10", "--ignore-eos", "--json")
    assert code == 0
    completion = json.loads(out)["completions"][0]["completion"]
    assert completion == tokenizer.decode(hf_ids[0, prompt_ids.size(1) :].tolist())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precisions_run(capsys, char_checkpoint, dtype):
    folder, _, tokenizer = char_checkpoint
    argv = ["--checkpoint", str(folder), "--prompt", "to", "--dtype", dtype]
    code, out, _ = run_cli(capsys, *argv, "--max-new-tokens", "8", "--no-stream")
    assert code == 0 and out.startswith("to") and len(out) == len("to") + 8 + 1


def corrupt_weights(folder):
    (folder / "model.safetensors").write_bytes(b"not safetensors at all")


def mismatched_config(folder):
    config = json.loads((folder / "config.json").read_text())
    config["model"]["n_embd"] = 64
    (folder / "config.json").write_text(json.dumps(config))


def wrong_vocabulary(folder):
    tensors = safetensors.torch.load_file(folder / "model.safetensors")
    tensors["transformer.wte.weight"] = tensors["transformer.wte.weight"][:5].contiguous()
    config = json.loads((folder / "config.json").read_text())
    config["model"]["vocab_size"] = 5
    (folder / "config.json").write_text(json.dumps(config))
    safetensors.torch.save_file(tensors, folder / "model.safetensors")


@pytest.mark.parametrize(
    "breaking, extra, words",
    [
        (None, ["--prompt", "xyz"], "outside this tokenizer's"),
        (None, ["--prompt", "to", "--top-p", "0"], "--top-p must be in (0, 1]"),
        (None, ["--prompt", "to", "--top-p", "1.5"], "--top-p must be in (0, 1]"),
        (None, ["--prompt", "to", "--top-k", "0"], "--top-k must be an integer of at least 1"),
        (None, ["--prompt", "to", "--temperature", "-0.5"], "--temperature must be 0"),
        (None, ["--prompt", "to", "--max-new-tokens", "-3"], "--max-new-tokens must be 0 or more"),
        (None, ["--prompt", "to", "--threads", "0"], "--threads must be 1 or more"),
        (None, ["--prompt", "to", "--threads", "100000"], "is more than this machine's"),
        (corrupt_weights, ["--prompt", "to"], "not a readable safetensors file"),
        (mismatched_config, ["--prompt", "to"], "the config needs"),
        (wrong_vocabulary, ["--prompt", "to"], "the checkpoint is inconsistent"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(capsys, char_checkpoint, breaking, extra, words):
    folder, _, _ = char_checkpoint
    if breaking is not None:
        breaking(folder)
    code, out, err = run_cli(capsys, "--checkpoint", str(folder), *extra)
    assert code == 2
    assert out == ""
    assert err.startswith("light-llm generate: error: ") and err.count("\n") == 1
    assert words in err


def test_threads_sets_pytorchs_thread_count(capsys, char_checkpoint, monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    folder, _, _ = char_checkpoint
    argv = ["--checkpoint", str(folder), "--prompt", "to", "--threads", "1", "--no-stream"]
    code, out, _ = run_cli(capsys, *argv, "--max-new-tokens", "3")
    assert code == 0 and out.startswith("to") and calls == [1]


def test_missing_checkpoint_is_one_sentence(tmp_path, capsys):
    code, _, err = run_cli(capsys, "--checkpoint", str(tmp_path / "none"), "--prompt", "hi")
    assert code == 2 and "no checkpoint folder" in err and err.count("\n") == 1


def test_cuda_asked_for_without_a_gpu(capsys, char_checkpoint, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    folder, _, _ = char_checkpoint
    argv = ["--checkpoint", str(folder), "--prompt", "to", "--device", "cuda"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "no CUDA GPU" in err


@pytest.mark.parametrize("mode", ["--no-stream", "stream"])
def test_numpy_engine_gives_the_torch_engine_greedy_text(capsys, char_checkpoint, mode):
    folder, model, tokenizer = char_checkpoint
    prompt = "that is"
    expected = tokenizer.decode(greedy_by_recomputation(model, tokenizer.encode(prompt), 30))
    argv = ["--checkpoint", str(folder), "--prompt", prompt, "--temperature", "0"]
    argv += ["--max-new-tokens", "30", "--engine", "numpy", "--dtype", "float64"]
    code, out, err = run_cli(capsys, *argv, *([] if mode == "stream" else [mode]))
    assert code == 0 and err == ""
    assert out.rstrip("\n") == expected


def test_numpy_engine_refuses_options_it_cannot_honour(capsys, char_checkpoint):
    folder, _, _ = char_checkpoint
    argv = ["--checkpoint", str(folder), "--prompt", "to", "--engine", "numpy"]
    code, out, err = run_cli(capsys, *argv, "--dtype", "bfloat16")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "float32 or float64" in err
    code, out, err = run_cli(capsys, *argv, "--threads", "2")  # PyTorch's, not NumPy's
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "numpy engine's products run on NumPy's BLAS" in err


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_generate_reads_config_json_once(capsys, char_checkpoint, monkeypatch, engine):
    import light_llm.checkpoints.folder as folder_module
    from light_llm.untrusted import read_json_object

    read = []

    def counted(path, *args, **kwargs):
        if path.name == "config.json":
            read.append(path)
        return read_json_object(path, *args, **kwargs)

    monkeypatch.setattr(folder_module, "read_json", counted)
    folder, _, _ = char_checkpoint
    argv = ["--checkpoint", str(folder), "--prompt", "to", "--max-new-tokens", "3"]
    code, out, _ = run_cli(capsys, *argv, "--engine", engine, "--temperature", "0")
    assert code == 0 and out.startswith("to")
    assert read == [folder / "config.json"]
