"""light-llm: the transformer, implemented from its mathematics, and made to really work.

Importing the package is cheap; the PyTorch model is loaded on first use of ``light_llm.GPT``.
"""

from light_llm.config import PRESETS, ModelConfig, preset
from light_llm.errors import LightLLMError

__version__ = "0.1.0"
__all__ = ["GPT", "PRESETS", "LightLLMError", "ModelConfig", "preset", "__version__"]


def __getattr__(name: str):
    if name == "GPT":
        from light_llm.models.gpt import GPT

        return GPT
    raise AttributeError(f"module 'light_llm' has no attribute {name!r}")
