"""What the explorer's "look inside" panels show (issue 22), computed by :mod:`light_llm.inspect`
on the GPT the explorer holds, as JSON-ready dicts (NaN as null):

    lens          logit_lens: LN_f and W_U applied to the residual after every sublayer
    attribution   direct_logit_attribution: a logit (difference) split into heads and MLPs
    ablation      ablate_prompt: the next-token distribution with parts zeroed or mean-ablated
    importance    head_importance: Δloss of ablating each head and each MLP over a text
    patching      activation_patching: the fraction of z[answer] - z[wrong] each clean
                  activation restores in the corrupted run
    head roles    head_roles: previous-token, first-token and induction scores
    neuron        top_activations: the contexts that make one MLP unit fire most
    surprise      surprise: each token's loss -ln p and the model's top guess

The formulas are in those functions' docstrings. The head-importance table and the neuron
browser read a text: the run's validation split when the checkpoint comes from a training run
(the last 10% of the corpus it trained on, as ``light-llm eval`` and ``light-llm inspect`` read
it), else the prompt; its first :func:`page_tokens` tokens, so that the page answers in seconds
(all 8192 on the default model, fewer on a larger one). A field the analysis
cannot take is a :class:`RequestError` naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from light_llm.errors import InspectError, LightLLMError, TokenizerError
from light_llm.inspect import (
    Inspector,
    ablate_prompt,
    activation_patching,
    direct_logit_attribution,
    head_importance,
    head_roles,
    logit_lens,
    surprise,
    top_activations,
)
from light_llm.inspect.tokens import one_token, validation_ids
from light_llm.limits import check_integer
from light_llm.serve.session import ExplorerModel, RequestError

PAGE_TEXT_TOKENS = 8192  # tokens an importance table or a neuron reads at most (CLI: 32k)
PAGE_BUDGET = 1.2e11  # parameters x tokens x forward passes a text analysis may cost: seconds
PAGE_TEXT_TOKENS_AT_LEAST = 64  # ... but never fewer tokens than this, however large the model
IMPORTANCE_CACHE_SIZE = 16  # tables kept per model (one a method, and one a prompt scored)


@contextmanager
def naming(field: str) -> Iterator[None]:
    """Turns an InspectError raised inside into a RequestError naming ``field``."""
    try:
        yield
    except InspectError as exc:
        raise RequestError(field, str(exc)) from None


def page_tokens(n_parameters: int, passes: int) -> int:
    """How many tokens of a text an analysis of ``passes`` forward passes over it reads on a
    model of ``n_parameters``: a forward costs about 2 x parameters x tokens operations, so
    tokens = PAGE_BUDGET / (parameters x passes), between :data:`PAGE_TEXT_TOKENS_AT_LEAST`
    and :data:`PAGE_TEXT_TOKENS`."""
    affordable = int(PAGE_BUDGET // (max(1, n_parameters) * max(1, passes)))
    return max(PAGE_TEXT_TOKENS_AT_LEAST, min(PAGE_TEXT_TOKENS, affordable))


def plain(array: Any) -> list:
    """A NumPy array as nested lists of Python numbers, NaN and ±inf as None (JSON has
    neither)."""
    array = np.asarray(array)
    if array.dtype.kind == "f":
        return np.where(np.isfinite(array), array, None).tolist()
    return array.tolist()


class Inspection:
    """The analyses of :mod:`light_llm.inspect` on ``explorer``'s GPT, one at a time (under its
    forward lock), with the head-importance tables cached."""

    def __init__(self, explorer: ExplorerModel) -> None:
        self.explorer = explorer
        self.forget()

    def forget(self) -> None:
        """Drop what was computed of the model loaded before (a run's newer checkpoint)."""
        self.version = self.explorer.version
        self._inspector: Inspector | None = None
        self._validation: np.ndarray | None = None
        self.importance_cache: dict[tuple, dict[str, Any]] = {}  # under the forward lock

    @property
    def tokenizer(self):
        return self.explorer.tokenizer

    # ------------------------------------------------------------------ the model and its text
    @property
    def inspector(self) -> Inspector:
        if self.explorer.is_encoder:
            raise RequestError(
                "model",
                "looking inside (the logit lens, attribution, ablation, patching, head roles, "
                "neurons, surprise) works on a GPT; this model is an encoder.",
            )
        if self.version != self.explorer.version:
            self.forget()
        if self._inspector is None:
            self._inspector = Inspector(self.explorer.model)
        return self._inspector

    @property
    def config(self):
        return self.inspector.config

    def pieces(self, ids) -> list[str]:
        """Each token id as the tokenizer shows it, as ``light-llm inspect`` does: a piece of
        a multi-byte character as <0xNN> (decoding it alone makes it U+FFFD, so that different
        pieces would look the same)."""
        return self.tokenizer.tokens([int(i) for i in ids])

    def token(self, token_id: int) -> dict[str, Any]:
        return {"id": int(token_id), "token": self.pieces([token_id])[0]}

    def one_token(self, text: str, field: str) -> int:
        """The id of ``text`` when the tokenizer reads it as exactly one token, else a
        RequestError naming ``field``."""
        try:
            return one_token(self.tokenizer, text, field)
        except (InspectError, TokenizerError) as exc:  # TokenizerError: a character unknown
            raise RequestError(field, str(exc)) from None

    def prompt(self, prompt: str, field: str = "prompt") -> np.ndarray:
        """The prompt's ids (refused when empty or longer than the context)."""
        return np.array(self.explorer.prompt_ids(prompt, field), dtype=np.int64)

    def validation_ids(self) -> np.ndarray | None:
        """The first :data:`PAGE_TEXT_TOKENS` tokens of the run's validation split (of the
        corpus it trained on); None when the checkpoint comes from no training run or its
        corpus cannot be read any more."""
        if self._validation is None and self.explorer.run_folder is not None:
            try:
                self._validation, _ = validation_ids(
                    self.explorer.folder, self.tokenizer, max_tokens=PAGE_TEXT_TOKENS
                )
            except LightLLMError:
                return None
        return self._validation

    def text(self, prompt: str | None, passes: int) -> tuple[np.ndarray, str]:
        """(ids, what they are) of the text an analysis of ``passes`` forward passes over it
        reads: its first :func:`page_tokens` tokens of the run's validation split, else of
        ``prompt`` (a RequestError when there is none)."""
        keep = page_tokens(self.explorer.model.num_parameters(), passes)
        validation = self.validation_ids()
        if validation is not None and len(validation) >= 2:
            return validation[:keep], "validation split"
        if prompt is None:
            raise RequestError(
                "prompt", "this checkpoint comes from no training run: give the text to read."
            )
        return np.array(self.explorer.encode(prompt)[:keep], dtype=np.int64), "prompt"

    # ------------------------------------------------------------------ the analyses
    def lens(self, prompt: str, target: str | None, top_k: int) -> dict[str, Any]:
        """logit_lens: per stage and position the top_k tokens and the probability and rank of
        ``target`` (or of the prompt's actual next token)."""
        inspector = self.inspector
        ids = self.prompt(prompt)
        target_id = None if target is None else self.one_token(target, "target")
        with naming("top_k"):
            check_integer("top_k", top_k, 1, inspector.config.vocab_size, InspectError)
        with self.explorer.forward_lock, naming("prompt"):
            lens = logit_lens(inspector, ids, target=target_id, top_k=top_k)
        return {
            "stages": lens.stages,
            "ids": plain(lens.ids),
            "tokens": self.pieces(lens.ids),
            "top_ids": plain(lens.top_ids),
            "top_tokens": [[self.pieces(cell) for cell in row] for row in lens.top_ids],
            "top_probs": plain(lens.top_probs),
            "target_ids": plain(lens.target_ids),
            "target_tokens": [self.pieces([i])[0] if i >= 0 else None for i in lens.target_ids],
            "target_probs": plain(lens.target_probs),
            "target_ranks": plain(np.where(lens.target_ranks < 0, np.nan, lens.target_ranks)),
        }

    def attribution(
        self,
        prompt: str,
        token: str | None,
        versus: str | None,
        difference: bool,
        position: int,
    ) -> dict[str, Any]:
        """direct_logit_attribution of ``token`` (default: the model's top guess) against
        ``versus`` (default: the most likely other token; none when ``difference`` is False)
        at ``position`` (negative: from the end)."""
        inspector = self.inspector
        if versus is not None and not difference:  # the two fields contradict each other
            message = "versus names a token to take the difference with, but difference is false"
            raise RequestError("versus", message + ": give one or the other.")
        ids = self.prompt(prompt)
        with naming("position"):
            check_integer("position", position, -len(ids), len(ids) - 1, InspectError)
        t = position % len(ids)
        token_id = None if token is None else self.one_token(token, "token")
        versus_id = None if versus is None else self.one_token(versus, "versus")
        with self.explorer.forward_lock:
            ranking = np.argsort(-inspector.run(ids[None]).logits[0, t], kind="stable")
            if token_id is None:
                token_id = int(ranking[0])
            if versus_id is not None and versus_id == token_id:  # the top guess, when unnamed
                message = "the token to compare with must differ from the token."
                raise RequestError("versus", message)
            if versus_id is None and difference:
                versus_id = int(next(i for i in ranking if i != token_id))
            try:
                result = direct_logit_attribution(
                    inspector, ids, token_id, versus=versus_id, position=t
                )
            except InspectError as exc:
                field = "model" if inspector.config.block_order != "pre" else "prompt"
                raise RequestError(field, str(exc)) from None
        return {
            "tokens": self.pieces(ids),
            "position": result.position,
            "token": self.token(result.token),
            "versus": None if result.versus is None else self.token(result.versus),
            "names": result.names,
            "values": plain(result.values),
            "total": result.total,
            "logit": result.logit,
            "output_logit": result.output_logit,
            "softcap": inspector.config.logit_softcap,
            "heads": plain(result.heads),
            "mlps": plain(result.mlps),
        }

    def ablation(
        self, prompt: str, components: list[str], method: str, token: str | None, limit: int
    ) -> dict[str, Any]:
        """ablate_prompt: the next-token distribution before and after ablating
        ``components`` (mean ablation takes the means over the prompt), the ``limit`` most
        likely tokens after it, and Δp of ``token`` (default: the top guess before)."""
        inspector = self.inspector
        ids = self.prompt(prompt)
        token_id = None if token is None else self.one_token(token, "token")
        with self.explorer.forward_lock, naming("components"):
            result = ablate_prompt(inspector, ids, components, method=method, token=token_id)
        order = np.argsort(-result.ablated_probs, kind="stable")[:limit]
        return {
            "components": result.components,
            "method": result.method,
            "token": self.token(result.token),
            "p": result.p,
            "ablated_p": result.ablated_p,
            "delta_p": result.delta_p,
            "tokens": [
                {
                    **self.token(i),
                    "probability": float(result.probs[i]),
                    "ablated_probability": float(result.ablated_probs[i]),
                }
                for i in order
            ],
        }

    def importance(self, prompt: str | None, method: str) -> dict[str, Any]:
        """head_importance over :meth:`text`, cached per method and text (looked up under the
        forward lock, so that a request arriving while the table is computed waits for it
        instead of computing it again)."""
        inspector = self.inspector
        with self.explorer.forward_lock:
            config = inspector.config
            passes = config.n_layer * (config.n_head + 1) + (2 if method == "mean" else 1)
            ids, source = self.text(prompt, passes)  # a pass per part, the clean one, the means
            key = (method, source, ids.tobytes())
            if key not in self.importance_cache:
                with naming("prompt"):
                    table = head_importance(inspector, ids, method=method)
                if len(self.importance_cache) >= IMPORTANCE_CACHE_SIZE:
                    self.importance_cache.pop(next(iter(self.importance_cache)))
                self.importance_cache[key] = {
                    "method": table.method,
                    "source": source,
                    "n_tokens": table.n_tokens,
                    "loss": table.loss,
                    "heads": plain(table.heads),
                    "mlps": plain(table.mlps),
                }
            return self.importance_cache[key]

    def patching(self, clean: str, corrupt: str, answer: str, wrong: str) -> dict[str, Any]:
        """activation_patching of the clean prompt's activations into the corrupted one's run,
        the metric z[answer] - z[wrong] at the last position."""
        inspector = self.inspector
        clean_ids = self.prompt(clean, "clean")
        corrupt_ids = self.prompt(corrupt, "corrupt")
        answer_id = self.one_token(answer, "answer")
        wrong_id = self.one_token(wrong, "wrong")
        if answer_id == wrong_id:
            raise RequestError("wrong", "the wrong token must differ from the answer.")
        with self.explorer.forward_lock, naming("corrupt"):
            result = activation_patching(inspector, clean_ids, corrupt_ids, answer_id, wrong_id)
        return {
            "clean_tokens": self.pieces(clean_ids),
            "corrupt_tokens": self.pieces(corrupt_ids),
            "answer": self.token(answer_id),
            "wrong": self.token(wrong_id),
            "clean_metric": result.clean_metric,
            "corrupt_metric": result.corrupt_metric,
            "resid_labels": result.resid_labels,
            "resid": plain(result.resid),
            "heads": plain(result.heads),
        }

    def head_roles(
        self, prompt: str, n_sequences: int, length: int | None, seed: int
    ) -> dict[str, Any]:
        """head_roles: previous- and first-token scores on the prompt, induction scores on
        ``n_sequences`` random sequences of ``length`` tokens repeated twice."""
        inspector = self.inspector
        ids = self.prompt(prompt)
        half = inspector.config.block_size // 2
        if length is not None:
            with naming("length"):
                check_integer("length", length, 2, half, InspectError)
        with self.explorer.forward_lock, naming("prompt"):
            roles = head_roles(inspector, ids, length=length, n_sequences=n_sequences, seed=seed)
        return {
            "previous_token": plain(roles.previous_token),
            "first_token": plain(roles.first_token),
            "induction": plain(roles.induction),
            "loss_first_copy": roles.loss_first_copy,
            "loss_second_copy": roles.loss_second_copy,
            "length": roles.length,
            "n_sequences": roles.n_sequences,
        }

    def neuron(
        self, prompt: str | None, layer: int, neuron: int, k: int, context: int
    ) -> dict[str, Any]:
        """top_activations of unit ``neuron`` of layer ``layer``'s MLP over :meth:`text`."""
        inspector = self.inspector
        config = inspector.config
        with naming("layer"):
            check_integer("layer", layer, 0, config.n_layer - 1, InspectError)
        with naming("neuron"):
            check_integer("neuron", neuron, 0, config.ffn_hidden - 1, InspectError)
        with self.explorer.forward_lock, naming("prompt"):
            ids, source = self.text(prompt, 1)
            found = top_activations(inspector, ids, layer, neuron, k=k, context=context)
        return {
            "layer": found.layer,
            "neuron": found.neuron,
            "units": config.ffn_hidden,
            "source": source,
            "n_tokens": len(ids),
            "mean": found.mean,
            "max": found.max,
            "examples": [
                {"activation": float(a), "position": int(p), "tokens": self.pieces(c)}
                for a, p, c in zip(found.activations, found.positions, found.contexts, strict=True)
            ],
        }

    def surprise(self, text: str) -> dict[str, Any]:
        """surprise: each token's loss -ln p(x_t | x_<t) and the model's top guess there."""
        inspector = self.inspector
        ids = self.explorer.encode(text, "text")
        most = page_tokens(self.explorer.model.num_parameters(), 1)
        if len(ids) > most:
            message = f"the text is {len(ids):,} tokens long; at most {most:,} here."
            raise RequestError("text", message)
        with self.explorer.forward_lock, naming("text"):
            scored = surprise(inspector, ids)
        return {
            "ids": plain(scored.ids),
            "tokens": self.pieces(scored.ids),
            "losses": plain(scored.losses),
            "probs": plain(scored.probs),
            "ranks": plain(scored.ranks),
            "top_tokens": self.pieces(scored.top_ids),
            "top_probs": plain(scored.top_probs),
            "mean_loss": scored.mean_loss,
        }
