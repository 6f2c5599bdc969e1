"""json_query's language, as documented in agent_tools.contracts.web.jsonquery and docs/web.md."""

from __future__ import annotations

from typing import Any

import pytest

from agent_tools.contracts.web.jsonquery import JsonQueryError, json_query

DOC: dict[str, Any] = {
    "store": {
        "name": "Corner shop",
        "items": [
            {"name": "apple", "price": 0.5, "tags": ["fruit", "sale"], "stock": 0},
            {"name": "bread", "price": 2.2, "tags": ["bakery"], "stock": 12},
            {
                "name": "cheese",
                "price": 7.9,
                "tags": ["dairy", "sale"],
                "stock": 3,
                "origin": {"country": "FR"},
            },
            {"name": "dates", "price": 4.0, "tags": [], "stock": 40, "origin": {"country": "TN"}},
        ],
        "odd key": {"id": 9},
    },
    "id": 1,
}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("store.name", "Corner shop"),
        ("$.store.name", "Corner shop"),
        ("store.items[0].name", "apple"),
        ("store.items[-1].name", "dates"),
        ("store.items[1:3].name", ["bread", "cheese"]),
        ("store.items[:2].price", [0.5, 2.2]),
        ("store.items[*].origin.country", ["FR", "TN"]),
        ("store.items[?price > 2 && price < 5].name", ["bread", "dates"]),
        ('store.items[?tags contains "sale"].name', ["apple", "cheese"]),
        ('store.items[?name in ["bread", "dates"]].stock', [12, 40]),
        ('store.items[?name =~ "^[a-c]"] | length', 3),
        ("store.items[?origin].name", ["cheese", "dates"]),
        ("store.items[?!origin].name", ["apple", "bread"]),
        ("store.items[?stock == 0 || price > 7].name", ["apple", "cheese"]),
        ("store.items[?(stock > 10) && !(price > 3)].name", ["bread"]),
        ('store.items[?origin.country == "FR"].name | first', "cheese"),
        ("..id | sort", [1, 9]),
        ("..country", ["FR", "TN"]),
        ('store["odd key"].id', 9),
        ("store.items[0].{name, first_tag: tags[0]}", {"name": "apple", "first_tag": "fruit"}),
        ("store.items[*].{n: name} | limit(2)", [{"n": "apple"}, {"n": "bread"}]),
        ("store.items[*].price | sum", 14.6),
        ("store.items[*].price | max", 7.9),
        ("store.items[*].stock | avg", 13.75),
        ("store.items[*].tags | flatten | unique", ["fruit", "sale", "bakery", "dairy"]),
        ("store.items | sort_by(price) | reverse | first", DOC["store"]["items"][2]),
        ("store | keys", ["name", "items", "odd key"]),
        ("store.items | length", 4),
        ("store.missing", None),
        ("store.items[9]", None),
        ("store.items[*].missing", []),
        ("store.name | type", "string"),
        ("", DOC),
    ],
)
def test_queries(query: str, expected: Any) -> None:
    result = json_query(DOC, query)
    if isinstance(expected, float):
        assert result == pytest.approx(expected)
    else:
        assert result == expected


def test_document_may_be_json_text() -> None:
    assert json_query('{"a": [1, 2]}', "a[1]") == 2
    assert json_query("[3, 1, 2]", "[*] | sort") == [1, 2, 3]


@pytest.mark.parametrize(
    "query",
    [
        "store.items[?",
        "store.items[1",
        "store.name | nosuch",
        "store..",
        "a b",
        "store.name | sum",
        "store | first",
        "x" * 1001,
    ],
)
def test_errors_say_what_is_wrong(query: str) -> None:
    with pytest.raises(JsonQueryError):
        json_query(DOC, query)


def test_bad_document() -> None:
    with pytest.raises(JsonQueryError, match="not valid JSON"):
        json_query("{nope", "a")
