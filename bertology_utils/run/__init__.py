"""run: execute the notebooks with papermill, record their metrics, check them against references."""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "harness": ["NotebookResult", "RunReport", "RunInterrupted", "list_notebooks", "run_notebooks"],
        "record": ["record_metrics", "record_claims", "record_skipped", "StageTimes", "save_figure"],
        "results": ["results_dir", "INTERACTIVE_DIR", "find_run", "load_metrics", "load_claims"],
        "tasks": ["TunedTask", "task_budget", "fine_tune_task", "fine_tune_tasks", "fine_tune_seeds"],
        "sst2_classifiers": [
            "SeedObjective",
            "sst2_objectives",
            "objective_gradients",
            "objective_ablations",
            "sep_claims",
        ],
        "head_role_tasks": [
            "ClassifierHeads",
            "classifier_heads",
            "L0Pruning",
            "l0_pruning",
            "TaskShares",
            "special_token_shares",
            "ClaimInputs",
            "claim_inputs",
            "seeded_claim_inputs",
            "classifier_claims",
        ],
        "pruning_tasks": [
            "PruningClassifiers",
            "pruning_classifiers",
            "ablation_sweeps",
            "Importances",
            "head_importances",
            "Curves",
            "pruning_curves",
            "attention_changes",
            "seeded_pruning_inputs",
            "pruning_metrics",
        ],
        "regression": [
            "Tolerance",
            "CheckResult",
            "read_reference",
            "read_references",
            "compare_metrics",
            "check_run",
        ],
        "refresh": ["update_references"],
        "perturb": ["Perturbation", "standard_perturbations", "run_perturbed"],
    },
)
