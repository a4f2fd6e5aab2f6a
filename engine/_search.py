"""Ranked tool search: BM25 (``bm25s``) over what describes a tool.

A tool's document is its name split into words (``read_file`` -> "read file"), its description,
toolkit and tags, and the names and descriptions of its parameters. The index is built once, at
the first search, over every tool (deferred ones included): ``bm25s`` brings numpy and scipy, a
third of a second of imports that an engine never searched need not pay. A query ranks the
whole catalog in well under a millisecond for thousands of tools, then the spec's rules
(deferred tools only with ``include_deferred``, ``filter_tags``, ``filter_kind``) pick from the
ranking. Tools without a single query word score nothing and are not returned.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from a2e.caps.tools._models import ToolDefinition

__all__ = ["ToolIndex", "tool_document"]

_WORD_BREAK = re.compile(r"[_.\-/]+|(?<=[a-z0-9])(?=[A-Z])")


def tool_document(tool: ToolDefinition) -> str:
    parts = [_WORD_BREAK.sub(" ", tool.name), tool.name, tool.description, tool.toolkit or ""]
    parts += list(tool.tags)
    for parameter in tool.input_parameters:
        parts += [_WORD_BREAK.sub(" ", parameter.name), parameter.description or ""]
    return " ".join(p for p in parts if p)


def _stem_words(words: list[str]) -> list[str]:
    return [_stem(word) for word in words]


def _stem(word: str) -> str:
    """A light suffix stripper (plural, -ing, -ed, a final e), so that "files" finds "file" and
    "parsing" finds "parse"; good enough for tool descriptions, no extra dependency."""
    if len(word) <= 3:
        return word
    if word.endswith("ies"):
        word = word[:-3] + "y"
    elif word.endswith("sses") or (
        word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh"))
    ):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


class ToolIndex:
    def __init__(self, tools: Sequence[ToolDefinition]) -> None:
        self.names = [t.name for t in tools]
        self._corpus = [tool_document(t) for t in tools]
        self._retriever: Any = None
        self._building = threading.Lock()

    def _built(self) -> Any:
        with self._building:
            if self._retriever is None:
                import bm25s

                retriever = bm25s.BM25()
                tokens = bm25s.tokenize(
                    self._corpus, stopwords="en", stemmer=_stem_words, show_progress=False
                )
                retriever.index(tokens, show_progress=False)
                self._retriever = retriever
            return self._retriever

    def rank(self, query: str) -> list[str]:
        """Tool names by descending relevance to ``query``; only those that match at all."""
        if not self.names or not query.strip():
            return []
        import bm25s

        retriever = self._built()
        tokens = bm25s.tokenize(
            [query], stopwords="en", stemmer=_stem_words, show_progress=False, return_ids=False
        )
        known = set(retriever.vocab_dict)
        if not any(token in known for token in tokens[0]):
            return []
        query_tokens = [[token for token in tokens[0] if token in known]]
        documents, scores = retriever.retrieve(
            query_tokens, k=len(self.names), show_progress=False, return_as="tuple"
        )
        return [
            self.names[int(index)]
            for index, score in zip(documents[0], scores[0], strict=True)
            if score > 0
        ]
