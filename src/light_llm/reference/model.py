"""The GPT in NumPy: the PyTorch engine's model with every backward pass written out
(seed 000; seed 001 "Backpropagation Through Transformers"; seed 002 §7.3, §9-§10).

    X_0 = Dropout(E[tokens] + P[positions])           (seed 000 §2)
    X_l = Block_l(X_{l-1}),  l = 1..L                 (blocks.py; with value embeddings,
                                                      V_l = a_l X W_V + b_l E_v[tokens])
        (with the embedding skip, Block_l reads λ_l X_{l-1} + μ_l X_0)
        (with the smear, X_0[t] += λ σ(w · X_0[t, :k]) X_0[t-1] first; smear.py)
    logits = LN_f(X_L) W_head^T,  W_head = E if tied  (seed 002 §10.2, eq. 43)
    logits = c tanh(logits / c)                       (logit_softcap = c only; softcap.py)
    loss = mean cross-entropy(logits, targets)        (loss.py)
    loss += w · mean CE((h + h W_mtp^T) W_head^T, the token after next)
                                                      (mtp_weight = w > 0, training only;
                                                      h = LN_f(X_L), models/gpt.py)

``forward`` returns the logits, the loss and a cache; ``backward(cache)`` walks the same steps
in reverse and returns the gradient of every parameter, by the PyTorch engine's names
(``transformer.h.0.attn.c_attn.weight``, ...), so that the two engines share configs,
checkpoints and optimiser code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from light_llm.config import ModelConfig, check_buildable, smear_width
from light_llm.errors import CheckpointError, ConfigError, SamplingError
from light_llm.limits import check_seed
from light_llm.reference.blocks import (
    VALUE_EMBEDDING_GRAD,
    block_backward,
    block_forward,
    norm_backward,
    norm_forward,
)
from light_llm.reference.dropout import dropout_backward, dropout_forward
from light_llm.reference.embedding import embedding_backward, embedding_forward
from light_llm.reference.kv_cache import KVCache
from light_llm.reference.linear import linear_backward, linear_forward
from light_llm.reference.loss import cross_entropy_backward, cross_entropy_forward
from light_llm.reference.positions import rope_angles, sinusoidal_table
from light_llm.reference.smear import smear_backward, smear_forward
from light_llm.reference.softcap import softcap_backward, softcap_forward

INIT_STD = 0.02  # N(0, 0.02) for every weight matrix and embedding (seed 000 §10)
DTYPES = {"float32": np.float32, "float64": np.float64}


def parameter_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every trainable parameter's name and shape, in the order
    ``GPT(config).named_parameters()`` lists them (a tied lm_head.weight is the token table,
    listed once)."""
    d, d_ff, V = config.n_embd, config.ffn_hidden, config.vocab_size
    shapes: dict[str, tuple[int, ...]] = {"transformer.wte.weight": (V, d)}

    def add_norm(name: str) -> None:
        shapes[name + ".weight"] = (d,)
        if config.norm == "layernorm" and config.bias:
            shapes[name + ".bias"] = (d,)

    def add_linear(name: str, n_out: int, n_in: int) -> None:
        shapes[name + ".weight"] = (n_out, n_in)
        if config.bias:
            shapes[name + ".bias"] = (n_out,)

    for i in range(config.n_layer):
        layer = f"transformer.h.{i}"
        if config.embedding_skip:  # a module's own parameters come before its children's
            shapes[layer + ".x0_gains"] = (2,)
        add_norm(layer + ".ln_1")
        if config.value_embeddings:  # a module's own parameters come before its children's
            shapes[layer + ".attn.ve_gains"] = (2,)
        add_linear(layer + ".attn.c_attn", 3 * d, d)
        add_linear(layer + ".attn.c_proj", d, d)
        add_norm(layer + ".ln_2")
        add_linear(layer + ".mlp.c_fc", d_ff, d)
        if config.activation == "swiglu":
            add_linear(layer + ".mlp.c_v", d_ff, d)
        add_linear(layer + ".mlp.c_proj", d, d_ff)
    if config.positions == "learned":
        shapes["transformer.wpe.weight"] = (config.block_size, d)
    if config.value_embeddings:
        shapes["transformer.wve.weight"] = (V, d)
    if config.smear:  # λ, then w: a module's own parameters come before its children's
        shapes["transformer.smear.gain"] = (1,)
        shapes["transformer.smear.gate"] = (smear_width(config),)
    if config.block_order == "pre":
        add_norm("transformer.ln_f")
    if not config.tie_embeddings:
        shapes["lm_head.weight"] = (V, d)
    if config.multi_token:
        shapes["mtp_proj.weight"] = (d, d)
    return shapes


def as_numpy(value) -> np.ndarray:
    """A NumPy array from a NumPy array or a PyTorch tensor (without importing torch)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


@dataclass
class ForwardCache:
    """What :meth:`NumpyGPT.backward` needs from a forward pass."""

    idx_cache: tuple
    value_cache: tuple | None
    positions: np.ndarray
    position_cache: tuple | None
    dropout_cache: np.ndarray | None
    skip_inputs: list | None  # the embedding skip's (X_{l-1}, X_0) of every layer
    block_caches: list
    final_norm_cache: tuple | None
    head_cache: tuple
    softcap_cache: np.ndarray | None
    loss_cache: tuple | None
    mtp_cache: tuple | None
    differentiable: bool
    smear_cache: tuple | None = None  # the smear's (smear.py), with ``smear``


class NumpyGPT:
    """A GPT language model in NumPy, built from a :class:`ModelConfig`; every variant the
    config allows (positions, norm, activation, block order, attention, bias, tying, QK-norm,
    logit soft-capping, value embeddings, the embedding skip, the smear, multi-token
    prediction).

    ``params`` maps the PyTorch engine's parameter names to arrays of ``dtype`` (float32 or
    float64). ``training`` switches dropout on, drawn from ``rng``.
    """

    def __init__(self, config: ModelConfig, *, dtype=np.float32, seed: int = 0) -> None:
        asked = dtype
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            dtype = None
        if dtype not in (np.float32, np.float64):
            raise ConfigError(f"the NumPy engine runs in float32 or float64, not {asked!r}.")
        check_buildable(config, bytes_per_value=dtype.itemsize)
        check_seed(seed)
        self.config = config
        self.dtype = dtype
        self.training = False
        self.rng = np.random.default_rng(seed)
        self.params = self.initial_parameters(np.random.default_rng(seed))
        if config.positions == "sinusoidal":
            self.position_table = sinusoidal_table(
                config.block_size, config.n_embd, config.position_base, dtype
            )
        if config.positions == "rotary":
            self.rope_cos, self.rope_sin = rope_angles(
                np.arange(config.block_size), config.head_dim, config.position_base, dtype
            )

    # ------------------------------------------------------------------ parameters
    def initial_parameters(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Weights ~ N(0, 0.02), biases 0, norm gains 1 (seed 000 §10), as the PyTorch GPT."""
        params = {}
        for name, shape in parameter_shapes(self.config).items():
            if name.endswith(".bias"):
                value = np.zeros(shape)
            elif name.endswith(".ve_gains"):  # a, b of V = a V + b E_v[tokens]
                value = np.full(shape, 0.5)
            elif name.endswith(".x0_gains"):  # λ, μ of λ X_{l-1} + μ X_0: the plain block
                value = np.array([1.0, 0.0])
            elif name.startswith("transformer.smear."):  # λ = 0, w = 0: no smear at first
                value = np.zeros(shape)
            elif len(shape) == 1:  # a norm's gain γ
                value = np.ones(shape)
            elif name == "mtp_proj.weight":  # the second head starts as the first
                value = np.zeros(shape)
            else:
                value = rng.normal(0.0, INIT_STD, size=shape)
            params[name] = value.astype(self.dtype)
        return params

    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())

    def state_dict(self) -> dict[str, np.ndarray]:
        """The parameters as ``GPT.state_dict()`` names them: with a tied lm_head.weight
        present as the token table itself."""
        state = dict(self.params)
        if self.config.tie_embeddings:
            state["lm_head.weight"] = self.params["transformer.wte.weight"]
        return state

    def load_state_dict(self, tensors, source: str = "the state dict") -> None:
        """Copy arrays (or PyTorch tensors) by name into ``params``, cast to the model's dtype.
        Every parameter must be there with its shape; a tied lm_head.weight may be present or
        not. Anything else is a CheckpointError naming it."""
        if not isinstance(tensors, Mapping):
            raise CheckpointError(
                f"a state dict maps parameter names to arrays, not a {type(tensors).__name__}."
            )
        tensors = dict(tensors)
        if self.config.tie_embeddings:
            tensors.pop("lm_head.weight", None)
        shapes = parameter_shapes(self.config)
        missing = sorted(set(shapes) - set(tensors))
        if missing:
            raise CheckpointError(
                f"{source} lacks {', '.join(missing[:3])}"
                f"{' and more' if len(missing) > 3 else ''}, which this config needs."
            )
        unexpected = sorted(set(tensors) - set(shapes))
        if unexpected:
            raise CheckpointError(
                f"{source} holds {', '.join(unexpected[:3])}"
                f"{' and more' if len(unexpected) > 3 else ''}, which this config does not have."
            )
        for name, shape in shapes.items():
            value = as_numpy(tensors[name])
            if not np.issubdtype(value.dtype, np.floating):
                raise CheckpointError(
                    f"{source}: {name} holds {value.dtype} values; model weights are "
                    "floating-point numbers."
                )
            if value.shape != shape:
                raise CheckpointError(
                    f"{source}: {name} has shape {value.shape} but this config needs {shape}."
                )
            if not np.isfinite(value).all():
                raise CheckpointError(
                    f"{source}: {name} holds NaN or infinite values, so every output of the "
                    "model would be meaningless; the checkpoint is corrupt."
                )
            self.params[name] = np.array(value, dtype=self.dtype)

    @classmethod
    def from_torch_state_dict(cls, state_dict, config: ModelConfig, dtype=None) -> NumpyGPT:
        """A NumpyGPT with the weights of a PyTorch GPT's ``state_dict()`` (tensors or arrays);
        the dtype follows the token table unless given."""
        if dtype is None:
            dtype = as_numpy(state_dict["transformer.wte.weight"]).dtype
        model = cls(config, dtype=dtype)
        model.load_state_dict(state_dict)
        return model

    def new_cache(self, batch_size: int) -> KVCache:
        """An empty KV cache for ``batch_size`` sequences (seed 002 §11.2)."""
        return KVCache.allocate(self.config, batch_size, self.dtype)

    # ------------------------------------------------------------------ forward
    def positions_for(
        self, n_new: int, offset: int, attention_mask: np.ndarray | None
    ) -> np.ndarray:
        """Absolute positions of the new tokens: offset..offset+T-1, or, with left padding,
        the count of real tokens before each one (every row starts at position 0)."""
        if attention_mask is None:
            return np.arange(offset, offset + n_new)  # (T,)
        positions = np.cumsum(np.asarray(attention_mask, dtype=np.int64), axis=-1) - 1
        return np.maximum(positions, 0)[:, -n_new:]  # (B, T)

    def forward(
        self,
        idx: np.ndarray,
        targets: np.ndarray | None = None,
        *,
        kv_cache: KVCache | None = None,
        attention_mask: np.ndarray | None = None,
        last_only: bool = False,
        label_smoothing: float = 0.0,
    ) -> tuple[np.ndarray, float | None, ForwardCache]:
        """idx: (B, T) token ids -> (logits (B, T, V), loss or None, cache for backward).

        ``targets`` (B, T): next-token ids, -1 to ignore (seed 000 §7), with optional label
        smoothing (seed 002 §12.2). ``kv_cache``: a :class:`KVCache`; idx then holds only the
        new tokens. ``attention_mask`` (B, cache length + T): 1 for real tokens, 0 for left
        padding. ``last_only`` keeps only the last position's logits (generation)."""
        config = self.config
        idx = np.asarray(idx)
        if idx.ndim != 2 or not np.issubdtype(idx.dtype, np.integer):
            raise ConfigError(f"idx must be a (B, T) array of token ids, got shape {idx.shape}.")
        B, T = idx.shape
        if 0 in idx.shape:  # as the torch engine's check_token_ids
            raise SamplingError(
                f"the token ids are empty (shape {idx.shape}): give at least one token."
            )
        offset = kv_cache.length if kv_cache is not None else 0
        if offset + T > config.block_size:
            raise ConfigError(
                f"sequence of {offset + T} tokens is longer than the context of "
                f"{config.block_size} (block_size)."
            )
        if attention_mask is not None and np.shape(attention_mask) != (B, offset + T):
            raise ConfigError(
                f"attention_mask must have shape {(B, offset + T)}, got {np.shape(attention_mask)}."
            )
        if attention_mask is not None and not np.isin(attention_mask, (0, 1)).all():
            raise SamplingError(  # as the torch engine's check_attention_mask
                "the attention mask must hold only 1 (a real token) and 0 (padding)."
            )
        dropout_p = config.dropout if self.training else 0.0
        positions = self.positions_for(T, offset, attention_mask)  # (T,) or (B, T)
        x, idx_cache = embedding_forward(idx, self.params["transformer.wte.weight"])  # E[idx]
        position_cache = None
        if config.positions == "learned":
            pos_emb, position_cache = embedding_forward(
                positions, self.params["transformer.wpe.weight"]
            )
            x = x + pos_emb  # + P[positions]
        elif config.positions == "sinusoidal":
            x = x + self.position_table[positions]
        x, dropout_cache = dropout_forward(x, dropout_p, self.rng)
        smear_cache = None
        if config.smear:  # X_0[t] + g_t X_0[t-1]
            previous = kv_cache.previous_embedding if kv_cache is not None else None
            if kv_cache is not None:
                kv_cache.previous_embedding = x[:, -1].copy()
            x, _, smear_cache = smear_forward(
                x,
                self.params["transformer.smear.gate"],
                self.params["transformer.smear.gain"],
                offset,
                previous,
                attention_mask,
            )
        rope = None
        if config.positions == "rotary":
            cos, sin = self.rope_cos[positions], self.rope_sin[positions]  # (..., T, hs/2)
            rope = (cos[:, None], sin[:, None]) if positions.ndim == 2 else (cos, sin)
        key_padding = None if attention_mask is None else np.asarray(attention_mask, dtype=bool)
        values, value_cache = None, None
        if config.value_embeddings:  # E_v[tokens], read by every layer's attention
            values, value_cache = embedding_forward(idx, self.params["transformer.wve.weight"])
        block_caches, skip_inputs, x0 = [], [] if config.embedding_skip else None, x
        for i in range(config.n_layer):
            if skip_inputs is not None:  # λ_l X_{l-1} + μ_l X_0
                skip_inputs.append(x)
                gain, skip = self.params[f"transformer.h.{i}.x0_gains"]
                x = gain * x + skip * x0
            x, block_cache = block_forward(
                x,
                self.params,
                f"transformer.h.{i}",
                config,
                dropout_p,
                self.rng,
                rope=rope,
                key_padding=key_padding,
                offset=offset,
                layer_cache=kv_cache.layers[i] if kv_cache is not None else None,
                value_embedding=values,
            )
            block_caches.append(block_cache)
        if kv_cache is not None:
            kv_cache.length += T
        final_norm_cache = None
        if config.block_order == "pre":
            x, final_norm_cache = norm_forward(x, self.params, "transformer.ln_f", config)
        cut = last_only and targets is None
        if cut:
            x = x[:, -1:, :]  # only the next token's distribution is needed
        logits, head_cache = linear_forward(x, self.head_weight)  # (B, T, V)
        softcap_cache = None
        if config.logit_softcap is not None:
            logits, softcap_cache = softcap_forward(logits, config.logit_softcap)
        loss, loss_cache, mtp_cache = None, None, None
        if targets is not None:
            loss, loss_cache = cross_entropy_forward(logits, targets, -1, label_smoothing)
            if config.multi_token and self.training and T > 1:
                mtp_loss, mtp_cache = self.token_after_next_forward(
                    x[:, :-1], np.asarray(targets)[:, 1:], label_smoothing
                )
                loss += config.mtp_weight * mtp_loss
        cache = ForwardCache(
            idx_cache,
            value_cache,
            positions,
            position_cache,
            dropout_cache,
            skip_inputs,
            block_caches,
            final_norm_cache,
            head_cache,
            softcap_cache,
            loss_cache,
            mtp_cache,
            differentiable=kv_cache is None and not cut,
            smear_cache=smear_cache,
        )
        return logits, loss, cache

    __call__ = forward

    def token_after_next_forward(
        self, hidden: np.ndarray, targets: np.ndarray, label_smoothing: float
    ) -> tuple[float, tuple]:
        """Multi-token prediction's second loss: the mean cross-entropy of
        z' = (h + h W_mtp^T) W_head^T (soft-capped as the logits are) at the token after next.
        hidden: h_1..h_{T-1} (B, T-1, d); targets: x_3..x_{T+1} (B, T-1). 0 when every target
        is ignored. Returns (loss, cache)."""
        shift, proj_cache = linear_forward(hidden, self.params["mtp_proj.weight"])  # h W^T
        logits, head_cache = linear_forward(hidden + shift, self.head_weight)  # (B, T-1, V)
        softcap_cache = None
        if self.config.logit_softcap is not None:
            logits, softcap_cache = softcap_forward(logits, self.config.logit_softcap)
        loss, loss_cache = cross_entropy_forward(logits, targets, -1, label_smoothing)
        counted = loss_cache[3] > 0
        return (loss if counted else 0.0), (proj_cache, head_cache, softcap_cache, loss_cache)

    def token_after_next_backward(
        self, cache: tuple, weight: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gradients of w · (the second loss) (:meth:`token_after_next_forward` in reverse):
        at the hidden states (B, T-1, d), the head, and W_mtp. With a = h + h W_mtp^T:
        dh = da + da W_mtp, dW_mtp = da^T h (the residual and the product, linear.py)."""
        proj_cache, head_cache, softcap_cache, loss_cache = cache
        dlogits = cross_entropy_backward(loss_cache, weight)
        if softcap_cache is not None:
            dlogits = softcap_backward(dlogits, softcap_cache)
        dahead, dhead, _ = linear_backward(dlogits, head_cache)
        dhidden, dproj, _ = linear_backward(dahead, proj_cache)
        return dahead + dhidden, dhead, dproj

    @property
    def head_weight(self) -> np.ndarray:
        """The output projection: the token table itself when tied (seed 002 §10.2)."""
        name = "transformer.wte.weight" if self.config.tie_embeddings else "lm_head.weight"
        return self.params[name]

    # ------------------------------------------------------------------ backward
    def backward(self, cache: ForwardCache, dlogits: np.ndarray | None = None) -> dict:
        """Gradients of every parameter, by name, from a forward pass's cache: of the loss
        (when the forward had targets) or of Σ dlogits ⊙ logits for a given ``dlogits``.

        The steps of ``forward`` in reverse: loss (softmax - one-hot), soft-cap, head (and the
        multi-token head's loss, when the forward computed it and no ``dlogits`` is given),
        final norm, blocks L..1, dropout, embeddings. A tied token table collects the gradient
        of both its uses, as the lookup and as the head (seed 002 §10.2)."""
        config = self.config
        if not isinstance(cache, ForwardCache):
            raise ConfigError(
                f"backward takes the cache a forward pass returned, not {type(cache).__name__}."
            )
        if not cache.differentiable:
            raise ConfigError(
                "backward needs a forward pass over the whole sequence, without a KV cache "
                "or last_only."
            )
        given_dlogits = dlogits
        if dlogits is None:
            if cache.loss_cache is None:
                raise ConfigError("backward needs a forward pass with targets, or dlogits.")
            dlogits = cross_entropy_backward(cache.loss_cache)
        grads: dict[str, np.ndarray] = {}
        if cache.softcap_cache is not None:
            dlogits = softcap_backward(dlogits, cache.softcap_cache)
        dx, dhead, _ = linear_backward(dlogits, cache.head_cache)
        if cache.mtp_cache is not None and given_dlogits is None:
            dhidden, dhead_ahead, grads["mtp_proj.weight"] = self.token_after_next_backward(
                cache.mtp_cache, config.mtp_weight
            )
            dx[:, :-1] += dhidden
            dhead += dhead_ahead
        elif config.multi_token:  # no second loss in this forward: W_mtp is not used
            grads["mtp_proj.weight"] = np.zeros_like(self.params["mtp_proj.weight"])
        if config.block_order == "pre":
            dx = norm_backward(dx, cache.final_norm_cache, grads, "transformer.ln_f", config)
        dx0 = 0.0  # the embedding skip's gradient at X_0, from every layer
        for i in reversed(range(config.n_layer)):
            dx = block_backward(dx, cache.block_caches[i], grads, f"transformer.h.{i}", config)
            if cache.skip_inputs is not None:  # y = λ x + μ x_0: dλ = Σ dy x, dμ = Σ dy x_0
                name, x0 = f"transformer.h.{i}.x0_gains", cache.skip_inputs[0]  # layer 0 reads X_0
                gain, skip = self.params[name]
                previous = cache.skip_inputs[i]
                grads[name] = np.array([(dx * previous).sum(), (dx * x0).sum()], dtype=dx.dtype)
                dx0 = dx0 + skip * dx
                dx = gain * dx
        if config.value_embeddings:  # every layer's gradient at E_v[tokens], into the table
            dvalues = sum(grads.pop(f"transformer.h.{i}.attn{VALUE_EMBEDDING_GRAD}")
                          for i in range(config.n_layer))  # fmt: skip
            grads["transformer.wve.weight"] = embedding_backward(dvalues, cache.value_cache)
        dx = dx + dx0
        if cache.smear_cache is not None:
            dx, dweight, dgain = smear_backward(dx, cache.smear_cache)
            grads["transformer.smear.gate"] = dweight
            grads["transformer.smear.gain"] = dgain
        dx = dropout_backward(dx, cache.dropout_cache)
        dwte = embedding_backward(dx, cache.idx_cache)
        if config.positions == "learned":
            dpos = dx.sum(axis=0) if cache.positions.ndim == 1 else dx  # shared by the batch
            grads["transformer.wpe.weight"] = embedding_backward(dpos, cache.position_cache)
        if config.tie_embeddings:
            dwte += dhead
        else:
            grads["lm_head.weight"] = dhead
        grads["transformer.wte.weight"] = dwte
        return {name: grads[name] for name in self.params}

    # ------------------------------------------------------------------ generation
    def generate(self, idx: np.ndarray, max_new_tokens: int, **sampling) -> np.ndarray:
        """Continue ``idx`` (B, T) by up to ``max_new_tokens`` tokens with the KV cache; see
        :func:`light_llm.reference.sampling.generate` for the options."""
        from light_llm.reference.sampling import generate

        return generate(self, idx, max_new_tokens, **sampling)
