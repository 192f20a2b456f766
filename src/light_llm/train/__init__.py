"""Training: AdamW (or Muon with AdamW, ``muon``) with warmup + cosine and global-norm clipping
(``optim``), and the trainer (mixed precision, gradient accumulation, activation checkpointing,
DDP, exact resume).

    from light_llm.train import TrainConfig, train
    result = train(TrainConfig(max_iters=500, out="out-demo"))
"""

from light_llm.train.config import TrainConfig
from light_llm.train.optim import clip_grad_norm, configure_adamw, learning_rate
from light_llm.train.trainer import TrainResult, train

__all__ = [
    "TrainConfig",
    "TrainResult",
    "clip_grad_norm",
    "configure_adamw",
    "learning_rate",
    "train",
]
