"""Vocabulary size of a Megatron-LM recipe: ``--vocab-size``, a local tokenizer file, or a table of
the public tokenizers recipes name.

Megatron-LM pads the tokenizer's size to a multiple of ``--make-vocab-size-divisible-by`` x TP
(``megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding``); the plan keeps the unpadded
size and :meth:`~primus_launch.plan.ModelArch.padded_vocab_size` pads it the same way.

The table gives, per model family, the ``vocab_size`` of the published Hugging Face ``config.json``
(the embedding rows of the checkpoint).  Megatron's ``HuggingFaceTokenizer.vocab_size`` is
``len(tokenizer)``, which for some families is a little smaller (Qwen: 151,669 vs 151,936; DeepSeek-V3:
about 128.8k vs 129,280); the recipes that train those checkpoints pad up to the checkpoint's rows
(``--make-vocab-size-divisible-by 1187`` / ``3232`` in Megatron-LM ``examples/moe_recipes``), which is
what the table's figure is.  Matching is on the Hugging Face id or path (``unsloth/DeepSeek-V3``,
``Qwen/Qwen3-235B-A22B``, ``/models/Llama-3.1-8B``), case-insensitively.  Nothing is downloaded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

# (regex on the lower-cased id or path, vocab_size, source); the first match wins
PUBLIC_TOKENIZERS: tuple[tuple[str, int, str], ...] = (
    (r"deepseek-(v3|r1|v3\.1|v3-base|v3-0324|prover-v2)", 129280, "deepseek-ai/DeepSeek-V3 config.json vocab_size"),
    (r"deepseek-v2", 102400, "deepseek-ai/DeepSeek-V2 (and -Lite) config.json vocab_size"),
    (r"moonlight|kimi-k2", 163840, "moonshotai/Kimi-K2-Instruct config.json vocab_size"),
    (r"gpt-oss|o200k_harmony", 201088, "openai/gpt-oss-120b config.json vocab_size (o200k_harmony)"),
    (r"qwen3", 151936, "Qwen/Qwen3-235B-A22B (and every Qwen3 size) config.json vocab_size"),
    # Qwen1.5: the Qwen2 tokenizer's 151,643 plus the rows Pai-Megatron-Patch's scripts add to reach the checkpoint's
    # embedding (a098ca5 examples/qwen1_5/run_pretrain_mcore_qwen.sh: "EXTRA_VOCAB_SIZE ... 293 for models smaller
    # than 14b, 421 for the others"); the MoE-A2.7B checkpoint is left out (not stated there)
    (r"qwen1[._]5[-_](0\.5b|1\.8b|4b|7b)", 151936, "Qwen/Qwen1.5-0.5B .. 7B: 151643 + 293 (Pai-Megatron-Patch "
                                                     "a098ca5 examples/qwen1_5: EXTRA_VOCAB_SIZE 293 below 14B)"),
    (r"qwen1[._]5[-_](14b|32b|72b|110b)", 152064, "Qwen/Qwen1.5-14B and larger: 151643 + 421 (Pai-Megatron-Patch "
                                                  "a098ca5 examples/qwen1_5: EXTRA_VOCAB_SIZE 421 from 14B)"),
    (r"qwen2\.5-(0\.5b|1\.5b|3b)", 151936, "Qwen/Qwen2.5-0.5B config.json vocab_size"),
    (r"qwen2\.5", 152064, "Qwen/Qwen2.5-7B (7B and larger) config.json vocab_size"),
    (r"qwen2-(0\.5b|1\.5b|57b)", 151936, "Qwen/Qwen2-1.5B config.json vocab_size"),
    (r"qwen2-", 152064, "Qwen/Qwen2-7B (7B, 72B) config.json vocab_size"),
    (r"llama-4|llama4", 202048, "meta-llama/Llama-4-Scout-17B-16E config.json vocab_size"),
    (r"llama-?3|llama3", 128256, "meta-llama/Llama-3.1-8B (every Llama 3.x) config.json vocab_size"),
    (r"llama-?2|llama2", 32000, "meta-llama/Llama-2-7b-hf config.json vocab_size"),
    (r"mixtral-8x22b|mistral-7b-v0\.3|mistral-large", 32768, "mistralai/Mixtral-8x22B-v0.1 config.json vocab_size"),
    (r"mistral-nemo", 131072, "mistralai/Mistral-Nemo-Base-2407 config.json vocab_size"),
    (r"mixtral-8x7b|mistral-7b", 32000, "mistralai/Mixtral-8x7B-v0.1 config.json vocab_size"),
    (r"nemotron_2_256k|nemotron-4", 256000, "nvidia/Nemotron-4-340B-Base config.json vocab_size (nemotron_2_256k)"),
    (r"(^|/)gpt2($|[-/])|openai-community/gpt2", 50257, "openai-community/gpt2 config.json vocab_size"),
    (r"(^|/)glm-4-9b|(^|/)glm-4\.5", 151552, "THUDM/glm-4-9b config.json padded_vocab_size (zai-org/GLM-4.5 and "
                                              "-Air vocab_size the same)"),
    (r"starcoder2", 49152, "bigcode/starcoder2-15b (and -3b / -7b, bigcode/starcoder2-tokenizer) config.json vocab_size"),
    (r"(^|/)falcon-(7b|40b|180b)", 65024, "tiiuae/falcon-7b (and -40b / -180B) config.json vocab_size"),
    (r"(^|/)chatglm[23]-6b", 65024, "THUDM/chatglm2-6b (and chatglm3-6b) config.json padded_vocab_size"),
    (r"minimax-m2", 200064, "MiniMaxAI/MiniMax-M2 config.json vocab_size (M2.5 / M2.7: the same MiniMaxM2ForCausalLM)"),
)


# Pai-Megatron-Patch (alibaba/Pai-Megatron-Patch ``megatron_patch/tokenizer/__init__.py`` ``build_tokenizer``,
# a098ca5): ``--patch-tokenizer-type T`` loads the Hugging Face tokenizer from ``--load`` and sets
# ``args.padded_vocab_size`` itself -- no ``_vocab_size_with_padding`` -- to the tokenizer's base size plus
# ``--extra-vocab-size`` (``--padded-vocab-size``, when given, wins: Megatron's own flag, read before this).
# Base sizes where the type names one tokenizer: Qwen2/2.5/QwQ/Qwen3/Qwen2-VL ``len(tokenizer.encoder)`` 151,643
# (the scripts' own comment "151643 + 293 = 151936"), Llama 3.x ``vocab_size`` 128,000 (the base BPE without its
# 256 reserved special tokens), Llama 2 ``vocab_size`` 32,000.  Types shared by checkpoints of different sizes
# (DeepSeekV2Tokenizer: DeepSeek-V2 / V3 / Moonlight; MixtralTokenizer / MistralTokenizer: 32,000 / 32,768) take
# the checkpoint's ``config.json`` rows from ``--load`` (a local directory, or the public table above by name),
# which the scripts' ``--extra-vocab-size`` pads to.
PAI_TOKENIZER_BASE: dict[str, int] = {
    "Qwen2Tokenizer": 151643, "Qwen2VLTokenizer": 151643, "Qwen3Tokenizer": 151643,
    "LLama3Tokenizer": 128000, "LLama2Tokenizer": 32000,
}
# types whose size is fixed in build_tokenizer (args.padded_vocab_size = N)
PAI_TOKENIZER_FIXED: dict[str, int] = {
    "BloomTokenizerFromHF": 250880, "ChatGLMTokenizerFromHF": 130528, "GLM10BZHTokenizerFromHF": 50048,
    "IcetkGLM130BTokenizer": 150528, "StarcoderTokenizerFromHF": 49152,
}
PAI_SOURCE = "Pai-Megatron-Patch megatron_patch/tokenizer build_tokenizer (a098ca5)"

# Megatron-LM forks whose own ``--tokenizer-type`` sets ``args.padded_vocab_size = tokenizer.vocab_size +
# args.extra_vocab_size`` (no ``_vocab_size_with_padding``): ROCm/Megatron-LM branch renwuli/disable_te_qwen1.5
# ``megatron/tokenizer/tokenizer.py`` ``build_tokenizer`` ``QWen2Tokenizer`` (``AutoTokenizer(use_fast=False)``:
# the Qwen2 tokenizer's ``vocab_size``, 151,643 for every Qwen1.5 / Qwen2 size, the base Pai's table gives too)
FORK_TOKENIZER_BASE: dict[str, tuple[int, str]] = {
    "QWen2Tokenizer": (151643, "ROCm/Megatron-LM renwuli/disable_te_qwen1.5 megatron/tokenizer/tokenizer.py "
                               "build_tokenizer: QWen2Tokenizer vocab_size 151643"),
}

# a fork's ``--tokenizer-type`` whose size is fixed by its code, padded by Megatron as usual
# (``_vocab_size_with_padding``): ROCm/Megatron-LM branch renwuli/disable_te_qwen ``megatron/tokenizer/
# qwen_tokenizer.py`` ``QWenTokenizer`` (Qwen 1.0's ``qwen.tiktoken``): ``vocab_size`` = tiktoken ``n_vocab`` =
# the BPE ranks (``SPECIAL_START_ID = 151643``) + 3 special tokens + 205 ``<|extra_i|>`` = 151,851
FORK_TOKENIZER_FIXED: dict[str, tuple[int, str]] = {
    "QWenTokenizer": (151851, "ROCm/Megatron-LM renwuli/disable_te_qwen megatron/tokenizer/qwen_tokenizer.py "
                              "QWenTokenizer: 151643 BPE ranks + 3 + 205 special tokens"),
}


def fork_vocab(tokenizer_type: object, extra: object) -> tuple[int, str] | None:
    """(vocabulary size, source) of a fork's ``--tokenizer-type`` that adds ``--extra-vocab-size`` to its base
    itself (:data:`FORK_TOKENIZER_BASE`), unpadded; None for any other type or an extra that is not an integer."""
    hit = FORK_TOKENIZER_BASE.get(str(tokenizer_type))
    try:
        more = int(str(extra)) if extra not in (None, "", True) else 0
    except ValueError:
        return None
    if hit is None:
        return None
    return hit[0] + more, f"{hit[1]} + --extra-vocab-size {more}"


def pai_vocab(tokenizer_type: str, extra: object, load: str | None) -> tuple[int, str] | None:
    """(vocabulary size, source) of a Pai-Megatron-Patch ``--patch-tokenizer-type`` run, unpadded (Pai
    sets ``padded_vocab_size`` itself), or None when the type and ``--load`` do not tell it."""
    name = str(tokenizer_type).strip("'\"")
    if name in PAI_TOKENIZER_FIXED:
        return PAI_TOKENIZER_FIXED[name], f"{PAI_SOURCE}: {name} is {PAI_TOKENIZER_FIXED[name]}"
    try:
        more = int(str(extra)) if extra not in (None, "", True) else 0
    except ValueError:
        return None
    if name in PAI_TOKENIZER_BASE:
        base = PAI_TOKENIZER_BASE[name]
        return base + more, f"{PAI_SOURCE}: {name} base {base} + --extra-vocab-size {more}"
    hit = local_vocab(load) or table_vocab(load)
    if hit:
        return hit[0], f"{hit[1]} (--load {load}: {PAI_SOURCE} loads {name} from the checkpoint)"
    return None


def table_vocab(name: str | None) -> tuple[int, str] | None:
    """(vocab_size, source) of a public tokenizer named by ``name``, or None."""
    if not name:
        return None
    key = name.strip().strip("'\"").rstrip("/").lower()
    for pattern, size, source in PUBLIC_TOKENIZERS:
        if re.search(pattern, key):
            return size, source
    return None


def local_vocab(path: str | None) -> tuple[int, str] | None:
    """(vocab_size, source) read from a tokenizer that exists on this machine, or None.

    A directory: its ``config.json`` ``vocab_size`` (the checkpoint's rows), else its
    ``tokenizer.json``; a ``tokenizer.json``: the highest token id + 1 over ``model.vocab`` and
    ``added_tokens`` (``len(tokenizer)`` of Hugging Face tokenizers); a ``vocab.json`` (GPT-2 BPE):
    its entries; a plain vocab ``.txt`` (BERT WordPiece): its lines.
    """
    if not path:
        return None
    p = Path(path).expanduser()
    from primus_launch.errors import UserError
    from primus_launch.plan import PlanError

    try:
        if p.is_dir():
            cfg = p / "config.json"
            if cfg.is_file():
                size = _json(cfg).get("vocab_size")
                if _token_count(size) and size > 0:  # `"vocab_size": true` is no size (it read as 1)
                    return _bounded(size, f"{cfg} vocab_size")
            tok = p / "tokenizer.json"
            return _tokenizer_json(tok) if tok.is_file() else None
        if not p.is_file():
            return None
        if p.name.endswith(".json"):
            data = _json(p)
            if isinstance(data, dict) and "model" in data:
                return _tokenizer_json(p)
            if isinstance(data, dict) and data:
                return _bounded(len(data), f"{p} entries")
            return None
        if p.suffix == ".txt":
            return _bounded(sum(1 for ln in _text(p).splitlines() if ln.strip()), f"{p} lines")
    except PlanError:  # a size read and refused by the file's name (before ValueError, its base, takes it)
        raise
    except (OSError, ValueError, UnicodeDecodeError, RecursionError, AttributeError, TypeError, UserError):
        return None  # not a tokenizer this reader understands: the vocabulary comes from elsewhere (a note says)
    return None


TOKENIZER_MAX_BYTES = 64 * 1024 * 1024   # tokenizer.json files are up to ~35 MB (Gemma 3)


def _text(p: Path) -> str:
    from primus_launch.inputs import read_text

    return read_text(p, "tokenizer", TOKENIZER_MAX_BYTES)


def _json(p: Path):
    return json.loads(_text(p))


def _token_count(v: object) -> bool:
    """Whether ``v`` is a JSON integer (not ``true`` / ``false``, which Python's ``int`` also holds)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _bounded(size: int, source: str) -> tuple[int, str]:
    """(size, source) of a vocabulary read from a local file, refused by the file's name when past the plan's
    bound (``model.vocab_size``: the refusal named the plan's field, never the file the number came from)."""
    from primus_launch.plan import PlanError
    from primus_launch.plan.sections import LIMITS

    limit = LIMITS["model.vocab_size"]
    if size > limit:
        raise PlanError(source, size, f"a vocabulary of at most {limit:,} tokens (the projection's bound; the largest "
                                      "published tokenizers hold ~262k): not a tokenizer file of a real model")
    return size, source


def _tokenizer_json(p: Path) -> tuple[int, str] | None:
    """The highest token id + 1 of a Hugging Face ``tokenizer.json``: ``model.vocab`` a mapping token -> id
    (BPE, WordPiece) or a list of ``[piece, score]`` (Unigram), plus ``added_tokens``; None where the file is not
    of that shape (a ``vocab`` string counted its characters, ``true`` ids counted as 1, negative ids as sizes)."""
    data = _json(p)
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if vocab is not None and not isinstance(vocab, (dict, list)):
        return None
    ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab or [])))
    ids += [t.get("id", -1) for t in data.get("added_tokens") or [] if isinstance(t, dict)]
    ids = [i for i in ids if _token_count(i) and i >= 0]
    return _bounded(max(ids) + 1, f"{p} (highest token id + 1)") if ids else None
