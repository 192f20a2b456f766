"""The explorer's "look inside" API (issue 22): one endpoint per analysis of
:mod:`light_llm.inspect`, on the text of the request, tokenized by the model's tokenizer.

    POST /api/inspect/lens         {prompt, target, top_k}
         -> stages, tokens, top_tokens / top_probs [stage][position][k],
            target_tokens, target_probs / target_ranks [stage][position]
    POST /api/inspect/attribution  {prompt, token, versus, difference, position}
         -> names, values (add up to total = logit), heads [layer][head], mlps [layer]
    POST /api/inspect/ablate       {prompt, components, method, token, limit}
         -> token, p, ablated_p, delta_p, tokens (probability before and after)
    POST /api/inspect/importance   {prompt, method}
         -> source, n_tokens, loss, heads [layer][head] and mlps [layer] (Δloss)
    POST /api/inspect/patching     {clean, corrupt, answer, wrong}
         -> clean_metric, corrupt_metric, resid [layer input][position], heads [layer][head]
    POST /api/inspect/head-roles   {prompt, n_sequences, length, seed}
         -> previous_token, first_token, induction [layer][head], loss_first_copy, ...
    POST /api/inspect/neuron       {prompt, layer, neuron, k, context}
         -> examples [{activation, position, tokens}], mean, max
    POST /api/inspect/surprise     {text}
         -> tokens, losses, probs, ranks, top_tokens, top_probs (from the second token on)

A token given as text (target, token, versus, answer, wrong) must be exactly one token. A
field the model cannot take (an empty text, a prompt longer than the context, a layer, head,
neuron or position out of range, patching prompts of different lengths) is a 422 naming it;
an analysis that does not apply to the model (any of them on an encoder, attribution on a
post-LN GPT) is a 422 naming the field ``model``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import Field

from light_llm.limits import SEED_LIMIT
from light_llm.serve.fields import Body, Prompt
from light_llm.serve.inspection import Inspection

OneToken = Annotated[str, Field(max_length=1000, description="text that is exactly one token")]
Component = Annotated[str, Field(max_length=64, description="L1H2, L1MLP, L1ATTN or L1N37")]
Method = Annotated[
    Literal["zero", "mean"],
    Field(description="zero: replace by 0; mean: by its mean over the prompt (or the text)"),
]


class LensBody(Body):
    prompt: Prompt
    target: OneToken | None = Field(
        None, description="the token followed at every position (default: the actual next one)"
    )
    top_k: Annotated[int, Field(ge=1, le=20)] = 5


class AttributionBody(Body):
    prompt: Prompt
    token: OneToken | None = Field(None, description="default: the model's top guess")
    versus: OneToken | None = Field(
        None, description="the token subtracted (default: the most likely other token)"
    )
    difference: bool = Field(True, description="false: attribute token's logit alone")
    position: int = Field(-1, description="the position predicting (negative: from the end)")


class AblateBody(Body):
    prompt: Prompt
    components: Annotated[list[Component], Field(max_length=4096)] = Field(
        description="parts to remove: L1H2 (a head), L1MLP, L1ATTN, L1N37 (an MLP unit)"
    )
    method: Method = "zero"
    token: OneToken | None = Field(None, description="Δp of it (default: the top guess)")
    limit: Annotated[int, Field(ge=1, le=1000)] = 10


class ImportanceBody(Body):
    prompt: Prompt | None = Field(
        None,
        description="the text scored when the checkpoint comes from no training run (a "
        "run's is its validation split, and this is not read)",
    )
    method: Method = "zero"


class PatchingBody(Body):
    clean: Prompt
    corrupt: Prompt = Field(description="the same number of tokens as clean")
    answer: OneToken
    wrong: OneToken


class HeadRolesBody(Body):
    prompt: Prompt = Field(description="the text of the previous- and first-token scores")
    n_sequences: Annotated[int, Field(ge=1, le=256)] = 8
    length: Annotated[int | None, Field(ge=2)] = Field(
        None, description="tokens of each random sequence (default: half the context, <= 64)"
    )
    seed: Annotated[int, Field(ge=0, le=SEED_LIMIT - 1)] = 0


class NeuronBody(Body):
    prompt: Prompt | None = Field(
        None,
        description="the text searched when the checkpoint comes from no training run (a "
        "run's is its validation split, and this is not read)",
    )
    layer: Annotated[int, Field(ge=0)]
    neuron: Annotated[int, Field(ge=0)]
    k: Annotated[int, Field(ge=1, le=100)] = 10
    context: Annotated[int, Field(ge=0, le=64)] = 12


class SurpriseBody(Body):
    text: Prompt


def inspect_router(inspection: Inspection) -> APIRouter:
    """The routes of the module docstring, answering from ``inspection``."""
    router = APIRouter(prefix="/api/inspect", tags=["look inside"])

    @router.post("/lens")
    def lens(body: LensBody) -> dict[str, Any]:
        """The logit lens: what each sublayer's residual would predict,
        softmax(cap(LN_f(resid) W_U^T)), per stage and position."""
        return inspection.lens(body.prompt, body.target, body.top_k)

    @router.post("/attribution")
    def attribution(body: AttributionBody) -> dict[str, Any]:
        """Direct logit attribution: z[token] - z[versus] split into the embeddings, every
        head, every MLP and the biases (the final norm's scale held fixed)."""
        return inspection.attribution(
            body.prompt, body.token, body.versus, body.difference, body.position
        )

    @router.post("/ablate")
    def ablate(body: AblateBody) -> dict[str, Any]:
        """The next-token distribution with the named parts ablated, beside the model's."""
        return inspection.ablation(
            body.prompt, body.components, body.method, body.token, body.limit
        )

    @router.post("/importance")
    def importance(body: ImportanceBody) -> dict[str, Any]:
        """Δloss of ablating each head and each MLP alone, over the run's validation split
        (its first 8192 tokens, fewer on a large model), else over the prompt."""
        return inspection.importance(body.prompt, body.method)

    @router.post("/patching")
    def patching(body: PatchingBody) -> dict[str, Any]:
        """Activation patching: the fraction of z[answer] - z[wrong] restored in the corrupted
        run by each clean residual (layer input, position) and each clean head output."""
        return inspection.patching(body.clean, body.corrupt, body.answer, body.wrong)

    @router.post("/head-roles")
    def roles(body: HeadRolesBody) -> dict[str, Any]:
        """Previous-token, first-token and induction scores of every head."""
        return inspection.head_roles(body.prompt, body.n_sequences, body.length, body.seed)

    @router.post("/neuron")
    def neuron(body: NeuronBody) -> dict[str, Any]:
        """The contexts where one MLP unit fires most."""
        return inspection.neuron(body.prompt, body.layer, body.neuron, body.k, body.context)

    @router.post("/surprise")
    def text_surprise(body: SurpriseBody) -> dict[str, Any]:
        """Each token's loss -ln p(x_t | x_<t), its probability and rank, the top guess."""
        return inspection.surprise(body.text)

    return router
