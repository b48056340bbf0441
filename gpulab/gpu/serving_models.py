"""The models the serving calculator knows: presets and Hugging Face configs.

The presets' shapes come from each model's published config.json; any other
decoder-only model comes from its own config.json (`load_hf_config`). The
arithmetic on them is gpulab.gpu.serving's.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

from gpulab.gpu.serving import InputError, ModelConfig

# Shapes from each model's published config.json (Hugging Face) and, for
# Llama 3, Table 3 of "The Llama 3 Herd of Models" (2024). Context windows:
# max_position_embeddings of the same config.json (8K for Llama 3, 128K for
# Llama 3.1 and 3.2 and for Qwen 2.5 7B).
PRESETS: dict[str, ModelConfig] = {
    m.name: m
    for m in [
        ModelConfig(
            "llama-3-8b",
            32,
            4096,
            32,
            8,
            128256,
            14336,
            max_context=8192,
            source="meta-llama/Meta-Llama-3-8B config.json",
        ),
        ModelConfig(
            "llama-3-70b",
            80,
            8192,
            64,
            8,
            128256,
            28672,
            max_context=8192,
            source="meta-llama/Meta-Llama-3-70B config.json",
        ),
        ModelConfig(
            "llama-3.1-405b",
            126,
            16384,
            128,
            8,
            128256,
            53248,
            max_context=131072,
            source="Llama 3 paper, Table 3",
        ),
        ModelConfig(
            "llama-3.2-3b",
            28,
            3072,
            24,
            8,
            128256,
            8192,
            head_dim=128,
            tied=True,
            max_context=131072,
            source="meta-llama/Llama-3.2-3B config.json",
        ),
        ModelConfig(
            "qwen2.5-7b",
            28,
            3584,
            28,
            4,
            152064,
            18944,
            max_context=131072,
            source="Qwen/Qwen2.5-7B config.json (QKV biases left out)",
        ),
    ]
}
DEFAULT_MODEL = "llama-3-8b"


# --- a model from a Hugging Face config.json ---------------------------------

_HF_FIELDS = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "vocab": "vocab_size",
    "intermediate": "intermediate_size",
}


def load_hf_config(path: str | Path) -> ModelConfig:
    """A ModelConfig from a Hugging Face `config.json`. Raises ValueError naming
    the file and the field when something is missing or wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object at the top level")
    if isinstance(data.get("text_config"), dict):  # multimodal wrappers
        data = {**data, **data["text_config"]}

    def field(key: str, default: int | None = None) -> int:
        value = data.get(key, default)
        if value is None:
            raise ValueError(f"{path}: field '{key}' is missing")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{path}: field '{key}' must be a positive integer, got {value!r}")
        return value

    kw = {name: field(key) for name, key in _HF_FIELDS.items()}
    kw["kv_heads"] = field("num_key_value_heads", kw["heads"])
    if kw["heads"] % kw["kv_heads"]:
        raise ValueError(
            f"{path}: field 'num_key_value_heads' ({kw['kv_heads']}) must divide "
            f"num_attention_heads ({kw['heads']})"
        )
    head_dim = data.get("head_dim")
    if head_dim is None and kw["hidden"] % kw["heads"]:
        raise ValueError(
            f"{path}: field 'head_dim' is missing and hidden_size "
            f"({kw['hidden']}) is not a multiple of num_attention_heads "
            f"({kw['heads']})"
        )
    kw["head_dim"] = field("head_dim") if head_dim is not None else kw["hidden"] // kw["heads"]
    if data.get("max_position_embeddings") is not None:
        kw["max_context"] = field("max_position_embeddings")
    return ModelConfig(
        name=path.parent.name or path.stem,
        tied=bool(data.get("tie_word_embeddings", False)),
        source=str(path),
        **kw,
    )


def _model_key(name: str) -> str:
    """Case, spaces and punctuation left out: 'Llama3 8B' and 'llama-3-8b' agree."""
    return "".join(re.findall(r"[a-z0-9]+", name.lower()))


def model_suggestions(key: str, n: int = 3) -> list[str]:
    """Preset names close to `key` (difflib, as the glossary's lookup forgives typos)."""
    keys = {_model_key(name): name for name in PRESETS}
    close = difflib.get_close_matches(_model_key(key), list(keys), n=n, cutoff=0.6)
    return [keys[c] for c in close]


def find_model(key: str) -> ModelConfig:
    """A preset by name, or a config.json path.

    Case, spaces and punctuation don't matter ('llama3-8b' is llama-3-8b);
    an unknown name raises InputError with the closest presets.
    """
    k = key.strip().lower()
    if k in PRESETS:
        return PRESETS[k]
    if key.endswith(".json") or Path(key).is_file():
        return load_hf_config(key)
    same = [name for name in PRESETS if _model_key(name) == _model_key(key)]
    if len(same) == 1 and _model_key(key):
        return PRESETS[same[0]]
    close = model_suggestions(key)
    hint = (
        f"did you mean {', '.join(close[:-1])} or {close[-1]}? "
        if len(close) > 1
        else f"did you mean {close[0]}? "
        if close
        else ""
    )
    raise InputError(
        "model",
        f"unknown model '{key}'; {hint}Presets: {', '.join(PRESETS)}; "
        "or give the path of a Hugging Face config.json",
    )
