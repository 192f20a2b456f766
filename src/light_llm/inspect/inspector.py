"""A model seen from inside, whichever engine holds it: :class:`Inspector` runs the engine's
instrumented forward and hands back NumPy arrays, with the weights by the engines' shared
names, so that every analysis in this package is written once, in NumPy, for both engines.

The final norm, the unembedding and the soft-cap that the analyses apply to a residual (the
logit lens) are the NumPy engine's own ops (``reference/``), read off the same weights.

Precision: the analyses compute in float32 (float64 for a float64 model). A bfloat16 or
float16 model's weights and recorded activations are read as float32, and an int8 model is
run on its float weights W_hat = q s, so the numbers are those of the model's mathematics and
differ from what its own 16-bit or int8 kernels output by their rounding: the logit lens's last
stage from an int8 model's own log-probabilities by up to about 0.06 (measured on a small
run), and a bfloat16 model's direct logit attribution, whose parts were each rounded to
bfloat16, sums to its logit to about 0.03 of a logit of 9. A float32 model's agree to about
1e-6.
"""

from __future__ import annotations

import numpy as np

from light_llm.errors import InspectError
from light_llm.inspect.text import check_id_range, id_array
from light_llm.interventions import Patch, Trace
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
        if isinstance(model, NumpyGPT):  # the NumPy engine needs no torch, nor does this
            self.params, self.engine, self.encoder = model.state_dict(), "numpy", False
        else:
            from light_llm.inspect import instrumented as torch_instrumented

            model, self.params, self.encoder = torch_instrumented.seen_model(model)
            self.engine = "torch"
        self.model = model
        self.config = model.config

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
        ids = batch_of_ids(ids, self.config.vocab_size)
        if targets is not None:
            targets = batch_of_targets(targets, ids.shape, self.config.vocab_size)
        if start is not None:
            start = self.checked_start(start, ids.shape)
        if self.engine == "numpy":
            return numpy_instrumented.run_instrumented(
                self.model, ids, record=record, patches=patches, targets=targets, start=start
            )
        from light_llm.inspect import instrumented as torch_instrumented

        return torch_instrumented.run_on_arrays(
            self.model, ids, record=record, patches=patches, targets=targets, start=start
        )

    def checked_start(self, start: object, shape: tuple[int, int]) -> tuple[int, np.ndarray]:
        """``start`` = (layer l, resid_pre.l) checked: l from 0 to n_layer (n_layer: the final
        norm and head alone), the residual a (B, T, d) array of the batch's shape; else
        InspectError."""
        n_layer, width = self.config.n_layer, self.config.n_embd
        if not (isinstance(start, tuple | list) and len(start) == 2):
            raise InspectError("start must be a pair (layer, its recorded resid_pre).")
        layer, resid = start
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
            raise InspectError(f"start's layer must be an integer, got {layer!r}.")
        if not 0 <= layer <= n_layer:  # n_layer: after the last, the final norm and head alone
            raise InspectError(
                f"start's layer must be from 0 to {n_layer} (the model's {n_layer} layers; "
                f"{n_layer}: the head alone), got {layer}."
            )
        expected = (*shape, width)
        dtype = None if hasattr(resid, "detach") else np.asarray(resid).dtype  # a tensor's: numbers
        if dtype is not None and dtype.kind not in "iuf":
            raise InspectError(f"start's residual must be an array of numbers, got {dtype}.")
        if tuple(np.shape(resid)) != expected:
            raise InspectError(
                f"start's residual must have the batch's shape (B, T, d) = {expected}, got "
                f"{tuple(np.shape(resid))}."
            )
        return int(layer), resid

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
        return self.unembed(self.final_norm(resid))

    def unembed(self, x: np.ndarray) -> np.ndarray:
        """The head on a residual the final norm has already normalised (``final_norm``'s
        output): cap(x W_U^T), or an encoder's masked-LM head. (..., d) -> (..., V)."""
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


def batch_of_targets(targets: object, shape: tuple[int, int], vocab_size: int) -> np.ndarray:
    """``targets`` as a (B, T) int64 array of the batch's ``shape``, each a token id in [0,
    vocab_size) or -1 (nothing scored there), else InspectError: -log softmax(logits)[y] is
    defined for nothing else (a negative id was read as id 0 by the NumPy engine)."""
    array = id_array(targets, "targets", ndim=2)
    if array.shape != tuple(shape):
        raise InspectError(
            f"the targets must have the batch's shape {tuple(shape)}, got {array.shape}."
        )
    scored = array[array != -1]
    if scored.size:
        check_id_range(scored, vocab_size, "targets (-1: not scored)")
    return array.astype(np.int64)


def batch_of_ids(ids: object, vocab_size: int) -> np.ndarray:
    """``ids`` as a (B, T) int64 array of token ids in [0, vocab_size) with B and T at least
    1, else InspectError."""
    array = id_array(ids, "batch", ndim=2)
    if 0 in array.shape:
        raise InspectError(f"the batch must hold at least one token, got shape {array.shape}.")
    check_id_range(array, vocab_size, "batch")
    return array.astype(np.int64)
