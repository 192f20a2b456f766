"""Models built from light_llm.nn: the GPT decoder and the BERT-style encoder."""
