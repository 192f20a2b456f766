"""Sampling rules (seed 000 §8) and generation."""

import re

import pytest
import torch

from light_llm.errors import SamplingError
from light_llm.generate import filter_logits, generate, left_pad, sample_next, stream_tokens
from light_llm.models.gpt import GPT
from tests.conftest import VARIANTS, tiny_config


def test_top_k_keeps_exactly_k_candidates():
    logits = torch.randn(4, 50)
    for k in (1, 3, 17, 50):
        kept = torch.isfinite(filter_logits(logits, top_k=k))
        assert kept.sum(-1).tolist() == [k] * 4
        for row in range(4):
            expected = set(torch.argsort(logits[row], descending=True)[:k].tolist())
            assert set(kept[row].nonzero().flatten().tolist()) == expected


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]])
    logits = probs.log()
    for p, expected in ((0.5, 1), (0.51, 2), (0.7, 2), (0.71, 3), (0.86, 4), (1.0, 5), (0.01, 1)):
        kept = torch.isfinite(filter_logits(logits, top_p=p))[0]
        assert kept.sum().item() == expected, p
        assert kept[:expected].all()
    # random distributions: the kept mass reaches p, and dropping the least likely kept token
    # would fall below p
    for _ in range(20):
        logits = torch.randn(1, 30) * 2
        p = float(torch.rand(()).clamp(0.05, 0.95))
        kept = torch.isfinite(filter_logits(logits, top_p=p))[0]
        probs = torch.softmax(logits, -1)[0]
        mass = probs[kept].sum().item()
        assert mass >= p - 1e-6
        assert mass - probs[kept].min().item() < p


def test_temperature_to_zero_equals_greedy():
    logits = torch.randn(8, 40)
    greedy = sample_next(logits, temperature=0.0)
    assert torch.equal(greedy, logits.argmax(-1))
    gen = torch.Generator().manual_seed(0)
    cold = sample_next(logits, temperature=1e-4, generator=gen)
    assert torch.equal(cold, greedy)


def test_temperature_scales_logits():
    logits = torch.randn(2, 10)
    torch.testing.assert_close(filter_logits(logits, temperature=0.5), logits / 0.5)


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"temperature": float("inf")},
        {"top_k": 0},
        {"top_p": 0.0},
        {"top_p": 1.5},
    ],
)
def test_bad_sampling_options_raise_one_sentence(options):
    with pytest.raises(SamplingError) as info:
        sample_next(torch.randn(1, 5), **{"temperature": 1.0, **options})
    assert "\n" not in str(info.value)


def test_seeded_sampling_is_reproducible_and_cache_matches_no_cache():
    model = GPT(tiny_config(block_size=12))
    idx = torch.randint(0, 37, (2, 4))
    outs = []
    for use_cache in (True, True, False):
        gen = torch.Generator().manual_seed(123)
        outs.append(
            generate(model, idx, 20, temperature=0.9, top_k=10, generator=gen, use_cache=use_cache)
        )
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0], outs[2])  # also past the 12-token context (sliding window)
    assert outs[0].shape == (2, 24)


def test_generation_stops_at_eos_and_pads_finished_rows():
    model = GPT(tiny_config())
    idx = torch.randint(0, 37, (3, 3))
    eos = int(generate(model, idx, 1, temperature=0.0)[0, -1])  # row 0's first greedy token
    steps = list(stream_tokens(model, idx, 10, temperature=0.0, eos_id=eos))
    assert steps[0][0].item() == eos
    assert all(s[0].item() == eos for s in steps)


def test_left_pad_aligns_prompts_to_the_right():
    ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_batched_prompts_equal_one_at_a_time():
    model = GPT(tiny_config(positions="rotary"))
    a, b = [3, 4, 5, 6, 7], [9, 10]
    ids, mask = left_pad([a, b], pad_id=0)
    batched = generate(model, ids, 6, temperature=0.0, attention_mask=mask)
    alone_a = generate(model, torch.tensor([a]), 6, temperature=0.0)
    alone_b = generate(model, torch.tensor([b]), 6, temperature=0.0)
    assert batched[0, -6:].tolist() == alone_a[0, -6:].tolist()
    assert batched[1, -6:].tolist() == alone_b[0, -6:].tolist()


def test_streamed_pieces_join_to_the_returned_text_with_byte_level_tokens():
    from light_llm.generate import generate_text
    from light_llm.tokenizers import GPT2Tokenizer

    tokenizer = GPT2Tokenizer()
    model = GPT(tiny_config(vocab_size=tokenizer.vocab_size, block_size=64))
    with torch.no_grad():  # favour byte tokens (ids < 256), which split UTF-8 characters
        model.lm_head.weight[:256] += 0.5
    pieces: list[str] = []
    [text] = generate_text(
        model,
        tokenizer,
        ["é"],
        60,
        temperature=1.5,
        seed=3,
        stop_at_eos=False,
        on_text=lambda row, piece: pieces.append(piece),
    )
    assert "".join(pieces) == text and len(pieces) > 1
    assert all("\ufffd" not in piece for piece in pieces[:-1])


@pytest.mark.parametrize("variant", ["rotary", "linear-attention"])
def test_sliding_window_past_the_context_matches_recomputation(variant):
    model = GPT(tiny_config(**VARIANTS[variant], block_size=8)).eval()
    idx = torch.randint(0, 37, (1, 5))
    runs = [
        generate(model, idx, 15, generator=torch.Generator().manual_seed(5), use_cache=use_cache)
        for use_cache in (True, False)
    ]
    assert torch.equal(runs[0], runs[1])


def test_float16_decoding_follows_float32():
    model = GPT(tiny_config()).eval()
    half = GPT(tiny_config()).eval()
    half.load_state_dict(model.state_dict())
    half.to(torch.float16)
    idx = torch.randint(0, 37, (2, 4))
    tokens = generate(model, idx, 8, temperature=0.0)
    full, _ = model(tokens)
    cache = half.new_cache(2)
    half_logits = torch.cat(
        [half(tokens[:, :4], kv_cache=cache)[0]]
        + [half(tokens[:, t : t + 1], kv_cache=cache)[0] for t in range(4, 12)],
        dim=1,
    )
    torch.testing.assert_close(half_logits.float(), full, atol=5e-3, rtol=1e-2)


@pytest.mark.parametrize(
    ("dtype", "poison", "words"),
    [
        (torch.float32, float("nan"), "corrupt"),
        (torch.float16, 6e4, "overflowed to inf/NaN in float16"),
    ],
)
def test_non_finite_logits_raise_one_sentence(dtype, poison, words):
    model = GPT(tiny_config()).eval().to(dtype)
    with torch.no_grad():
        model.transformer.ln_f.weight.fill_(poison)
    with pytest.raises(SamplingError, match=words) as info:
        generate(model, torch.zeros(1, 2, dtype=torch.long), 3, temperature=0.0)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("idx", "mask"),
    [
        (torch.zeros(1, 0, dtype=torch.long), torch.zeros(1, 0, dtype=torch.long)),
        (torch.ones(2, 3, dtype=torch.long), torch.tensor([[1, 1, 1], [0, 0, 0]])),
    ],
)
def test_a_row_whose_mask_marks_no_token_is_an_empty_prompt(idx, mask):
    # as without a mask: there is nothing to continue (an empty mask crashed in the
    # attention, an all-padding row was continued from no token at all)
    with pytest.raises(SamplingError, match="empty"):
        generate(GPT(tiny_config()).eval(), idx, 2, attention_mask=mask)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_logits_over_no_token_are_refused(temperature):
    with pytest.raises(SamplingError, match=r"\(B, V\)"):
        sample_next(torch.zeros(2, 0), temperature)


def test_prompts_that_are_no_list_and_no_sequences_to_pad_are_refused():
    from light_llm.generate import generate_text
    from light_llm.tokenizers import CharTokenizer

    model = GPT(tiny_config()).eval()
    tokenizer = CharTokenizer([chr(97 + i) for i in range(model.config.vocab_size)])
    with pytest.raises(SamplingError, match="list of prompts"):
        generate_text(model, tokenizer, (prompt for prompt in ["ab"]), 2)
    with pytest.raises(SamplingError, match="at least one"):
        left_pad([], pad_id=0)


BAD_PROMPT_MASKS = {  # the mask of the prompts [[5, 6, 7], [8, 9, 10]], and what is said
    "right padding": ([[1, 1, 0], [1, 1, 1]], "the attention mask of prompt 0 ends in padding"),
    "a value of 2": ([[2, 2, 2], [1, 1, 1]], "must hold only 1 (a real token) and 0"),
    "a half": ([[0.5, 1, 1], [1, 1, 1]], "must hold only 1 (a real token) and 0"),
    "a prompt of padding alone": ([[1, 1, 1], [0, 0, 0]], "the prompt is empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROMPT_MASKS))
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_mask_of_the_prompts_that_is_not_left_padding_is_refused(case, engine):
    """Prompts are padded on the left, their newest token last: a right-padded row went on
    from its pad in the torch engine, and the NumPy engine took any mask values at all
    (2, 0.5, all 0), each changing the text in silence; both now refuse in one sentence."""
    import numpy as np

    from light_llm.reference.model import NumpyGPT
    from light_llm.reference.sampling import generate as generate_numpy

    model = GPT(tiny_config())
    mask, said = BAD_PROMPT_MASKS[case]
    ids = [[5, 6, 7], [8, 9, 10]]
    with pytest.raises(SamplingError, match=re.escape(said)):
        if engine == "torch":
            generate(model, torch.tensor(ids), 3, attention_mask=torch.tensor(mask))
        else:
            twin = NumpyGPT.from_torch_state_dict(model.state_dict(), model.config)
            generate_numpy(twin, np.array(ids), 3, attention_mask=np.array(mask))


def test_the_numpy_forward_refuses_a_mask_of_other_values():
    """The NumPy engine's forward, as the torch one's: a mask is 1 or 0."""
    import numpy as np

    from light_llm.reference.model import NumpyGPT

    model = GPT(tiny_config())
    twin = NumpyGPT.from_torch_state_dict(model.state_dict(), model.config)
    with pytest.raises(SamplingError, match="must hold only 1"):
        twin.forward(np.array([[5, 6, 7]]), attention_mask=np.full((1, 3), 0.5))


@pytest.mark.parametrize("eos_id", [-1, 37, "a", 1.5])
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_an_eos_id_outside_the_vocabulary_is_refused_by_both_engines(eos_id, engine):
    """The NumPy engine took eos_id 37 (of 37 ids) and -1 in silence, and "a" failed deep
    inside; both now say the torch engine's sentence."""
    import numpy as np

    from light_llm.reference.model import NumpyGPT
    from light_llm.reference.sampling import generate as generate_numpy

    model = GPT(tiny_config())
    said = f"eos_id must be an integer from 0 to 36, got {eos_id!r}."
    with pytest.raises(SamplingError, match=re.escape(said)):
        if engine == "torch":
            generate(model, torch.tensor([[5, 6]]), 3, eos_id=eos_id)
        else:
            twin = NumpyGPT.from_torch_state_dict(model.state_dict(), model.config)
            generate_numpy(twin, np.array([[5, 6]]), 3, eos_id=eos_id)


@pytest.mark.parametrize("shape", [(0, 3), (1, 0)])
@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_an_empty_batch_is_one_sentence_in_both_engines(shape, engine):
    """No row, or no token: the torch forward failed inside its rotary tables on (0, 3) and
    the NumPy one inside a reduction on (1, 0); both now say the ids are empty."""
    import numpy as np

    from light_llm.reference.model import NumpyGPT

    model = GPT(tiny_config(positions="rotary"))
    with pytest.raises(SamplingError, match=re.escape(f"the token ids are empty (shape {shape})")):
        if engine == "torch":
            model(torch.zeros(shape, dtype=torch.long))
        else:
            twin = NumpyGPT.from_torch_state_dict(model.state_dict(), model.config)
            twin.forward(np.zeros(shape, dtype=np.int64))


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_a_random_source_that_is_not_one_is_one_sentence(engine):
    """A seed given where the random source goes failed inside torch.multinomial (torch) or
    as an AttributeError (NumPy)."""
    import numpy as np

    from light_llm.reference.model import NumpyGPT
    from light_llm.reference.sampling import generate as generate_numpy

    model = GPT(tiny_config())
    if engine == "torch":
        with pytest.raises(SamplingError, match="generator must be a torch.Generator or None"):
            generate(model, torch.tensor([[5, 6]]), 3, generator=0)
    else:
        twin = NumpyGPT.from_torch_state_dict(model.state_dict(), model.config)
        with pytest.raises(SamplingError, match="rng must be a numpy.random.Generator or None"):
            generate_numpy(twin, np.array([[5, 6]]), 3, rng=0)
