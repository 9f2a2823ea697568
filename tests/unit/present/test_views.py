"""Offline bertviz views, the layer/head explorer and the query·key neuron view."""

import base64
import html
import json
import re
import warnings

import numpy as np
import pytest
import torch
from tiny_models import ARCHS

from bertology_utils.attention.extraction import attention_for, extract_attention
from bertology_utils.core import settings
from bertology_utils.core.errors import AssetMissingError, BertologyError
from bertology_utils.core.figure_text import (
    MIN_TEXT_PX,
    SLIDE_BOX,
    TEXT_KEY,
    FigureText,
    read_png_text,
    text_problems,
)
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, SentencePair, words_of
from bertology_utils.present import assets
from bertology_utils.present.views import AttentionView, explorer, head_view, model_view, neuron_view

SENTENCE = "The old sailor reads a heavy wooden box near the station."
PAIR = ("Hello world again.", "Where did you put the keys?")
LIBRARIES = ("require", "d3", "jquery")
needs_libraries = pytest.mark.skipif(
    not assets.have_assets(*LIBRARIES), reason="the npm libraries are not installed (make setup)"
)


@pytest.fixture(scope="module")
def loaded_models(tiny_model_dirs):
    return {arch: load_model(folder) for arch, folder in tiny_model_dirs.items()}


def _params(view: AttentionView) -> dict:
    """The parameters bertviz embeds in its script (attention, texts, root id)."""
    found = re.findall(r"const params = (\{.*\}); *$", view.html, flags=re.MULTILINE)
    assert len(found) == 1 and view.html.count(found[0][:200]) == 1  # one copy of the data
    return json.loads(found[0])


def _eager_attention(loaded, words_a, words_b=None) -> np.ndarray:
    """The model's own attention, (layers, heads, T, T), from a plain transformers forward pass."""
    args = (list(words_a),) if words_b is None else (list(words_a), list(words_b))
    inputs = loaded.tokenizer(*args, is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        outputs = loaded.model(**inputs, output_attentions=True)
    return torch.stack(outputs.attentions)[:, 0].numpy()


# --------------------------------------------------------------------------- bertviz views


@needs_libraries
@pytest.mark.parametrize("draw", [head_view, model_view])
def test_views_inline_the_libraries_and_load_nothing(loaded_models, draw):
    view = draw(SENTENCE, loaded_models["bert"])
    for name in LIBRARIES:
        text = assets.asset_text(name).replace("</script", "<\\/script")
        assert text[:2000] in view.html and text[-2000:] in view.html, f"{name} is not inlined"
    for remote in ("cdnjs", "unpkg", "jsdelivr", "<script src"):
        assert remote not in view.html
    assert not re.search(r"require\.config\(\{\s*paths", view.html)  # bertviz's CDN paths are gone
    assert view.html.startswith(f'<div id="{view.element_id}" class="bertology-view bertology-')
    assert _params(view)["root_div_id"] == f"{view.element_id}-bertviz"


@needs_libraries
def test_views_are_deterministic_and_named_by_content(loaded_models):
    bert = loaded_models["bert"]
    first, again = head_view(SENTENCE, bert), head_view(SENTENCE, bert)
    assert first.html == again.html
    other = head_view("A small dog.", bert)
    assert other.element_id != first.element_id
    assert head_view(SENTENCE, bert, element_id="tour-head").element_id == "tour-head"
    assert model_view(SENTENCE, bert).element_id.startswith("bertology-model-view-")


@needs_libraries
def test_the_views_draw_no_text_under_the_slides_smallest(loaded_models, tmp_path):
    bert = loaded_models["bert"]
    for view, expected in (
        (head_view(SENTENCE, bert), {"TEXT_SIZE": 16}),
        (
            model_view(SENTENCE, bert),
            {
                "HEADING_TEXT_SIZE": 16,
                "TEXT_SIZE": 16,
            },
        ),
    ):
        sizes = {name: float(size) for name, size in re.findall(r"const (\w*TEXT_SIZE) = ([\d.]+);", view.html)}
        assert sizes == expected  # bertviz's 15 and 13 px raised to MIN_TEXT_PX
    store = extract_attention(Corpus.from_texts([SENTENCE]), tmp_path / "s.zarr", bert, progress=False)
    panel = explorer(store)
    assert (panel.sentence.layout.width, panel.sentence.layout.max_width) == ("32em", "calc(100% - 4px)")
    assert panel.children[1].layout.flex_flow == "row wrap"


def test_bertviz_does_not_leak_resource_warnings(loaded_models):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        head_view(SENTENCE, loaded_models["bert"])


@pytest.mark.parametrize("view", [head_view, model_view])
def test_offline_without_the_libraries_falls_back_to_a_static_figure(loaded_models, no_js_libraries, monkeypatch, view):
    monkeypatch.setenv(settings.OFFLINE_ENV, "1")
    with pytest.warns(UserWarning, match="cannot draw here: .* (is|are) not installed") as caught:
        shown = (
            view(SENTENCE, loaded_models["bert"], layer=1)
            if view is head_view
            else view(SENTENCE, loaded_models["bert"])
        )
    # The first warning caught may be an unrelated one from an import the view triggers.
    note = next(str(w.message) for w in caught if "cannot draw here" in str(w.message))
    assert "npm" in note or "bertology assets" in note  # says how to install them
    assert not [w for w in caught if "tight_layout" in str(w.message)]  # the grid is laid out as drawn
    assert "`bertology assets --install`" in shown.html and "d3@5.16.0" in shown.html
    assert 'data-fallback="static"' in shown.html
    img = re.search(
        r'<img alt="[^"]+" style="([^"]+)" data-text-boxes=\'([^\']+)\' src="data:image/png;base64,([A-Za-z0-9+/=]{200,})">',
        shown.html,
    )
    assert img, shown.html[:1000]
    assert "<script" not in shown.html  # nothing that needs the network or JavaScript
    if view is head_view:
        assert "Showing layer 2 as a static figure" in shown.html
    # A slide holds the note and the picture: the note at the slides' smallest text size or larger, the picture
    # never scaled past the output area and drawn at the size it is shown, its text measured and readable there.
    note_px = re.search(r'<p style="font-size: ([0-9.]+)px;[^"]*"><strong>The interactive', shown.html)
    assert note_px and float(note_px[1]) >= MIN_TEXT_PX
    assert "max-width: 100%;" in img[1] and "height: auto;" in img[1]
    max_height = float(re.search(r"max-height: ([0-9.]+)px;", img[1])[1])
    assert 300 <= max_height <= SLIDE_BOX[1] - 100  # room left for the note and a caption
    text = FigureText.from_json(html.unescape(img[2]))
    assert read_png_text(base64.b64decode(img[3])) == text
    width, height = text.size
    assert width <= SLIDE_BOX[0] and height <= max_height + 1 and max(width / SLIDE_BOX[0], height / max_height) > 0.95
    assert text.boxes and min(box.font_px for box in text.boxes) >= MIN_TEXT_PX - 0.05
    assert text_problems(text, width) == []
    strings = {box.text for box in text.boxes}
    if view is model_view:  # rows and columns numbered, not the grid's token labels a slide cannot hold
        layers, heads = (
            loaded_models["bert"].model.config.num_hidden_layers,
            loaded_models["bert"].model.config.num_attention_heads,
        )
        assert strings == {"head", "layer"} | {str(k) for k in range(1, max(layers, heads) + 1)}
    else:
        assert {w.lower() for w in words_of(SENTENCE)} <= {s.lower() for s in strings}  # an uncased tokenizer
    assert shown.html.count("<img") == 1 and shown.kind == ("head" if view is head_view else "model")
    with pytest.raises(AssetMissingError):  # the libraries themselves still say they are missing
        assets.asset_text("d3")


def test_online_without_the_libraries_uses_the_cdn_with_a_warning(loaded_models, no_js_libraries):
    with pytest.warns(UserWarning, match="will not draw offline"):
        view = model_view(SENTENCE, loaded_models["bert"])
    assert f'<script src="{assets.ASSETS["require"].cdn}">' in view.html
    for name in ("d3", "jquery"):
        assert json.dumps(assets.ASSETS[name].cdn.removesuffix(".js")) in view.html


@pytest.mark.parametrize("arch", ARCHS)
def test_head_view_holds_the_models_own_token_attention(loaded_models, arch):
    loaded = loaded_models[arch]
    item = Corpus.from_texts(SENTENCE)[0]
    params = _params(head_view(SENTENCE, loaded))
    (data,) = params["attention"]  # one sentence: one attention filter
    reference = _eager_attention(loaded, item.words)
    # float16 storage, then 4 decimals
    np.testing.assert_allclose(np.array(data["attn"]), reference, atol=1.5e-3)
    assert data["left_text"] == [t.replace("Ġ", " ") for t in attention_for([item], loaded, keep_tokens=True)[0].tokens]


def test_pair_views_split_at_the_second_text(loaded_models):
    loaded = loaded_models["bert"]
    item = attention_for([SentencePair("p", *(tuple(words_of(text)) for text in PAIR))], loaded)[0]
    params = _params(head_view(PAIR, loaded, level="word"))
    names = [d["name"] for d in params["attention"]]
    assert names[0] == "All" and "Sentence B -> Sentence B" in names
    full = np.array(params["attention"][0]["attn"])
    np.testing.assert_allclose(full, item.attention, atol=1e-3)
    assert params["attention"][0]["left_text"] == list(item.words)
    b_start = int(np.flatnonzero(item.segments == 1)[0])
    b_to_b = params["attention"][names.index("Sentence B -> Sentence B")]
    assert b_to_b["left_text"] == list(item.words[b_start:])
    np.testing.assert_allclose(np.array(b_to_b["attn"]), item.attention[:, :, b_start:, b_start:], atol=1e-3)


def test_model_view_restricts_layers_and_heads(loaded_models):
    loaded = loaded_models["roberta"]  # 3 layers x 2 heads
    params = _params(model_view(SENTENCE, loaded, layers=[2], heads=[1]))
    reference = _eager_attention(loaded, Corpus.from_texts(SENTENCE)[0].words)
    attn = np.array(params["attention"][0]["attn"])
    assert attn.shape[:2] == (1, 1) and params["include_layers"] == [2] and params["include_heads"] == [1]
    np.testing.assert_allclose(attn[0, 0], reference[2, 1], atol=1.5e-3)


def test_views_of_store_items_are_word_level(loaded_models, tmp_path):
    loaded = loaded_models["distilbert"]
    store = extract_attention(
        Corpus.from_texts([SENTENCE, "A small dog."]), tmp_path / "s.zarr", loaded, progress=False
    )
    params = _params(head_view(store[1], level="word"))
    np.testing.assert_allclose(np.array(params["attention"][0]["attn"]), store[1].attention, atol=1e-4)
    with pytest.raises(BertologyError, match="word-level attention only"):
        head_view(store[1])
    with pytest.raises(ValueError, match="level must be one of"):
        head_view(SENTENCE, loaded, level="sentence")


def test_saved_view_is_a_standalone_page(loaded_models, tmp_path):
    view = head_view(SENTENCE, loaded_models["electra"])
    path = view.save(tmp_path / "out" / "head.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and view.html in page and page.rstrip().endswith("</html>")
    assert view._repr_html_() == view.html


# --------------------------------------------------------------------------- explorer


def _png(widget) -> bytes:
    (output,) = widget.output.outputs
    return base64.b64decode(output["data"]["image/png"])


def test_explorer_on_a_store_redraws_when_a_control_changes(loaded_models, tmp_path):
    loaded = loaded_models["bert"]  # 2 layers x 4 heads
    store = extract_attention(
        Corpus.from_texts([SENTENCE, "A small dog barks.", "Hello world again."]),
        tmp_path / "s.zarr",
        loaded,
        progress=False,
    )
    panel = explorer(store)
    assert "bertology-explorer" in panel._dom_classes
    assert (panel.layer.max, panel.head.max) == (store.num_layers, store.num_heads)
    assert list(panel.level.options) == ["word"]  # this store kept no token maps
    assert panel.state == {"index": 0, "layer": 0, "head": 0, "level": "word"}
    before = _png(panel)
    np.testing.assert_array_equal(panel.current, store[0].attention[0, 0])
    # the picture carries its measured text, in its bytes (for the page audit) and in the output's metadata
    text = read_png_text(before)
    assert text is not None and "layer 1, head 1" in " ".join(b.text for b in text.boxes)
    assert panel.output.outputs[0]["metadata"]["image/png"][TEXT_KEY] == json.loads(text.to_json())

    panel.layer.value = 2
    assert panel.state["layer"] == 1 and _png(panel) != before
    np.testing.assert_array_equal(panel.current, store[0].attention[1, 0])
    panel.head.value = 4
    panel.sentence.value = 2
    assert panel.state == {"index": 2, "layer": 1, "head": 3, "level": "word"}
    np.testing.assert_array_equal(panel.current, store[2].attention[1, 3])
    with pytest.raises(BertologyError, match="not available"):
        explorer(store, level="token")


def test_explorer_on_items_switches_between_words_and_tokens(loaded_models):
    loaded = loaded_models["mpnet"]
    texts = [SENTENCE, "Running, jumping and swimming."]
    items = attention_for(Corpus.from_texts(texts), loaded, keep_tokens=True)
    panel = explorer(texts, loaded, layer=1, head=2)
    assert list(panel.level.options) == ["word", "token"]
    np.testing.assert_array_equal(panel.current, items[0].attention[1, 2])
    words = _png(panel)
    panel.level.value = "token"
    assert panel.current.shape == (items[0].n_tokens,) * 2 and _png(panel) != words
    np.testing.assert_array_equal(panel.current, items[0].token_attention[1, 2])
    with pytest.raises(ValueError, match="out of range"):
        explorer(items, head=loaded.num_heads)


# --------------------------------------------------------------------------- neuron view


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.parametrize("arch", ARCHS)
def test_neuron_view_products_reproduce_the_models_attention(loaded_models, arch):
    loaded = loaded_models[arch]
    words = Corpus.from_texts(SENTENCE)[0].words
    reference = _eager_attention(loaded, words)
    for layer, head, query in [(0, 0, 1), (loaded.num_layers - 1, loaded.num_heads - 1, 4)]:
        view = neuron_view(SENTENCE, loaded, layer=layer, head=head, query=query)
        d = view.query.shape[0]
        assert view.products.shape == (len(view.tokens), d) and d * loaded.num_heads == loaded.config.hidden_size
        np.testing.assert_allclose(view.products, view.query[None] * view.keys, rtol=1e-6)
        # sum over dims of q*k / sqrt(d_head), plus the mask (and MPNet's position bias), softmaxed
        rebuilt = _softmax(view.products.sum(-1) / np.sqrt(d) + view.bias)
        np.testing.assert_allclose(rebuilt, reference[layer, head, query], atol=1e-5)
        np.testing.assert_allclose(view.attention, reference[layer, head, query], atol=1e-5)
        if arch == "mpnet":  # relative position bias is part of MPNet's scores; without it the identity fails
            assert np.abs(view.bias).max() > 0
            assert np.abs(_softmax(view.products.sum(-1) / np.sqrt(d)) - reference[layer, head, query]).max() > 1e-5
        else:
            assert not view.bias.any()  # one unpadded input: the mask adds nothing


def test_neuron_view_of_a_pair_and_by_token_string(loaded_models):
    loaded = loaded_models["bert"]
    view = neuron_view(PAIR, loaded, layer=1, head=2, query="keys")
    assert view.tokens[view.query_index] == "keys"
    reference = _eager_attention(loaded, *(Corpus.from_texts(t)[0].words for t in PAIR))
    np.testing.assert_allclose(view.attention, reference[1, 2, view.query_index], atol=1e-5)
    default = neuron_view(SENTENCE, loaded)
    assert default.query_index == 1  # the first word's first token, after [CLS]
    with pytest.raises(BertologyError, match="not among the tokens"):
        neuron_view(SENTENCE, loaded, query="zebra")
    with pytest.raises(ValueError, match="out of range"):
        neuron_view(SENTENCE, loaded, layer=loaded.num_layers)


def test_neuron_view_figure(loaded_models):
    import matplotlib.pyplot as plt

    view = neuron_view(SENTENCE, loaded_models["distilbert"], layer=1, head=2, query=3)
    fig = view.figure()
    try:
        heatmap, scores, attention = fig.axes[:3]
        assert heatmap.collections[0].get_array().size == view.products.size
        np.testing.assert_allclose([p.get_width() for p in attention.patches], view.attention, rtol=1e-6)
        np.testing.assert_allclose([p.get_width() for p in scores.patches], view.scores, rtol=1e-6)
    finally:
        plt.close(fig)
