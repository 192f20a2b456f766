"""Looking inside a GPT of either engine: one instrumented forward that records every activation
and accepts interventions (:mod:`instrumented`, and the NumPy engine's twin
``light_llm.reference.instrumented``), and the analyses built on it, each a function returning
NumPy arrays with its formula in its docstring:

    logit_lens, lens_over_text what each sublayer's residual would predict       lens.py
    direct_logit_attribution   a logit split into heads, MLPs and embeddings     attribution.py
    ablate_prompt, ablate_text, head_importance
                               what is lost when a part is removed               ablation.py
    activation_patching        which activations carry a difference of prompts   patching.py
    head_roles                 previous-token, first-token and induction heads   heads.py
    top_activations            the contexts that make an MLP unit fire           neurons.py
    surprise                   each token's loss and the model's top guess       surprise.py
"""

from light_llm.inspect.ablation import ablate_prompt, ablate_text, head_importance
from light_llm.inspect.attribution import direct_logit_attribution
from light_llm.inspect.heads import head_roles
from light_llm.inspect.inspector import Inspector
from light_llm.inspect.lens import lens_over_text, logit_lens
from light_llm.inspect.neurons import top_activations
from light_llm.inspect.patching import activation_patching
from light_llm.inspect.surprise import surprise
from light_llm.interventions import Patch

__all__ = [
    "Inspector",
    "Patch",
    "ablate_prompt",
    "ablate_text",
    "activation_patching",
    "direct_logit_attribution",
    "head_importance",
    "head_roles",
    "lens_over_text",
    "logit_lens",
    "surprise",
    "top_activations",
]
