"""present: show results — interactive views, slide decks (``slides``; fitted to slides by ``slide_fit``, on
``reveal``'s offline pages, with numbers and paths ``readable``), the findings lecture (``lecture``: one deck of a
run's claims and figures for a talk, its topics in ``lecture_outline``, what it reads of a run ``lecture_run``, its
slides ``lecture_slides``), one HTML report per run, the per-head atlas of a
run (``atlas``: its table, its columns ``atlas_columns``, its offline page ``atlas_page``, its JupyterLab
widget ``atlas_view`` and its pattern images ``atlas_stores``), the pattern-type labelling tool (``labelling``), the third-party JavaScript they
inline so that they work offline (``assets``), and the audit of the pages they make (``page_audit``; decks printed and pages audited in the Chromium of
``browser``)."""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "views": [
            "AttentionView",
            "head_view",
            "model_view",
            "AttentionExplorer",
            "explorer",
            "NeuronView",
            "neuron_view",
        ],
        "mixing_maps": ["MixingView", "mixing_view"],
        "static_view": ["static_html", "number_the_grid"],
        "slides": ["notebook_to_slides", "run_slides", "slide_figures", "deck_to_pdf"],
        "lecture": ["build_lecture"],
        "lecture_outline": ["LECTURE", "Topic"],
        "report": ["build_report"],
        "page_audit": ["Defect", "audit_page", "audit_files"],
        "atlas": ["Atlas", "build_atlas", "read_atlas", "ColumnSpec", "COLUMNS", "Filter", "parse_filter"],
        "atlas_page": ["render_atlas_page"],
        "atlas_view": ["atlas_widget", "head_colours"],
        "findings": ["record_findings", "save_findings", "load_findings", "summary_table", "claims_tables"],
        "generated": ["read_block", "write_block"],
        "pattern_figures": ["plot_type_shares_by_layer", "plot_type_examples"],
        "labelling": [
            "MapRecord",
            "labelled_set_records",
            "sample_records",
            "LabelFile",
            "LabelSession",
            "agreement",
            "label_maps",
            "draw_map",
            "contact_sheet",
        ],
    },
)
