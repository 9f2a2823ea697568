"""The JavaScript asset layer: lookup order, inlining, CDN fallback online, a clear error offline."""

import json
import warnings

import pytest

from bertology_utils.core import settings
from bertology_utils.core.errors import AssetMissingError
from bertology_utils.present import assets


@pytest.fixture
def js_dir(no_js_libraries):
    return no_js_libraries


def _install_fake(root, name, text):
    asset = assets.ASSETS[name]
    path = root / asset.package / asset.file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_lookup_prefers_the_environment_setting_then_checkout_then_cache(js_dir, tmp_path, monkeypatch):
    cached = _install_fake(tmp_path / "cache" / "js" / "node_modules", "d3", "cache")
    assert assets.asset_path("d3") == cached
    monkeypatch.setattr(settings, "PROJECT_ROOT", tmp_path / "checkout")
    checkout = _install_fake(tmp_path / "checkout" / "node_modules", "d3", "checkout")
    assert assets.asset_path("d3") == checkout
    env = _install_fake(js_dir, "d3", "env")
    assert assets.asset_path("d3") == env
    assert assets.asset_text("d3") == "env"


def test_installed_library_is_inlined_and_cannot_close_its_script_element(js_dir):
    _install_fake(js_dir, "jquery", 'var s = "</script>"; var t = 1;')
    tag = assets.script_tag("jquery")
    assert tag.startswith("<script>") and tag.endswith("</script>")
    assert tag.count("</script") == 1  # only the element's own end tag
    assert 'var s = "<\\/script>"' in tag
    assert "cdnjs" not in tag


def test_offline_missing_library_raises_with_how_to_install(js_dir, monkeypatch):
    monkeypatch.setenv(settings.OFFLINE_ENV, "1")
    with pytest.raises(AssetMissingError, match=r"d3@5\.16\.0 is not installed.*npm ci"):
        assets.script_tag("d3")


def test_online_missing_library_falls_back_to_the_cdn_with_a_warning(js_dir):
    with pytest.warns(UserWarning, match="will not draw offline"):
        tag = assets.script_tag("d3")
    assert tag == f'<script src="{assets.ASSETS["d3"].cdn}"></script>'
    with pytest.warns(UserWarning):
        assert assets.style_tag("reveal_css").startswith('<link rel="stylesheet" href="https://')


def test_have_assets_reports_partial_installs(js_dir):
    _install_fake(js_dir, "d3", "x")
    assert assets.have_assets("d3")
    assert not assets.have_assets("d3", "jquery")
    assert not assets.have_assets()


def test_pins_match_package_json():
    """package.json (what npm installs) and ASSETS (what the code looks for) name the same versions."""
    manifest = settings.PROJECT_ROOT / "package.json"
    if not manifest.is_file():
        pytest.skip("not a checkout: no package.json")
    pinned = json.loads(manifest.read_text())["dependencies"]
    for asset in assets.ASSETS.values():
        assert pinned[asset.package] == asset.version, asset.package


def test_no_warning_when_installed(js_dir):
    _install_fake(js_dir, "reveal_css", ".reveal{}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert assets.style_tag("reveal_css") == "<style>\n.reveal{}\n</style>"


def test_pins_match_package_lock():
    """package-lock.json (what `npm ci` installs) has every asset's package at its pinned version."""
    lock = settings.PROJECT_ROOT / "package-lock.json"
    if not lock.is_file():
        pytest.skip("not a checkout: no package-lock.json")
    packages = json.loads(lock.read_text())["packages"]
    for asset in assets.ASSETS.values():
        assert packages[f"node_modules/{asset.package}"]["version"] == asset.version, asset.package
    assert (
        packages[""]["dependencies"] == json.loads((settings.PROJECT_ROOT / "package.json").read_text())["dependencies"]
    )
