"""core: what every layer stands on — settings, thread counts, errors, the version, heads, models and their
architectures, figures, files written whole or not at all (``files``), tie-aware maxima of attention rows
(``maxima``), the cache's shared machinery (entry names, locks, stored arrays), the C allocator's settings notebook
kernels start with (``allocator``), and Dask clusters (``cluster``, only with the optional ``[distributed]`` extra).

``bertology_utils.core.settings``, ``threads``, ``errors`` and the version import nothing heavy; the names
below from ``models``, ``architectures`` and ``figures`` (torch, transformers, matplotlib) are
imported on first use, so ``import bertology_utils.core`` stays fast.
"""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "_version": ["__version__", "library_versions", "machine_environment", "gpu_name"],
        "errors": [
            "BertologyError",
            "DataFormatError",
            "DataNotFoundError",
            "ModelNotAvailableError",
            "UnsupportedArchitectureError",
            "StoreError",
            "StoreMismatchError",
            "StoreCorruptError",
            "AssetMissingError",
        ],
        "heads": ["Head", "all_heads"],
        "cache": ["cache_lock", "busy_last", "cached_arrays", "cached_frames", "CacheWarning", "EntryBusy"],
        "models": [
            "LoadedModel",
            "load_model",
            "describe_model",
            "check_attentions",
            "random_init",
            "random_init_keeping_embeddings",
            "PRECISIONS",
            "PRECISION_CHOICES",
            "resolve_precision",
            "autocast",
            "frozen",
            "fast_fp32_products",
        ],
        "architectures": [
            "ArchSpec",
            "register_architecture",
            "registered_architectures",
            "arch_spec",
            "check_architecture",
            "self_attention_modules",
        ],
        "figures": [
            "plot_attention_map",
            "map_labels_that_fit",
            "plot_layer_head_grid",
            "plot_attention_lines",
            "plot_attention_thumbnails",
            "save_image",
        ],
        "figure_text": [
            "SLIDE_BOX",
            "MIN_TEXT_PX",
            "MAX_OVERLAP",
            "FigureText",
            "TextBox",
            "TextProblem",
            "text_boxes",
            "text_problems",
            "shown_width",
            "fit_for_slide",
            "fitted_for_slide",
            "keep_every_label",
            "read_png_text",
            "measured_png",
            "img_attribute",
            "register_inline",
        ],
        "maxima": ["STORAGE_DTYPE", "resolution", "tie_credit"],
        "determinism": ["derived_seed", "HostDropout", "host_dropout", "deterministic_algorithms"],
        "cluster": ["connect", "local_cluster", "parse_cluster"],
    },
)
