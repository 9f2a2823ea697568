"""run: execute the notebooks with papermill, record their metrics, check them against references."""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "harness": [
            "NotebookResult",
            "RunReport",
            "list_notebooks",
            "run_notebooks",
            "record_metrics",
            "record_claims",
            "load_claims",
            "save_figure",
            "find_run",
            "load_metrics",
        ],
        "regression": [
            "Tolerance",
            "CheckResult",
            "read_reference",
            "read_references",
            "compare_metrics",
            "check_run",
            "update_references",
        ],
    },
)
