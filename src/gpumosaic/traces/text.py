"""Reading a user's text file the way a user expects: a UTF-8 byte-order mark (Excel's
"CSV UTF-8" export) and Windows line ends are accepted silently, and bytes that are not
UTF-8 are one error line naming the file and the row, never a traceback."""

from __future__ import annotations

from pathlib import Path

from gpumosaic.errors import InputError


def read_user_text(path: str | Path, *, what: str = "file") -> str:
    """The file's text with any BOM removed and line ends normalized to ``\\n``."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise InputError(f"cannot read {what}: {err.strerror}", path=path) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        row = data.count(b"\n", 0, err.start) + 1
        raise InputError(
            f"byte 0x{data[err.start]:02x} is not UTF-8 text (save the {what} as UTF-8)",
            path=path,
            row=row,
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")
