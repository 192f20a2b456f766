"""Interoperability with HuggingFace ``transformers`` checkpoint folders.

``hf_gpt2``: read and write GPT-2 folders (``config.json`` + ``model.safetensors``).
"""

from light_llm.interop.hf_gpt2 import config_from_hf, export_hf_gpt2, load_hf_gpt2

__all__ = ["config_from_hf", "export_hf_gpt2", "load_hf_gpt2"]
