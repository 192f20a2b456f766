"""The typed exceptions of light-llm.

Every error a user can cause (bad input, a bad file, an impossible option) is raised as a
subclass of :class:`LightLLMError` whose message is one clear sentence. The CLI prints that
sentence on stderr and exits with code 2; nothing else escapes as a traceback.
"""


class LightLLMError(Exception):
    """Base class: a problem the user can fix, described in one sentence."""


class ConfigError(LightLLMError, ValueError):
    """A model or training configuration that cannot work (e.g. n_embd not divisible by n_head)."""


class CheckpointError(LightLLMError):
    """A checkpoint folder that is missing, corrupt, or does not match its config."""


class TokenizerError(LightLLMError, ValueError):
    """Text or ids a tokenizer cannot handle (e.g. a character outside a char vocabulary)."""


class DataError(LightLLMError):
    """A corpus that cannot be trained on: empty, binary, not UTF-8, or too short."""


class SamplingError(LightLLMError, ValueError):
    """Sampling options out of range (top_p outside (0, 1], top_k < 1, negative temperature)."""


class TrainingError(LightLLMError):
    """Training cannot go on (NaN loss, unwritable output folder, mismatched resume)."""


class OutputError(LightLLMError, OSError):
    """A place light-llm cannot or must not write to: a non-empty folder it did not write
    (saving there would delete the files), a path under a file, no permission, a full disk.
    An OSError too, so that every writer's handler of failed writes reports it."""


class InspectError(LightLLMError, ValueError):
    """A look inside a model that cannot be made as asked: a layer, head, position or neuron
    out of range, two prompts of different lengths to patch, a word that is not one token, an
    analysis that does not apply to the model (induction scores of an encoder)."""


def flag(setting: str) -> str:
    """The command-line flag of a setting, as messages name it: ``--max-iters`` for
    ``max_iters``."""
    return "--" + setting.replace("_", "-")


def reason(exc: BaseException) -> str:
    """Why an OSError happened, as the end of a sentence: the system's words ("No space left
    on device"), or the message of one of light-llm's own errors without its final period
    (the sentence that quotes it adds its own)."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text.rstrip(".")
