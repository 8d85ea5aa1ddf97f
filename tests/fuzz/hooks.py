"""The schema fuzzer's hooks (tests/test_fuzz_openapi.py loads them through SCHEMATHESIS_HOOKS).

JSON Schema counts ``5.0`` as an integer, and schemathesis draws integers spelled so as valid
input; the API takes an integer spelled as one only (``"k": 5.0`` is a 422 naming ``k``, as
tests/test_strict_input.py checks). So the fuzzer's bodies spell whole numbers as integers:
nothing else changes, and no case turns from invalid to valid (a fraction stays a fraction, a
number out of range stays out of it)."""

from __future__ import annotations

from typing import Any

import schemathesis

EXACT = 2**53  # every whole float up to this size is an exact integer


def _integers_spelled_as_integers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT:
        return int(value)
    if isinstance(value, list):
        return [_integers_spelled_as_integers(item) for item in value]
    if isinstance(value, dict):
        return {key: _integers_spelled_as_integers(item) for key, item in value.items()}
    return value


@schemathesis.hook
def map_body(context: Any, body: Any) -> Any:
    return _integers_spelled_as_integers(body)
