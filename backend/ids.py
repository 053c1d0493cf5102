"""Opaque, time-ordered identifiers.

Ids are ULID-style strings (48-bit millisecond time + 80 random bits, Crockford base32), so
they sort roughly by creation time. Nothing may rely on that for correctness: ordering rules
always use explicit timestamps and only fall back to the id to break exact ties.
"""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id() -> str:
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
