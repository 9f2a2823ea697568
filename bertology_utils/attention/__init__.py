"""attention: tokenize words, run the model, convert token attention to words, store it.

``alignment`` (words -> tokens and back), ``extraction`` (batched forward passes),
``word_attention`` (Clark et al.'s token -> word rule), ``store`` (the on-disk, resumable,
shardable attention store) and ``shard`` (one shard of it: its arrays and its one writer). Maps from other methods (context mixing...) come in through a
``MapSource`` and share the conversion, the store and its resumability. Names are imported on
first use (torch, zarr).
"""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "alignment": ["WORD", "LEADING_SPECIAL", "SEPARATOR", "AlignedItem", "align", "item_texts"],
        "extraction": [
            "TOO_LONG_POLICIES",
            "MapSource",
            "iter_attention",
            "attention_for",
            "extract_attention",
            "extract_cached",
            "cached_store_path",
            "shard_range",
        ],
        "word_attention": ["FROM_RULES", "ItemAttention", "SkippedItem", "WordConversion"],
        "store": ["AttentionStore", "merge_stores"],
        "distributed": ["extract_on_cluster", "map_store", "shard_plan"],
    },
)
