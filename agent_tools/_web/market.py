"""The market of a search (``lang``, ``country``) inferred from its query when the caller gave none.

codai's contract: ``lang`` and ``country`` are left unset unless the user asked for a market, and the
gateway infers them from the query. Inference, in this order:

1. operators in the query: ``lang:xx`` names the language; ``site:`` with a country-code domain
   (``site:bahn.de``, ``site:gov.uk``) names the country;
2. the language of the query's words, by py3langid (its model ships inside the package; nothing is
   downloaded), restricted to the languages search engines serve well, and only when the identifier is
   confident and the query has at least two words. A query written only in Han characters is left
   alone (Chinese or Japanese cannot be told apart from kanji);
3. the country of a language spoken mainly in one (de -> DE, ja -> JP); English, Spanish, Portuguese,
   Arabic and Chinese have many markets and name none.

Anything unclear infers nothing: a wrong market hurts results more than none.
"""

from __future__ import annotations

import functools
import re
from typing import Any

LANGUAGES = "en de fr es it pt nl sv da no fi pl cs sk hu ro tr el ru uk bg ja ko zh ar he hi id vi th".split()
# A language spoken mainly in one country names that market.
MAIN_MARKET = {
    "de": "DE", "fr": "FR", "it": "IT", "nl": "NL", "sv": "SE", "da": "DK", "no": "NO", "fi": "FI",
    "pl": "PL", "cs": "CZ", "sk": "SK", "hu": "HU", "ro": "RO", "tr": "TR", "el": "GR", "ru": "RU",
    "uk": "UA", "bg": "BG", "ja": "JP", "ko": "KR", "he": "IL", "hi": "IN", "id": "ID", "vi": "VN",
    "th": "TH",
}  # fmt: skip
# Country-code domains used as generic names (.io, .ai, .tv, ...) say nothing about a market.
_VANITY_TLDS = frozenset("io ai co tv me ly fm gg to cc ws so sh ac im is la md nu sc tk vc gl ms".split())
_TLD_COUNTRY = {"uk": "GB"}
_MIN_CONFIDENCE = 0.7
_LANG_OPERATOR = re.compile(r"(?<!\S)lang:([a-zA-Z]{2})(?:-[a-zA-Z]{2})?(?!\S)")
_SITE_OPERATOR = re.compile(r"(?<!\S)site:(\S+)")
_OPERATOR = re.compile(r"(?<!\S)-?[a-z]+:\S*", re.I)
_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\uac00-\ud7af]")
_HAN = re.compile(r"[\u4e00-\u9fff]")
_LETTERS = re.compile(r"[^\W\d_]{2,}")


@functools.cache
def _identifier() -> Any:
    """py3langid's identifier over our languages, with probabilities normalised (loaded once: about a
    second and the model's arrays, in the first search that needs it)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def _country_from_sites(query: str) -> str | None:
    countries = set()
    for target in _SITE_OPERATOR.findall(query):
        host = re.sub(r"^[a-z]+://", "", target.lower()).split("/", 1)[0].strip("()")
        tld = host.rsplit(".", 1)[-1]
        if len(tld) == 2 and tld.isalpha() and tld not in _VANITY_TLDS:
            countries.add(_TLD_COUNTRY.get(tld, tld.upper()))
    return countries.pop() if len(countries) == 1 else None


def language_of(text: str) -> str | None:
    """The language of a short text, or None when it cannot be told with confidence."""
    words = _LETTERS.findall(text)
    if len(words) < 2 and not _KANA_HANGUL.search(text):
        return None
    if _HAN.search(text) and not _KANA_HANGUL.search(text) and len(_HAN.findall(text)) * 2 > len(text.replace(" ", "")):
        return None  # kanji or hanzi: Japanese and Chinese share them
    # Lone surrogates cannot be encoded for the model; they carry no language either.
    clean = text.encode("utf-8", "ignore").decode("utf-8")
    try:
        lang, confidence = _identifier().classify(clean[:1000])
    except (ValueError, UnicodeError):
        return None
    return str(lang) if confidence >= _MIN_CONFIDENCE and lang in LANGUAGES else None


def infer_market(query: str, *, lang: str | None = None, country: str | None = None) -> tuple[str | None, str | None]:
    """(lang, country) for a search: the caller's values where given, else what the query says."""
    if lang is None:
        m = _LANG_OPERATOR.search(query)
        if m:
            lang = m.group(1).lower()
    if country is None:
        country = _country_from_sites(query)
    if lang is None:
        lang = language_of(_OPERATOR.sub(" ", query))
    if country is None and lang is not None:
        country = MAIN_MARKET.get(lang.split("-")[0])
    return lang, country
