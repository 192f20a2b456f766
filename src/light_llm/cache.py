"""What runs share so that a new ``--out`` does not redo it: the tokenizer learned from a
corpus and the corpus encoded into ids, kept in a user cache folder.

    $LIGHT_LLM_CACHE, else $XDG_CACHE_HOME/light-llm, else ~/.cache/light-llm
        texts/<key>/          texts.json: texts converted from their sources (the default
                              corpus's plays from Markdown, light_llm.shakespeare)
        tokenizers/<key>/     a learned tokenizer's files (light_tokenizer.json, vocab.txt)
        corpus/<key>/         train.bin, val.bin, meta.json as :func:`light_llm.data.encode_corpus`
                              writes them into OUT/data

Each entry is keyed by a SHA-256 of everything it depends on (the text it was made from, the
tokenizer's settings or identity, the format), so a changed corpus or setting is a new entry,
never a stale one. Entries are written as a unit (a folder swapped in by renames, files by
:func:`light_llm.atomic.atomic_file`), so concurrent runs and a run killed mid-write leave
whole entries or none; a reader that finds a damaged one (the token files are checked against
their recorded digest) makes it afresh. The cache is an optimisation only: a cache that
cannot be read or written is passed by, silently.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_ENV = "LIGHT_LLM_CACHE"  # overrides the cache folder (the tests point it at tmp_path)
CACHE_VERSION = 1


def cache_root() -> Path | None:
    """The cache folder (module docstring); None when no home folder is known, or when
    LIGHT_LLM_CACHE is set to an empty string (caching off)."""
    override = os.environ.get(CACHE_ENV)
    if override is not None:
        return Path(override).expanduser() if override else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "light-llm"
    try:
        return Path.home() / ".cache" / "light-llm"
    except RuntimeError:
        return None


def entry_key(settings: dict[str, Any], text: str) -> str:
    """SHA-256 (hex) of ``settings`` (JSON, keys sorted), the cache's version and ``text``."""
    digest = hashlib.sha256()
    identity = {"cache_version": CACHE_VERSION, **settings}
    digest.update(json.dumps(identity, sort_keys=True).encode("utf-8"))
    digest.update(text.encode("utf-8", errors="surrogatepass"))
    return digest.hexdigest()


def entry(kind: str, key: str) -> Path | None:
    """The folder of the cache entry ``kind/key`` (which may not exist); None without a
    cache."""
    root = cache_root()
    return None if root is None else root / kind / key


# --------------------------------------------------------------------------- converted texts
TEXTS_FILE = "texts.json"


def texts_digest(texts: dict[str, str]) -> str:
    """SHA-256 (hex) of ``texts`` as JSON: what :func:`converted_texts` records beside them."""
    return hashlib.sha256(json.dumps(texts).encode("utf-8", errors="surrogatepass")).hexdigest()


def converted_texts(
    kind: str, sources: dict[str, str], convert: Callable[[str], str], converter: str
) -> dict[str, str]:
    """``{name: convert(source)}`` for each of ``sources``, from the cache when a run converted
    the same sources with the same ``converter`` (what identifies ``convert``: a digest of its
    code) before, else converted and cached, with the digest of the texts, which a reader
    checks (a damaged or altered entry is converted afresh and replaced). Converting the
    default corpus's plays from Markdown takes a second of every run's start
    (:mod:`light_llm.shakespeare`); reading them back, about a tenth."""
    folder = entry(kind, entry_key({"kind": kind, "converter": converter}, json.dumps(sources)))
    if folder is not None and folder.is_dir():
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            found = json.loads((folder / TEXTS_FILE).read_text(encoding="utf-8"))
            texts = found["texts"]
            if (
                list(texts) == list(sources)
                and all(isinstance(text, str) for text in texts.values())
                and found["sha256"] == texts_digest(texts)
            ):
                return texts
        shutil.rmtree(folder, ignore_errors=True)  # damaged: made afresh below
    texts = {name: convert(source) for name, source in sources.items()}
    if folder is not None:

        def write(staging: Path) -> None:
            record = {"sha256": texts_digest(texts), "texts": texts}
            (staging / TEXTS_FILE).write_text(json.dumps(record), encoding="utf-8")

        with contextlib.suppress(OSError):
            publish_folder(folder, write)
    return texts


# --------------------------------------------------------------------------- tokenizers
def learned_tokenizer(kind: str, text: str, vocab_size: int, at_most: bool):
    """:func:`light_llm.tokenizers.train_tokenizer` of these arguments, from the cache when a
    run learned it before (the same training text, kind, size), else learned and cached."""
    import tokenizers

    from light_llm.errors import LightLLMError
    from light_llm.tokenizers import load_tokenizer, train_tokenizer

    settings = {
        "kind": kind,
        "vocab_size": vocab_size,
        "at_most": at_most,
        "tokenizers": tokenizers.__version__,
    }
    folder = entry("tokenizers", entry_key(settings, text))
    if folder is not None and folder.is_dir():
        with contextlib.suppress(LightLLMError, OSError):
            return load_tokenizer(folder)
    tokenizer = train_tokenizer(kind, text, vocab_size, at_most=at_most)
    if folder is not None:
        with contextlib.suppress(LightLLMError, OSError):
            publish_folder(folder, tokenizer.save)
    return tokenizer


def publish_folder(folder: Path, write) -> None:
    """Make ``folder`` by ``write(staging)`` into a fresh sibling, renamed into place as one
    step; a folder another run put there first is kept (the same key, the same contents)."""
    import tempfile

    from light_llm.atomic import default_folder_mode, make_folder

    make_folder(folder.parent)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.new-"))
    try:
        os.chmod(staging, default_folder_mode())
        write(staging)
        os.replace(staging, folder)  # fails when another run's is there: theirs is kept
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# --------------------------------------------------------------------------- token ids
def copy_files(source: Path, target: Path, names: list[str]) -> None:
    """Put ``source/NAME`` at ``target/NAME`` for each of ``names``, in order, each as one
    step (a hard link where both are on one file system, else a copy); OSError when it
    cannot."""
    from light_llm.atomic import atomic_file, make_folder

    make_folder(target)
    for name in names:
        staged = target / f".{name}.{os.getpid()}.link.tmp"
        staged.unlink(missing_ok=True)
        try:
            os.link(source / name, staged)
        except OSError:
            with atomic_file(target / name) as out, open(source / name, "rb") as data:
                shutil.copyfileobj(data, out, 1 << 20)
            continue
        try:
            os.replace(staged, target / name)
        except OSError:
            staged.unlink(missing_ok=True)
            raise
