"""The model the explorer serves, and every number its page shows, computed by the library's
own functions (the same ones the CLI and the trainer use):

    tokens            tokenizer.encode (with [CLS] / [SEP] for an encoder, as it sees them)
    next token        P = softmax(logits) and P_temp = softmax(filter_logits(logits / τ)),
                      top-k and top-p as seed 000 §8 defines them (generate.sampling_distribution)
    attention         A = softmax(Q K^T / sqrt(d_k)) per layer and head (explain.attention_maps)
    generation        generate.generate_text, token by token, each with its probability
    fill-mask         models.bert.predict_masked (seed 003 §29)
    similarity        cos(u, v) of mean-pooled MiniLM-style embeddings (seed 002 §6.1)

One model is held in memory. Its forward passes run one at a time (attention maps switch the
layers into a recording mode, so no two passes may overlap); generations queue behind each
other, one step at a time, so short requests (the next-token table, attention) are answered
between the steps of a long generation.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from light_llm.checkpoints import (
    check_tokenizer_matches_model,
    inspect_folder,
    load,
    load_tokenizer,
)
from light_llm.checkpoints.hf_bert import sentence_length_limit
from light_llm.checkpoints.run import (
    CHECKPOINT_SUBFOLDER,
    METRICS_FILE,
    TRAINER_STATE_FILE,
    MetricsLog,
    evaluation_records,
    read_trainer_state,
    training_records,
)
from light_llm.errors import CheckpointError, LightLLMError
from light_llm.explain.attention_maps import context_error, model_input_ids, prompt_attention
from light_llm.generate import generate_text, sampling_distribution
from light_llm.limits import is_integer
from light_llm.models.bert import (
    BertEncoder,
    cosine_similarity_matrix,
    embed_sentences,
    predict_masked,
    tokens_left_out,
)
from light_llm.tokenizers.bert import packaged_bert_folder


class RequestError(LightLLMError):
    """A request field the model cannot take: ``field`` names it; ``extra`` (JSON-ready)
    offers a way out, e.g. the prompt cut to the context."""

    def __init__(self, field: str | tuple[str, int], message: str, **extra: Any) -> None:
        super().__init__(message)
        self.field = field
        self.extra = extra


class NotForThisModel(LightLLMError):
    """A request this kind of model cannot answer (next-token on an encoder, fill-mask on a
    GPT or on an encoder without a masked-LM head)."""


class GenerationCancelled(Exception):
    """The client went away: the generation stops at its next step."""


class SerialisedForward:
    """The model with its forward pass taken under ``lock``: a generation runs through this, so
    that the forward passes of other requests fit in between its steps."""

    def __init__(self, model, lock: threading.RLock) -> None:
        self._model, self._lock = model, lock

    def __call__(self, *args, **kwargs):
        with self._lock:
            return self._model(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._model, name)


def folder_stamp(folder: Path) -> tuple[int, int] | None:
    """(inode, modification time) of ``folder``: a checkpoint is replaced as a whole folder,
    so a new one has a new stamp; None when it is not there."""
    try:
        status = os.stat(folder)
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns


class ExplorerModel:
    """A checkpoint loaded for the explorer: a GPT or a BERT-style encoder and its tokenizer.

    ``origin`` says how it was chosen (shown on the model card).
    """

    def __init__(self, path: str | Path, origin: str) -> None:
        folder = inspect_folder(path)
        self.folder = folder.path
        self.origin = origin
        self.is_encoder = folder.holds_encoder
        self.model, self.tokenizer = self.load_checkpoint()
        # a training output folder OUT holds OUT/checkpoint and OUT/metrics.jsonl
        parent = self.folder.parent
        is_run = self.folder.name == CHECKPOINT_SUBFOLDER and (parent / METRICS_FILE).is_file()
        self.run_folder = parent if is_run else None
        self.forward_lock = threading.RLock()
        self.generation_lock = threading.Lock()
        self.queue_lock = threading.Lock()
        self.generations_ahead = 0  # running or waiting generations
        self.logits_cache: tuple[tuple[int, ...], torch.Tensor] | None = None
        self.stamp = folder_stamp(self.folder)
        self.version = 0  # how many times a newer checkpoint replaced the loaded one
        self.training = self.read_training()
        self.history = self.loaded_history()
        # (the log's mtime and size, whether it held another run then): run_replaced's last look
        self.replaced_seen: tuple[tuple[int, int] | None, bool] | None = None

    def load_checkpoint(self):
        """The model in the folder (an int8 checkpoint as its float weights q s: the page looks
        inside the weights) and its tokenizer, checked to match."""
        architecture = "bert" if self.is_encoder else "gpt"
        model = load(self.folder, architecture=architecture, dequantize=True)
        tokenizer = load_tokenizer(self.folder)
        check_tokenizer_matches_model(tokenizer, model.config.vocab_size, self.folder)
        self.quantization = inspect_folder(self.folder).quantization  # "int8", or None
        return model, tokenizer

    def reload_if_replaced(self) -> bool:
        """Load the checkpoint again when its folder was replaced since (a run still training
        saved a newer one): the page then shows the model as it is now. A folder caught
        mid-write, or holding another kind of model, is left for the next look."""
        stamp = folder_stamp(self.folder)
        if stamp is None or stamp == self.stamp:
            return False
        try:
            model, tokenizer = self.load_checkpoint()
        except LightLLMError:
            return False
        with self.forward_lock:
            self.model, self.tokenizer = model, tokenizer
            self.logits_cache = None
            self.stamp = stamp
            self.version += 1
        return True

    def follow_the_run(self) -> None:
        """:meth:`reload_if_replaced` when the folder changed since it was loaded and still
        holds the loaded model's run (:meth:`folder_warning`: another run's checkpoint is not
        taken for it); cheap when nothing changed (one stat of the folder)."""
        stamp = folder_stamp(self.folder)
        if stamp is not None and stamp != self.stamp and self.folder_warning() is None:
            self.reload_if_replaced()

    # ------------------------------------------------------------------ what it is
    @property
    def kind(self) -> str:
        return "encoder" if self.is_encoder else "gpt"

    @property
    def name(self) -> str:
        """The run's folder name, the checkpoint's, or MiniLM's for the packaged encoder."""
        if self.folder.resolve() == packaged_bert_folder().resolve():
            return "all-MiniLM-L6-v2"
        return (self.run_folder or self.folder).name

    @property
    def block_size(self) -> int:
        return self.model.config.block_size

    @property
    def can_fill_mask(self) -> bool:
        return self.is_encoder and self.model.mlm_head is not None

    def loaded_history(self) -> list[dict[str, Any]]:
        """The evaluations of the run up to the loaded checkpoint's iteration: the same run,
        still training, only adds to them; another run written at the same path differs."""
        if self.run_folder is None:
            return []
        until = (self.training or {}).get("iteration")
        evaluations = evaluation_records(MetricsLog(self.run_folder).records())
        if not is_integer(until):
            return evaluations
        return [record for record in evaluations if record["iter"] <= until]

    def run_replaced(self) -> bool:
        """Whether the run folder's log now holds another training run than the loaded
        model's (the same run, still training, only adds evaluations to it). The log is read
        again only when its size or time changed since the last look: the page asks every
        few seconds."""
        if self.run_folder is None:
            return False
        log = MetricsLog(self.run_folder)
        try:
            status = log.path.stat()
            stamp = (status.st_mtime_ns, status.st_size)
        except OSError:
            stamp = None
        if self.replaced_seen is None or self.replaced_seen[0] != stamp:
            try:
                current = evaluation_records(log.records())
            except LightLLMError:
                current = []
            self.replaced_seen = (stamp, current[: len(self.history)] != self.history)
        return self.replaced_seen[1]

    def folder_warning(self) -> str | None:
        """A sentence when the checkpoint folder has gone since it was loaded, or holds
        another run than the loaded model's (its card then keeps the loaded run's facts)."""
        if self.folder.is_dir():
            if not self.run_replaced():
                return None
            return (
                f"{self.run_folder} now holds another training run than the one loaded; "
                "this card and every answer are still the loaded model's (restart the "
                "explorer to serve the new run)."
            )
        return (
            f"the checkpoint folder {self.folder} has disappeared; the model loaded from it "
            "is still in memory and still served."
        )

    def curves_warning(self) -> str | None:
        """A sentence for the served run's curves (/api/runs) when its folder now holds another
        training run: the curves are the new run's, the model is still the one loaded."""
        if not self.folder.is_dir() or not self.run_replaced():
            return None
        return (
            f"{self.run_folder} now holds another training run than the served model's: "
            "these curves are the new run's, the model card and every answer still the loaded "
            "model's (restart the explorer to serve the new run)."
        )

    def read_training(self) -> dict[str, Any] | None:
        """Iterations, losses (bits per byte where known) and the loss curve of the run the
        checkpoint comes from; None for a model that was not trained by light-llm."""
        facts: dict[str, Any] = {}
        if (self.folder / TRAINER_STATE_FILE).is_file():
            try:
                state = read_trainer_state(self.folder)
            except CheckpointError:
                state = {}
            for key in ("iteration", "best_val_loss", "tokens_seen", "elapsed_s", "dtype"):
                if key in state:
                    facts[key] = state[key]
            if isinstance(state.get("data"), dict):
                facts["data"] = state["data"]
        if self.run_folder is not None:
            records = MetricsLog(self.run_folder).records()
            evaluations = evaluation_records(records)
            if evaluations:
                last = evaluations[-1]
                for key in ("val_loss", "val_perplexity", "val_bpb", "train_loss", "train_bpb"):
                    if isinstance(last.get(key), (int, float)) and math.isfinite(last[key]):
                        facts[key] = last[key]
            facts["curve"] = {
                "train": [[r["iter"], r["loss"]] for r in training_records(records)],
                "train_eval": [[r["iter"], r.get("train_loss")] for r in evaluations],
                "val": [[r["iter"], r.get("val_loss")] for r in evaluations],
            }
        return facts or None

    def card(self) -> dict[str, Any]:
        """The model card: what was loaded, its config, size and training facts."""
        warning = self.folder_warning()
        if warning is None:
            self.reload_if_replaced()
            self.training = self.read_training()  # a run still training adds evaluations
        config = dataclasses.asdict(self.model.config)
        return {
            "kind": self.kind,
            "name": self.name,
            "folder": str(self.folder),
            "origin": self.origin,
            "config": config,
            "parameters": self.model.num_parameters(),
            # how the folder stores the weights: "int8" (q and a scale s a row, shown here as
            # q s), or None for float weights
            "quantization": self.quantization,
            "tokenizer": {"name": self.tokenizer.name, "vocab_size": self.tokenizer.vocab_size},
            "context": self.block_size,
            "training": self.training,
            "capabilities": {
                "next_token": not self.is_encoder,
                "generate": not self.is_encoder,
                "fill_mask": self.can_fill_mask,
                "similarity": self.is_encoder,
            },
            "folder_present": warning is None,
            "warning": warning,
        }

    # ------------------------------------------------------------------ tokens
    def encode(
        self, text: str, field: str | tuple[str, int] = "prompt", what: str | None = None
    ) -> list[int]:
        """The ids the model sees for ``text``; RequestError naming ``field`` (a name, or a
        list's name and the index in it) for an empty text or one the tokenizer cannot
        encode, ``what`` the words for it ("the prompt")."""
        what = what or f"the {field}"
        try:
            if not self.tokenizer.encode(text):
                raise RequestError(field, f"{what} is empty: type some text.")
            return model_input_ids(self.model, self.tokenizer, text)
        except RequestError:
            raise
        except LightLLMError as exc:
            raise RequestError(field, str(exc)) from None

    def prompt_ids(self, prompt: str, field: str = "prompt") -> list[int]:
        """:meth:`encode`, refused when longer than the context, with the offer to keep the
        last ``block_size`` tokens (``kept_prompt``: their text); errors name ``field``."""
        ids = self.encode(prompt, field)
        if len(ids) > self.block_size:
            keep = self.block_size - (2 if self.is_encoder else 0)  # [CLS], [SEP] count
            raise RequestError(
                field,
                context_error(len(ids), self.block_size) + f" Keep the last {keep} tokens?",
                keep_last=keep,
                kept_prompt=self.longest_ending(prompt, keep),
            )
        return ids

    def longest_ending(self, text: str, tokens: int) -> str:
        """The longest end of ``text`` (its last characters, as typed) that encodes to at most
        ``tokens`` tokens: sent back, it fits, which the decoded last tokens need not (a cut
        inside a character, or an encoder's lower-cased "##" piece, encodes to more)."""

        def encoded_length(start: int) -> int:
            return len(self.tokenizer.encode(text[start:]))

        low, high = 0, len(text)  # text[high:] (empty) fits; find the smallest start that does
        while low < high:
            middle = (low + high) // 2
            if encoded_length(middle) <= tokens:
                high = middle
            else:
                low = middle + 1
        while high < len(text) and encoded_length(high) > tokens:  # should the counts not fall
            high += 1  # steadily with the start, the first start that fits from there
        return text[high:]

    def tokenize(self, text: str) -> dict[str, Any]:
        ids = self.encode(text, "text")
        return {
            "ids": ids,
            "tokens": self.tokenizer.tokens(ids),
            "pieces": [self.tokenizer.decode([i]) for i in ids],
            "count": len(ids),
            "context": self.block_size,
        }

    # ------------------------------------------------------------------ GPT
    def require_gpt(self, what: str) -> None:
        if self.is_encoder:
            raise NotForThisModel(
                f"this model is an encoder: it has no {what}; it fills in [MASK] instead."
            )

    def next_logits(self, ids: list[int]) -> torch.Tensor:
        """The logits (V,) of the token after ``ids``, float32; the last prompt's are kept."""
        key = tuple(ids)
        cached = self.logits_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        idx = torch.tensor([ids], dtype=torch.long, device=self.model.device)
        with self.forward_lock, torch.inference_mode():
            logits, _ = self.model(idx, last_only=True)  # (1, 1, V)
        next_logits = logits[0, -1].float().cpu()
        self.logits_cache = (key, next_logits)
        return next_logits

    def next_token(
        self,
        prompt: str,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        limit: int,
    ) -> dict[str, Any]:
        """The ``limit`` most likely next tokens with P = softmax(logits) (before the filters)
        and the probability they are drawn with after temperature, top-k and top-p."""
        self.require_gpt("next-token distribution")
        ids = self.prompt_ids(prompt)
        logits = self.next_logits(ids)[None]  # (1, V)
        before = torch.softmax(logits, dim=-1)[0]  # (V,)
        after = sampling_distribution(logits, temperature, top_k, top_p)[0]
        top = before.topk(min(limit, before.numel()))
        kept = after > 0
        return {
            "prompt_tokens": len(ids),
            "vocab_size": before.numel(),
            "kept_count": int(kept.sum()),
            "kept_mass_before": float(before[kept].sum()),
            "tokens": [
                {
                    "id": token_id,
                    "token": self.tokenizer.decode([token_id]),
                    "logit": float(logits[0, token_id]),
                    "probability": float(before[token_id]),
                    "filtered_probability": float(after[token_id]),
                    "kept": bool(kept[token_id]),
                }
                for token_id in top.indices.tolist()
            ],
        }

    def generation_queue_position(self) -> int:
        """Joins the generation queue: how many generations run or wait ahead."""
        with self.queue_lock:
            ahead = self.generations_ahead
            self.generations_ahead += 1
            return ahead

    def leave_generation_queue(self) -> None:
        with self.queue_lock:
            self.generations_ahead -= 1

    def generate(
        self,
        prompt: str,
        max_new_tokens: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        seed: int | None,
        emit: Callable[[str, dict[str, Any]], None],
        cancelled: threading.Event,
    ) -> str:
        """Continue ``prompt`` exactly as ``light-llm generate`` does with these options
        (:func:`generate_text`, one generation at a time), calling ``emit("token", {...})``
        with each piece of decoded text, its tokens and the probability each was drawn with
        (after the filters). Returns the continuation."""
        pending: list[dict[str, Any]] = []

        def on_step(logits: torch.Tensor, ids: torch.Tensor) -> None:
            if cancelled.is_set():
                raise GenerationCancelled
            drawn = int(ids[0])
            probability = sampling_distribution(logits, temperature, top_k, top_p)[0, drawn]
            pending.append(
                {
                    "id": drawn,
                    "token": self.tokenizer.decode([drawn]),
                    "probability": float(probability),
                }
            )

        def on_text(row: int, piece: str) -> None:
            emit("token", {"text": piece, "tokens": list(pending)})
            pending.clear()

        with self.generation_lock:
            prompt_tokens = len(self.tokenizer.encode(prompt))
            # the model reads the last block_size tokens of a longer prompt (seed 000 §7)
            not_seen = max(0, prompt_tokens - self.block_size)
            emit(
                "start",
                {"prompt_tokens": prompt_tokens, "context": self.block_size, "not_seen": not_seen},
            )
            return generate_text(
                SerialisedForward(self.model, self.forward_lock),
                self.tokenizer,
                [prompt],
                max_new_tokens,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                seed=seed,
                on_text=on_text,
                on_step=on_step,
            )[0]

    # ------------------------------------------------------------------ both
    def attention(self, prompt: str) -> dict[str, Any]:
        """weights[layer][head][query][key] of every layer and head for ``prompt``."""
        self.prompt_ids(prompt)
        with self.forward_lock:
            attention = prompt_attention(self.model, self.tokenizer, prompt)
        return {
            "tokens": attention.tokens,
            "ids": attention.ids,
            "causal": not self.is_encoder,
            "weights": attention.maps.tolist(),
        }

    # ------------------------------------------------------------------ encoder
    def fill_mask(self, text: str, text_pair: str | None, top_k: int) -> dict[str, Any]:
        """For each [MASK], the ``top_k`` tokens with P = softmax(logits) (seed 003 §29)."""
        if not self.can_fill_mask:
            raise NotForThisModel(
                "this model has no masked-LM head, so it cannot fill in [MASK] (a GPT predicts "
                "the next token; a sentence-embedding model such as MiniLM ships without one)."
            )
        self.encode(text, "text")
        if text_pair is not None:
            self.encode(text_pair, "text_pair", "the second text (text_pair)")
        try:
            with self.forward_lock:
                predictions = predict_masked(self.model, self.tokenizer, text, text_pair, top_k)
        except LightLLMError as exc:
            raise RequestError("text", str(exc)) from None
        left_out = tokens_left_out(self.tokenizer, text, text_pair, self.model.config.block_size)
        # the tokens beyond the model's positions, which the predictions did not see
        return {"masks": [[c._asdict() for c in row] for row in predictions], "left_out": left_out}

    def similarity(self, sentences: list[str]) -> dict[str, Any]:
        """The cosine similarity of every pair of sentence embeddings (mean-pooled,
        L2-normalised: the all-MiniLM-L6-v2 recipe)."""
        if not self.is_encoder:
            raise NotForThisModel("sentence similarity needs an encoder; this model is a GPT.")
        for index, sentence in enumerate(sentences):
            self.encode(sentence, ("sentences", index), f"sentence {index}")
        assert isinstance(self.model, BertEncoder)
        limit = sentence_length_limit(self.folder, self.block_size)
        with self.forward_lock:
            vectors = embed_sentences(self.model, self.tokenizer, sentences, max_length=limit)
        return {
            "sentences": sentences,
            "similarity": cosine_similarity_matrix(vectors).tolist(),
            "dimensions": vectors.size(1),
        }


def event_stream(
    explorer: ExplorerModel, options: dict[str, Any], cancelled: threading.Event
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Run one generation on a worker thread, yielding its events as they come:
    ("queued", {"ahead"}) when others run first, ("start", ...), ("token", ...) per piece,
    then ("done", {"text", ...}) or ("error", {"detail"})."""
    import queue

    events: queue.Queue = queue.Queue()
    ahead = explorer.generation_queue_position()

    def work() -> None:
        try:
            text = explorer.generate(
                emit=lambda kind, data: events.put((kind, data)), cancelled=cancelled, **options
            )
            events.put(("done", {"prompt": options["prompt"], "text": text}))
        except GenerationCancelled:
            pass
        except LightLLMError as exc:
            events.put(("error", {"detail": str(exc)}))
        except Exception as exc:  # noqa: BLE001 - the page gets a sentence, not a hang
            events.put(("error", {"detail": f"the generation failed: {exc}"}))
        finally:
            explorer.leave_generation_queue()
            events.put(None)

    if ahead:
        yield "queued", {"ahead": ahead}
    threading.Thread(target=work, daemon=True, name="light-llm-generate").start()
    yield from iter(events.get, None)
