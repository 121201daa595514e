"""Admission: the one place where the extender decides what input it accepts.

Everything a client sends passes through here before the service sees it: request bodies
(size-bounded while they stream in, before they are buffered), Kubernetes quantities
(``500m``, ``16Gi``; parsed by the API's own grammar, ASCII digits only, finite and
bounded), the integer annotations of the vocabulary, and names (bounded strings). A value
outside these rules raises ``AdmissionError`` with a message naming the field and the rule;
the HTTP face answers it with a 4xx, never a 500.

The limits are documented in docs/kubernetes.md ("What the extender accepts").
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from decimal import Decimal
from typing import Any

# Bodies. Filter and prioritize may carry every Node object of the cluster (no
# nodeCacheCapable): ~0.5 KB per node in our vocabulary, 5-20 KB for a real node with its
# image list; 64 MiB holds 5,000 real nodes (kube-scheduler's supported maximum).
# Everything else (bind, the standalone DELETE) is a few hundred bytes.
MAX_ARGS_BYTES = 64 << 20
MAX_SMALL_BODY_BYTES = 64 << 10
MAX_NODES = 50_000  # names or Node objects in one ExtenderArgs
MAX_CONTAINERS = 1_000  # containers + init containers of one pod
MAX_NAME_CHARS = 253  # a DNS subdomain: names of pods and nodes
MAX_UID_CHARS = 128
MAX_ANNOTATION_CHARS = 1_024  # the vocabulary's annotations are a few characters
MAX_QUANTITY_CHARS = 64
MAX_GPU_COUNT = 1_024  # GPUs one pod may ask for (no node has more)
# The API server rejects quantities beyond int64 in their smallest unit (milli for CPU,
# bytes for memory); so do we, which also keeps every count a machine integer.
MAX_INT64 = (1 << 63) - 1

# Kubernetes' quantity grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go), ASCII
# digits only: Python's \d would also take Arabic-Indic or full-width digits.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)|[eE](?P<exponent>[+-]?[0-9]{1,3}))?",
    re.ASCII,
)
_SUFFIX = {
    None: Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
# Annotations are typed by people: spaces and tabs around the number are tolerated.
_COUNT = re.compile(r"[ \t]*([0-9]{1,19})[ \t]*", re.ASCII)
_INDEX = re.compile(r"[ \t]*([0-9]{1,4}(?:-[0-9]{1,4}){0,1023})[ \t]*", re.ASCII)


class AdmissionError(ValueError):
    """Input the extender does not accept; the message names the field and the rule.
    ``status`` is the HTTP answer: 400 (not the struct), 413 (too large), 422 (a value
    out of its rules)."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def quantity(value: Any, where: str) -> Decimal:
    """A Kubernetes quantity (``500m``, ``16Gi``, ``2``, ``1e3``) as an exact Decimal,
    >= 0 and finite. Strings only, as the API serves them; JSON integers are taken too
    (some clients write ``"cpu": 2``), but never floats, NaN or infinities."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise AdmissionError(f"{where}={_shown(value)} must be a quantity string like '500m'")
    text = value if isinstance(value, str) else str(value)  # no trimming: the API has none
    if len(text) > MAX_QUANTITY_CHARS:
        raise AdmissionError(f"{where} is longer than {MAX_QUANTITY_CHARS} characters")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise AdmissionError(
            f"{where}={_shown(value)} is not a Kubernetes quantity (like 500m, 2, 16Gi, 1e3)"
        )
    if match["sign"] == "-" and match["number"].strip("0.") != "":
        raise AdmissionError(f"{where}={_shown(value)} must not be negative")
    number = Decimal(match["number"])
    exponent = match["exponent"]
    if exponent is not None:
        result = number.scaleb(int(exponent))
    else:
        result = number * _SUFFIX[match["suffix"]]
    if result > MAX_INT64:
        raise AdmissionError(f"{where}={_shown(value)} is out of range")
    return result


def scaled(value: Any, where: str, unit: Decimal, *, up: bool) -> int:
    """A quantity in ``unit``s (1/1000 for milli-CPU, 2^20 for MiB), rounded up (a
    request) or down (a capacity), checked to fit an int64 in the smallest unit."""
    exact = quantity(value, where) / unit
    rounded = int(exact.to_integral_value(rounding="ROUND_CEILING" if up else "ROUND_FLOOR"))
    if rounded > MAX_INT64:
        raise AdmissionError(f"{where}={_shown(value)} is out of range")
    return rounded


def count(value: Any, where: str, maximum: int) -> int:
    """A non-negative decimal integer annotation (``"2"``), at most ``maximum``."""
    if not isinstance(value, str):
        raise AdmissionError(f"{where}={_shown(value)} must be a string (annotations are)")
    match = _COUNT.fullmatch(value)
    if match is None:
        raise AdmissionError(f"{where}={_shown(value)} is not a non-negative integer")
    number = int(match[1])
    if number > maximum:
        raise AdmissionError(f"{where}={number} is over {maximum}")
    return number


def gpu_indices(value: Any, where: str) -> tuple[int, ...]:
    """The ``gpu-index`` annotation: GPU slots joined by ``-`` (``2``, ``0-1-2-3``)."""
    match = _INDEX.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise AdmissionError(f"{where}={_shown(value)} is not like 0-1-2")
    return tuple(int(p) for p in match[1].split("-"))


def text(value: Any, where: str, maximum: int, *, required: bool = False) -> str:
    """A bounded string field (a name, a uid, a model list); '' when absent."""
    if value is None or value == "":
        if required:
            raise AdmissionError(f"{where} is missing")
        return ""
    if not isinstance(value, str):
        raise AdmissionError(f"{where} must be a string, not {type(value).__name__}")
    if len(value) > maximum:
        raise AdmissionError(f"{where} is longer than {maximum} characters")
    return value


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    """An optional JSON object ({} when absent)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AdmissionError(f"{where} must be an object")
    return value


def array(value: Any, where: str, maximum: int) -> list[Any]:
    """An optional JSON array of at most ``maximum`` items ([] when absent)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise AdmissionError(f"{where} must be a list")
    if len(value) > maximum:
        raise AdmissionError(f"{where} has {len(value)} items, more than {maximum}")
    return value


class BodyTooLarge(AdmissionError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes", status=413)


async def read_body(declared: bytes | None, chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The request body, refused (413) as soon as it is known to exceed ``limit``: from
    the Content-Length header (``declared``) before any byte is read, else while the
    chunks stream in."""
    if declared is not None:
        if not declared.strip().isdigit():  # bytes: ASCII digits only
            raise AdmissionError("Content-Length is not a number", status=400)
        if int(declared) > limit:
            raise BodyTooLarge(limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        parts.append(chunk)
    return b"".join(parts)
