from __future__ import annotations

import pytest

from tenantry.core.errors import UsageError
from tenantry.core.jsontext import json_object


def test_an_object_is_returned_and_empty_text_is_an_empty_object() -> None:
    assert json_object('{"a": 1}', "x") == {"a": 1}
    assert json_object(b'{"a": [1]}', "x") == {"a": [1]}
    assert json_object("", "x") == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [("{", "request body is not valid JSON"), ("[1, 2]", "request body must be a JSON object")],
)
def test_anything_else_is_a_usage_error_naming_the_text(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as info:
        json_object(text, "request body", hint="send an object")
    assert info.value.hint == "send an object"
