"""The param group of the embedding tables, shared by AdamW (:mod:`light_llm.train.optim`)
and Muon's AdamW half (:mod:`light_llm.train.muon`): the token and position tables at a peak
rate of their own (``--embedding-lr``), on the one warmup + decay schedule."""

from __future__ import annotations

from torch import nn

from light_llm.muon_spec import is_embedding_table


def embedding_group(
    model: nn.Module, lr: float, embedding_lr: float | None, weight_decay: float
) -> tuple[list[dict], set[int]]:
    """The param group of the embedding tables (:func:`~light_llm.muon_spec.is_embedding_table`)
    at their own peak rate ``embedding_lr``, or no group when it is None. Its ``lr_ratio``
    (``embedding_lr / lr``) lets the one schedule scale it; its decay λ·lr/embedding_lr
    keeps the shrink per step η·λ of the other matrices. Also returns the ids of the tensors
    it holds, which the caller's other groups leave out."""
    if embedding_lr is None:
        return [], set()
    tables = [p for n, p in model.named_parameters() if p.requires_grad and is_embedding_table(n)]
    if not tables:
        return [], set()
    ratio = embedding_lr / lr
    group = {"params": tables, "lr": embedding_lr, "lr_ratio": ratio}
    return [{**group, "weight_decay": weight_decay / ratio}], {id(p) for p in tables}
