"""A model seen from inside, whichever engine holds it: :class:`Inspector` runs the engine's
instrumented forward and hands back NumPy arrays, with the weights by the engines' shared
names, so that every analysis in this package is written once, in NumPy, for both engines.

The final norm, the unembedding and the soft-cap that the analyses apply to a residual (the
logit lens) are the NumPy engine's own ops (``reference/``), read off the same weights.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from light_llm.errors import InspectError
from light_llm.inspect import instrumented as torch_instrumented
from light_llm.interventions import Patch, Trace
from light_llm.models.bert import BertEncoder
from light_llm.models.gpt import GPT
from light_llm.nn.lora import lora_layers, merge_lora
from light_llm.reference import instrumented as numpy_instrumented
from light_llm.reference.activations import gelu_forward
from light_llm.reference.blocks import norm_forward
from light_llm.reference.linear import linear_forward
from light_llm.reference.model import NumpyGPT
from light_llm.reference.softcap import softcap_forward


class Inspector:
    """``Inspector(model)`` for a :class:`GPT` (a LoRA run is seen merged) or a
    :class:`NumpyGPT`. ``run(ids, record=..., patches=..., targets=...)`` is the instrumented
    forward; ``params`` the weights as arrays by name (the model's dtype, float32 for 16-bit
    ones); ``lens(resid)`` the final norm, unembedding and soft-cap applied to any residual
    (..., d)."""

    def __init__(self, model: object) -> None:
        if isinstance(model, Inspector):
            model = model.model
        if isinstance(model, BertEncoder) and model.mlm_head is None:
            raise InspectError(
                "this encoder has no masked-LM head (a sentence-embedding model), so it "
                "predicts no token to look inside of."
            )
        if isinstance(model, (GPT, BertEncoder)):
            if lora_layers(model):
                model = merge_lora(copy.deepcopy(model))
            model.eval()
            self.params = {name: as_array(tensor) for name, tensor in model.state_dict().items()}
        elif isinstance(model, NumpyGPT):
            self.params = model.state_dict()
        else:
            raise InspectError(
                "looking inside works on a GPT of either engine (light_llm.models.GPT or "
                "light_llm.reference.NumpyGPT) or an encoder with its masked-LM head, not a "
                f"{type(model).__name__}."
            )
        self.model = model
        self.config = model.config
        self.engine = "numpy" if isinstance(model, NumpyGPT) else "torch"
        self.encoder = isinstance(model, BertEncoder)

    def require_gpt(self, analysis: str, why: str) -> None:
        """InspectError when the model is an encoder, saying why ``analysis`` needs a GPT."""
        if self.encoder:
            raise InspectError(f"{analysis} needs a GPT: {why}")

    @property
    def unembedding(self) -> np.ndarray:
        """W_U: (V, d), the output head (the token table when tied; an encoder's masked-LM
        decoder)."""
        return self.params["mlm_head.decoder.weight" if self.encoder else "lm_head.weight"]

    def run(
        self,
        ids: np.ndarray,
        *,
        record=(),
        patches: list[Patch] | tuple = (),
        targets: np.ndarray | None = None,
        start: tuple[int, np.ndarray] | None = None,
    ) -> Trace:
        """The instrumented forward on ``ids`` (B, T), in NumPy arrays; ``start`` = (layer l,
        its recorded resid_pre) begins at layer l."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.engine == "numpy":
            return numpy_instrumented.run_instrumented(
                self.model, ids, record=record, patches=patches, targets=targets, start=start
            )
        device = self.model.device
        target_tensor = None if targets is None else torch.as_tensor(targets, device=device)
        if start is not None:
            start = (start[0], torch.as_tensor(start[1], device=device))
        trace = torch_instrumented.run_instrumented(
            self.model,
            torch.as_tensor(ids, device=device),
            record=record,
            patches=patches,
            targets=target_tensor,
            start=start,
        )
        return Trace(
            as_array(trace.logits),
            None if trace.token_losses is None else as_array(trace.token_losses),
            {name: as_array(value) for name, value in trace.activations.items()},
        )

    def final_norm(self, resid: np.ndarray) -> np.ndarray:
        """LN_f(resid) (the model's final norm, its statistics taken from ``resid`` itself);
        the identity for a post-LN model, which has none."""
        if self.config.block_order != "pre":
            return resid
        name = "ln_f" if self.encoder else "transformer.ln_f"
        return norm_forward(resid, self.params, name, self.config)[0]

    def lens(self, resid: np.ndarray) -> np.ndarray:
        """logits = cap(LN_f(resid) W_U^T): what the model would predict if ``resid`` were its
        last residual (nostalgebraist's logit lens, 2020); for an encoder, its masked-LM head
        LN(GELU(x W_t + b_t)) E^T + b (seed 003 §29). (..., d) -> (..., V)."""
        x = self.final_norm(resid)
        if self.encoder:
            hidden, _ = linear_forward(
                x, self.params["mlm_head.dense.weight"], self.params.get("mlm_head.dense.bias")
            )
            hidden, _ = norm_forward(
                gelu_forward(hidden)[0], self.params, "mlm_head.ln", self.config
            )
            decoded, _ = linear_forward(
                hidden, self.unembedding, self.params.get("mlm_head.decoder.bias")
            )
            return decoded
        logits = x @ self.unembedding.T
        if self.config.logit_softcap is not None:
            logits = softcap_forward(logits, self.config.logit_softcap)[0]
        return logits


def as_array(tensor: torch.Tensor) -> np.ndarray:
    """A CPU NumPy copy of ``tensor`` (float32 at least: NumPy has no bfloat16)."""
    if tensor.dtype.is_floating_point and tensor.element_size() < 4:
        tensor = tensor.float()
    return tensor.detach().cpu().numpy()
