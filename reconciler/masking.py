"""Which values are never shown, and a copy of a value with them masked.

DESIGN.md: sensitive values are masked in every output format, error messages included
(the state and saved plan files keep them). Two rules: the `value` of an environment
variable whose name looks like a secret (the API's `environmentVariables`, and a
Kubernetes container's `env` inside a Manifest), and any value at or under a path the
spec lists in `lifecycle.sensitive`; the spec loader adds the path of every `${env:..}` and
`${file:..}` reference to that list, so a value kept out of the files is sensitive wherever
it is. Pure; callers: the renderers (`render.words`), the spec loader's messages
(`desired.loader`), the API client (`secret_values`: what to mask in an error the API
answers to a request body; `mask_text`: a known secret in any of the encodings a message
may quote it in), and the state and saved plans (`hash_sensitive`: a body with each
sensitive value replaced by its keyed hash, so that a file holds no secret and a plan
still sees a changed one).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson

from reconciler import kinds

MASK = "(sensitive)"
# What `export` writes in place of a sensitive value; `validate` refuses it.
SECRET_PLACEHOLDER = "<secret not exported: give a secret reference or the value>"
_SECRET_NAME = re.compile(r"secret|token|passw(or)?d|pwd|credential|key", re.IGNORECASE)
# For ASCII text in lower case, as bytes: its words each found by a substring search,
# quicker than the pattern's scan (`passw` is then checked by the pattern).
_SECRET_NAME_FOLDED = re.compile(_SECRET_NAME.pattern.encode())
# The Run:ai API's `environmentVariables[NAME].value`, and a Kubernetes container's
# `env[NAME].value` (inside a Manifest's pod templates).
_ENV_VALUE = re.compile(r"(?:environmentVariables|(?:^|\.)env)\[(?P<name>[^\]]*)\]\.value$")
_LAST_FIELD = re.compile(r"(?:^|\.)(?P<field>[A-Za-z0-9_]+)(?:\[[^\]]*\])?$")


def secret_name(name: Any) -> bool:
    return isinstance(name, str) and bool(_SECRET_NAME.search(name))


def is_masked(path: str, sensitive: Sequence[str] = ()) -> bool:
    """True when the value at dotted `path` is never shown."""
    if path.endswith("].value") and ("environmentVariables[" in path or "env[" in path):
        m = _ENV_VALUE.search(path)
        if m and secret_name(m.group("name")):
            return True
    if not sensitive:
        return False
    return kinds.under_any(path, sensitive)


def mask_body(value: Any, sensitive: Sequence[str] = ()) -> Any:
    """A copy of a create body (or PATCH body) with its sensitive values masked."""
    return mask_at("", value, sensitive)


def mask_at(path: str, value: Any, sensitive: Sequence[str] = ()) -> Any:
    """A copy of `value`, found at dotted `path`, with what is sensitive in it masked.

    Keyed list items are named as the diff names them (`spec.environmentVariables[NAME]`),
    so a sensitive path can select one item."""
    if value is None:
        return None
    if path and is_masked(path, sensitive):
        return MASK
    if isinstance(value, dict):
        return {k: mask_at(f"{path}.{k}" if path else k, v, sensitive) for k, v in value.items()}
    if isinstance(value, list):
        m = _LAST_FIELD.search(path)
        list_field = m.group("field") if m and not path.endswith("]") else ""
        out = []
        for item in value:
            key = kinds.item_key(list_field, item) if list_field else None
            out.append(mask_at(f"{path}[{key}]" if key is not None else path, item, sensitive))
        return out
    return value


# Shorter values are not searched for in text: masking every "1" would garble a message.
MIN_SECRET_LEN = 4


def secret_values(value: Any, sensitive: Sequence[str] = ()) -> list[str]:
    """The values in a body (as text) that `mask_body` hides, to mask them in a message
    that may quote them (an API error answering that body); leaves only, longest first."""
    found: set[str] = set()

    def leaves(v: Any) -> None:
        if isinstance(v, dict):
            for x in v.values():
                leaves(x)
        elif isinstance(v, list):
            for x in v:
                leaves(x)
        elif v is not None and not isinstance(v, bool):
            text = str(v)
            if len(text) >= MIN_SECRET_LEN:
                found.add(text)

    def walk(original: Any, masked: Any) -> None:
        if masked == MASK and original != MASK:
            leaves(original)
        elif isinstance(original, dict) and isinstance(masked, dict):
            for k, v in original.items():
                walk(v, masked.get(k))
        elif isinstance(original, list) and isinstance(masked, list):
            for o, m in zip(original, masked):
                walk(o, m)

    walk(value, mask_body(value, sensitive))
    return sorted(found, key=len, reverse=True)


# --- a known secret in text, in any encoding ---------------------------------------------

TEXT_MASK = "***"


@functools.lru_cache(maxsize=4096)
def encoded_forms(secret: str) -> tuple[str, ...]:
    """The forms a message may quote `secret` in: as it is, JSON-escaped (ASCII-only and
    not, `/` as `\\/` too), URL-encoded (path and form style), base64 (standard and URL-safe, padded and
    not); those of `MIN_SECRET_LEN` characters or more, longest first."""
    raw = secret.encode()
    b64 = base64.b64encode(raw).decode()
    b64url = base64.urlsafe_b64encode(raw).decode()
    escaped = json.dumps(secret)[1:-1]
    forms = {secret, escaped, escaped.replace("/", "\\/"),
             json.dumps(secret, ensure_ascii=False)[1:-1],
             urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret),
             urllib.parse.quote_plus(secret), b64, b64.rstrip("="), b64url, b64url.rstrip("=")}
    return tuple(sorted((f for f in forms if len(f) >= MIN_SECRET_LEN), key=len, reverse=True))


def mask_text(text: str, secrets: Iterable[str], mask: str = TEXT_MASK) -> str:
    """`text` with every form (`encoded_forms`) of every secret replaced by `mask`; the
    longest first, so a secret inside a longer one leaves no tail."""
    forms = sorted({f for s in secrets if s for f in encoded_forms(s)}, key=len, reverse=True)
    for form in forms:
        if form in text:
            text = text.replace(form, mask)
    return text


# --- sensitive values as keyed hashes ------------------------------------------------------

HASH_PREFIX = "hmac-sha256:"
_HASHED = re.compile(r"hmac-sha256:[0-9a-f]{64}")


def is_hashed(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 76 and bool(_HASHED.fullmatch(value))


def keyed_hash(value: Any, key: bytes) -> str:
    """`hmac-sha256:<hex>` of one scalar value, in a canonical text (a whole number written
    `2.0` hashes as `2`); an already hashed value is returned as it is."""
    if is_hashed(value):
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = value if isinstance(value, str) else json.dumps(value)
    return HASH_PREFIX + hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def hash_sensitive(body: Any, sensitive: Sequence[str], key: bytes) -> Any:
    """A copy of `body` with each scalar at or under a sensitive path (`is_masked`) replaced
    by its `keyed_hash`; the shape (keys, list items) is kept, so the three-way diff still
    tells a server default from a change. Returns `body` itself when nothing in it is
    sensitive."""
    return map_sensitive(body, sensitive, lambda _, v: keyed_hash(v, key))


def has_sensitive(body: Any, sensitive: Sequence[str] = ()) -> bool:
    """Whether `body` holds a value at or under a sensitive path."""
    return map_sensitive(body, sensitive, lambda _, v: v) is not body


def map_sensitive(body: Any, sensitive: Sequence[str], leaf: Callable[[str, Any], Any],
                  path: str = "") -> Any:
    """A copy of `body` (found at `path`) with each scalar at or under a sensitive path
    replaced by `leaf(its path, it)`; `body` itself when there is none. The items of a
    list without item keys share their list's path."""
    if not sensitive and not _may_name_a_secret(path, body):
        return body
    out, _ = _map(path, body, tuple(sensitive), leaf, False)
    return out


def may_name_a_secret(body: Any) -> bool:
    """False when nothing in `body` can be masked without a `sensitive` path: no name in
    it looks like a secret's (`_may_name_a_secret`). The renderers show each leaf of such
    a body as it is."""
    return _may_name_a_secret("", body)


def _may_name_a_secret(path: str, body: Any) -> bool:
    """False when no name in `body` (found at `path`) can look like a secret's: neither
    the path nor the body's JSON text holds a secret-looking word. Without
    `lifecycle.sensitive` paths, only an environment variable with such a name is
    sensitive, and its name is in the text as it is (JSON escapes no letter), so the
    walk is needed only when the text holds one; the text costs far less than the walk
    (docs/performance.md). A variable's name is a string value in the text, never a
    member's name: an object's member named `key` (followed by `:`) is not searched."""
    if _SECRET_NAME.search(path):
        return True
    try:
        text = orjson.dumps(body)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, a key that is no string
        return True
    if text.isascii():  # folded by `lower`, searched as `_SECRET_NAME` would, but faster
        # A member named `key` (a toleration's, a node affinity's) names no variable.
        folded = text.lower().replace(b'"key":', b"")
        return (b"key" in folded or b"token" in folded or b"secret" in folded
                or b"pwd" in folded or b"credential" in folded
                or b"passw" in folded and _SECRET_NAME_FOLDED.search(folded) is not None)
    return _SECRET_NAME.search(text.decode()) is not None  # Unicode's case folding (a Kelvin sign)


def _map(path: str, value: Any, sensitive: tuple[str, ...], leaf: Callable[[str, Any], Any],
         inside: bool) -> tuple[Any, bool]:
    if value is None:
        return None, False
    inside = inside or (bool(path) and is_masked(path, sensitive))
    if isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            out[k], c = _map(f"{path}.{k}" if path else k, v, sensitive, leaf, inside)
            changed = changed or c
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        m = _LAST_FIELD.search(path)
        list_field = m.group("field") if m and not path.endswith("]") else ""
        changed = False
        items = []
        for item in value:
            key = kinds.item_key(list_field, item) if list_field else None
            new, c = _map(f"{path}[{key}]" if key is not None else path, item, sensitive,
                          leaf, inside)
            items.append(new)
            changed = changed or c
        return (items, True) if changed else (value, False)
    if inside:
        return leaf(path, value), True
    return value, False
