"""Where each value of a protobuf text-format file is: its field path, line, column and
text, found with protobuf's own tokenizer. Comments, strings, one-line or many-line
messages, `{}` or `<>` blocks and the optional `:` before a message are read the way
protobuf reads them, so an edit can replace exactly one value and leave every other
character (and every line number) of the file as the user wrote it.
"""
from __future__ import annotations

import dataclasses

from google.protobuf import text_encoding
from google.protobuf.text_format import Tokenizer

_OPEN = {"{": "}", "<": ">"}


@dataclasses.dataclass(frozen=True)
class Span:
    """A token: 0-based line and column, and its text as written."""

    line: int
    column: int
    text: str

    @property
    def end(self) -> int:
        return self.column + len(self.text)


@dataclasses.dataclass(frozen=True)
class Value:
    """One scalar value of a field. `path` names the enclosing messages and the field
    ("layer", "data_param", "source"); `blocks` numbers each enclosing message block
    in the order the blocks open, so values with the same blocks[0] belong to the
    same top-level message (one `layer { }`)."""

    path: tuple[str, ...]
    blocks: tuple[int, ...]
    name: Span
    value: Span

    @property
    def string(self) -> str:
        """The value unquoted and unescaped when it is a string, else as written."""
        raw = self.value.text
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
            return text_encoding.CUnescape(raw[1:-1]).decode("utf-8", "replace")
        return raw


def scan(text: str) -> list[Value]:
    """Every scalar value in `text`, in file order. Malformed input ends the scan
    where it stops making sense; the C++ parser reports such files with a line."""
    tokens = _tokens(text)
    out: list[Value] = []
    path: list[str] = []
    blocks: list[int] = []
    opened = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.text in ("}", ">"):
            if path:
                path.pop()
                blocks.pop()
            i += 1
            continue
        if not _is_name(tok.text):
            i += 1   # separators (`;` `,`) and anything protobuf would reject
            continue
        name, i = tok, i + 1
        colon = i < len(tokens) and tokens[i].text == ":"
        i += colon
        if i >= len(tokens):
            break
        nxt = tokens[i]
        if nxt.text in _OPEN:
            path.append(name.text)
            blocks.append(opened)
            opened += 1
            i += 1
        elif colon and nxt.text == "[":
            i += 1
            while i < len(tokens) and tokens[i].text != "]":
                if tokens[i].text != ",":
                    out.append(Value((*path, name.text), tuple(blocks), name, tokens[i]))
                i += 1
            i += 1
        elif colon:
            out.append(Value((*path, name.text), tuple(blocks), name, nxt))
            i += 1
            while i < len(tokens) and _is_string(tokens[i].text) and _is_string(nxt.text):
                i += 1   # "a" "b": adjacent strings concatenate; the first one stands in
    return out


def replace_spans(lines: list[str], edits: list[tuple[Span, str]]) -> list[str]:
    """`lines` with each span replaced by its new text; other characters stay."""
    out = list(lines)
    for span, new in sorted(edits, key=lambda e: (e[0].line, -e[0].column)):
        line = out[span.line]
        out[span.line] = line[:span.column] + new + line[span.end:]
    return out


def quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tokens(text: str) -> list[Span]:
    tokenizer = Tokenizer(text.splitlines(keepends=True))
    out = []
    while not tokenizer.AtEnd():
        # The tokenizer keeps the current token's position in _line and _column only.
        out.append(Span(tokenizer._line, tokenizer._column, tokenizer.token))
        tokenizer.NextToken()
    return out


def _is_name(tok: str) -> bool:
    return tok[:1].isalpha() or tok[:1] == "_"


def _is_string(tok: str) -> bool:
    return tok[:1] in "\"'" and len(tok) >= 2
