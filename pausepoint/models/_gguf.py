"""What a GGUF file says about itself: its metadata, read without loading the model.

A GGUF file starts with ``GGUF``, a version (2 or 3), the tensor and metadata counts, then
the metadata as typed key/value pairs (little-endian). The local provider reads it to know what
a file is before trusting it (name, architecture, quantisation), to find its chat template, and
to know whether the model adds its begin-of-sequence token itself.

Only the metadata section is read. Arrays (the vocabulary, ~150,000 strings) are skipped and
reported by their length only, so reading takes a fraction of a second.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["GgufInfo", "GgufError", "read_gguf"]

# general.file_type (llama.cpp's llama_ftype) -> the name people know the quantisation by
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 32: "BF16",
}  # fmt: skip

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_STRING = 1 << 24  # a chat template is a few KB; anything past 16 MB is a corrupt length


class GgufError(ValueError):
    """The file is not a readable GGUF file."""


@dataclass(frozen=True, slots=True)
class GgufInfo:
    """The metadata of a GGUF file. ``metadata`` holds every key; arrays appear as their length."""

    version: int
    tensor_count: int
    metadata: dict[str, Any]
    #: the text of the begin- and end-of-sequence tokens ("" when the file names none)
    bos_token: str = ""
    eos_token: str = ""

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name", ""))

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def quantization(self) -> str:
        file_type = self.metadata.get("general.file_type")
        return _FILE_TYPES.get(file_type, str(file_type)) if isinstance(file_type, int) else "unknown"

    @property
    def chat_template(self) -> str | None:
        template = self.metadata.get("tokenizer.chat_template")
        return template if isinstance(template, str) and template.strip() else None

    @property
    def adds_bos(self) -> bool:
        """Whether the tokenizer puts the begin-of-sequence token in front of a prompt by itself."""
        return bool(self.metadata.get("tokenizer.ggml.add_bos_token", False))

    def describe(self) -> str:
        """One line for people: ``Qwen2.5 Coder 1.5B Instruct (qwen2, Q4_K_M)``."""
        return f"{self.name or 'unnamed model'} ({self.architecture or 'unknown architecture'}, {self.quantization})"


def read_gguf(path: Path) -> GgufInfo:
    """Read the metadata of the GGUF file at ``path``. Raises ``GgufError`` or ``OSError``."""
    with path.open("rb", buffering=1 << 20) as f:
        return _read(f)


def _read(f: BinaryIO) -> GgufInfo:
    if f.read(4) != b"GGUF":
        raise GgufError("not a GGUF file (it does not start with 'GGUF')")
    version = _unpack(f, "<I")
    if version not in (2, 3):
        raise GgufError(f"unsupported GGUF version {version}")
    tensor_count, count = _unpack(f, "<Q"), _unpack(f, "<Q")
    metadata: dict[str, Any] = {}
    vocabulary = -1  # where the token texts start, to read the special ones afterwards
    for _ in range(count):
        key = _string(f)
        kind = _unpack(f, "<I")
        if key == "tokenizer.ggml.tokens" and kind == _ARRAY:
            vocabulary = f.tell()
        metadata[key] = _value(f, kind)
    special = [_token(f, vocabulary, metadata.get(f"tokenizer.ggml.{t}_token_id")) for t in ("bos", "eos")]
    return GgufInfo(version, tensor_count, metadata, *special)


def _token(f: BinaryIO, vocabulary: int, token: Any) -> str:
    """The text of token number ``token`` of the vocabulary that starts at offset ``vocabulary``."""
    if vocabulary < 0 or not isinstance(token, int) or token < 0:
        return ""
    f.seek(vocabulary)
    if _unpack(f, "<I") != _STRING or token >= _unpack(f, "<Q"):
        return ""
    for _ in range(token):
        f.seek(_unpack(f, "<Q"), io.SEEK_CUR)
    return _string(f)


def _unpack(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise GgufError("the file ends inside its metadata")
    return struct.unpack(fmt, data)[0]


def _string(f: BinaryIO) -> str:
    length = _unpack(f, "<Q")
    if length > _MAX_STRING:
        raise GgufError(f"a metadata string claims {length} bytes")
    data = f.read(length)
    if len(data) != length:
        raise GgufError("the file ends inside its metadata")
    return data.decode("utf-8", "replace")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        item_kind, length = _unpack(f, "<I"), _unpack(f, "<Q")
        if item_kind == _ARRAY:
            raise GgufError("nested metadata arrays are not supported")
        if length <= 16:
            return [_value(f, item_kind) for _ in range(length)]
        if item_kind == _STRING:
            for _ in range(length):
                _string(f)
        elif item_kind in _SCALARS:
            f.seek(length * struct.calcsize(_SCALARS[item_kind]), io.SEEK_CUR)
        else:
            raise GgufError(f"unknown metadata type {item_kind}")
        return length
    if kind not in _SCALARS:
        raise GgufError(f"unknown metadata type {kind}")
    return _unpack(f, _SCALARS[kind])
