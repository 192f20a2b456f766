"""Training: the PyTorch trainer (mixed precision, gradient accumulation, activation
checkpointing, DDP, exact resume) and the NumPy engine's loop, which read the same
:class:`TrainConfig` and return a :class:`TrainResult`; AdamW or Muon with AdamW
(``optim``, ``muon``) under a warmup + decay schedule (:mod:`light_llm.schedule`).

    from light_llm.train import TrainConfig, train
    result = train(TrainConfig(max_iters=500, out="out-demo"))

Importing this package needs no torch: the PyTorch trainer is loaded on first use of
``light_llm.train.train``.
"""

from light_llm.train.config import TrainConfig
from light_llm.train.result import TrainResult

__all__ = ["TrainConfig", "TrainResult", "train"]


def __getattr__(name: str):
    if name == "train":
        from light_llm.train.trainer import train

        return train
    raise AttributeError(f"module 'light_llm.train' has no attribute {name!r}")
