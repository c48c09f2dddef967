"""The machine-wide model cache: a second checkout copies a build instead of building it,
byte for byte, and only a build with the same fingerprint."""
import dataclasses

import pytest

from inference import demo_models, model_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("CHATSITE_MODEL_CACHE", str(root))
    return root


def _fake_training(calls):
    def train(name, cfg, tok_dir, out, samples, log):  # stands in for minutes of training
        calls.append(name)
        (out / "model.safetensors").write_bytes(f"{name} {cfg.seed}".encode())
    return train


def test_a_second_checkout_copies_the_build_instead_of_training(tmp_path, cache, monkeypatch):
    calls = []
    monkeypatch.setattr(demo_models, "_train_model", _fake_training(calls))
    first = demo_models.build_demo_models(tmp_path / "a", names=("small",), log=lambda line: None)
    assert calls == ["small"] and sorted(p.name.rsplit("-", 1)[0] for p in cache.iterdir()) == [
        "demo-small", "demo-tokenizer"]

    lines = []
    second = demo_models.build_demo_models(tmp_path / "b", names=("small",), log=lines.append)
    assert calls == ["small"]  # not trained again
    assert any("[small] copied from the model cache" in line for line in lines)
    assert any("[tokenizer] copied from the model cache" in line for line in lines)
    for name in ("model.safetensors", "build.json", "tokenizer.json"):
        assert (second["small"] / name).read_bytes() == (first["small"] / name).read_bytes()
    assert not list((tmp_path / "b").glob(".*.tmp"))


def test_another_configuration_is_built_not_copied(tmp_path, cache, monkeypatch):
    calls = []
    monkeypatch.setattr(demo_models, "_train_model", _fake_training(calls))
    demo_models.build_demo_models(tmp_path / "a", names=("small",), log=lambda line: None)
    changed = dataclasses.replace(demo_models.DEMO_MODELS["small"], seed=1)
    monkeypatch.setitem(demo_models.DEMO_MODELS, "small", changed)
    built = demo_models.build_demo_models(tmp_path / "b", names=("small",), log=lambda line: None)
    assert calls == ["small", "small"] and (built["small"] / "model.safetensors").read_bytes() == b"small 1"


def test_a_checkout_with_another_torch_trains_its_own(tmp_path, cache, monkeypatch):
    """The cache is shared by checkouts whose environments may differ: a build made with
    another version of the libraries that made it is not handed over."""
    calls = []
    monkeypatch.setattr(demo_models, "_train_model", _fake_training(calls))
    demo_models.build_demo_models(tmp_path / "a", names=("small",), log=lambda line: None)
    real = model_cache.converters
    monkeypatch.setattr(model_cache, "converters",
                        lambda *names: {**real(*names), **({"torch": "0.0.1"} if "torch" in names else {})})
    demo_models.build_demo_models(tmp_path / "b", names=("small",), log=lambda line: None)
    assert calls == ["small", "small"]


def test_converters_names_the_installed_versions():
    versions = model_cache.converters("torch", "no-such-package-here")
    assert versions["torch"] and versions["no-such-package-here"] is None


def test_an_up_to_date_checkout_seeds_an_empty_cache(tmp_path, cache, monkeypatch):
    calls = []
    monkeypatch.setattr(demo_models, "_train_model", _fake_training(calls))
    monkeypatch.setenv("CHATSITE_MODEL_CACHE", "off")  # built before there was a cache
    demo_models.build_demo_models(tmp_path / "a", names=("small",), log=lambda line: None)
    assert not cache.exists()
    monkeypatch.setenv("CHATSITE_MODEL_CACHE", str(cache))
    lines = []
    demo_models.build_demo_models(tmp_path / "a", names=("small",), log=lines.append)
    assert lines == [f"[small] up to date at {tmp_path / 'a' / 'small'}"] and calls == ["small"]
    demo_models.build_demo_models(tmp_path / "b", names=("small",), log=lambda line: None)
    assert calls == ["small"]


def test_an_entry_without_its_marker_is_a_miss(tmp_path, cache):
    (cache / "x-0123456789abcdef").mkdir(parents=True)  # what a copy cut short would look like
    assert not model_cache.restore("x", "0123456789abcdef" * 4, tmp_path / "tmp")
    assert not (tmp_path / "tmp").exists()
