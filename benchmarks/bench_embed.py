"""Sentence embeddings with the packaged MiniLM: light-llm against sentence-transformers.

Both encode the same 64 Shakespeare lines of about 20 WordPiece tokens on the CPU, in the
same process, with the same batch size and thread count, alternating runs so that machine
noise falls on both. Prints the median time of each and the ratio
sentence-transformers / light-llm (above 1.0: light-llm is faster); also checks that the two
agree (lowest cosine similarity).

    PYTHONPATH=src python benchmarks/bench_embed.py [--repeats 20] [--batch-size 32] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from light_llm.checkpoints.hf_bert import load_hf_bert, packaged_minilm_path  # noqa: E402
from light_llm.models.bert import embed_sentences  # noqa: E402
from light_llm.shakespeare import shakespeare_text  # noqa: E402
from light_llm.tokenizers import BertTokenizer  # noqa: E402


def shakespeare_sentences(tokenizer: BertTokenizer, count: int, tokens: int) -> list[str]:
    """The first ``count`` lines of the corpus with ``tokens`` ± 2 WordPiece tokens."""
    picked = []
    for line in shakespeare_text().splitlines():
        if line and not line.endswith(":") and abs(len(tokenizer.encode(line)) - tokens) <= 2:
            picked.append(line)
            if len(picked) == count:
                return picked
    raise SystemExit(f"the corpus has fewer than {count} lines of about {tokens} tokens")


def median_seconds(run, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=20, help="WordPiece tokens per sentence")
    parser.add_argument("--batch-size", type=int, default=32, help="sentence-transformers' default")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from sentence_transformers import SentenceTransformer

    folder = packaged_minilm_path()
    tokenizer = BertTokenizer.packaged()
    sentences = shakespeare_sentences(tokenizer, args.sentences, args.tokens)
    ours = load_hf_bert(folder)
    reference = SentenceTransformer(str(folder), device="cpu")

    def run_ours():
        return embed_sentences(ours, tokenizer, sentences, batch_size=args.batch_size)

    def run_reference():
        return reference.encode(sentences, batch_size=args.batch_size, convert_to_tensor=True)

    agreement = torch.nn.functional.cosine_similarity(run_ours(), run_reference().cpu()).min()
    ours_times, reference_times = [], []
    for _ in range(args.repeats):  # alternate, one run each, so drift hits both alike
        ours_times += median_seconds(run_ours, 1)
        reference_times += median_seconds(run_reference, 1)
    ours_s, reference_s = statistics.median(ours_times), statistics.median(reference_times)
    mean_tokens = sum(len(tokenizer.encode(s)) + 2 for s in sentences) / len(sentences)
    print(
        f"{len(sentences)} sentences, {mean_tokens:.1f} tokens each with [CLS]/[SEP], "
        f"batch size {args.batch_size}, {torch.get_num_threads()} threads, "
        f"median of {args.repeats} runs"
    )
    print(f"light-llm             {ours_s * 1e3:8.2f} ms")
    print(f"sentence-transformers {reference_s * 1e3:8.2f} ms")
    print(f"ratio (sentence-transformers / light-llm): {reference_s / ours_s:.3f}  (target >= 1.0)")
    print(f"lowest cosine similarity between the two: {agreement:.7f}")


if __name__ == "__main__":
    main()
