"""Read one tier file into plain data, within bounded time and memory, remembering where each value came from.

A tier file is untrusted input: it may be huge, binary, in another encoding, nested thousands of
levels deep, or a few hundred bytes of YAML aliases that expand to gigabytes ("billion laughs").
Every one of those is refused here, with a :class:`ConfigError` naming the file and the problem,
before any Python object of the document is built:

- the file is read up to :data:`MAX_FILE_BYTES` + 1 bytes, never more;
- the bytes must be UTF-8 text (a UTF-8 byte-order mark is accepted and dropped): NUL bytes,
  UTF-16/UTF-32, invalid UTF-8 (Latin-1 saved files) and control characters are refused;
- nesting is checked while the parser's events are composed into nodes (:data:`MAX_DEPTH`), so
  the recursive composer never goes deeper than that;
- aliases are allowed (an anchor can share a block of settings), but the document's size and
  depth *with aliases expanded* are computed on the node graph, each node once, and refused over
  :data:`MAX_VALUES` values or :data:`MAX_DEPTH` levels; an alias to an enclosing node (a cycle)
  is refused.

Only then are Python values built, by :func:`_Builder` rather than PyYAML's constructor, so that:

- a key given twice in one mapping is an error naming the key path and both lines (YAML would
  keep the last one silently);
- keys are kept as the text written (`on:` stays the key ``"on"``, not ``True``);
- only the core scalar types are accepted (string, integer, float, boolean, null); timestamps
  are not resolved (a date stays the text written) and other tags (``!!binary``, ``!!set``,
  ``!!python/...``) are refused;
- every value's origin is kept (:class:`Origin`: file, line, and for a plain scalar that YAML 1.1
  turned into something other than its text, the text), so errors can show what the user wrote
  (``012345670123``, ``no``, ``1.10``) rather than what YAML made of it.

See docs/decisions/0036-bounded-tier-file-reading.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from gpufarm.config.errors import ConfigError, ConfigIssue
from gpufarm.debug import kind_of

MAX_FILE_BYTES = 1024 * 1024
"""Largest tier file read (1 MiB): the presets are a few KiB; the limit bounds reading and parsing."""

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists accepted (aliases expanded); the model nests under 10."""

MAX_VALUES = 20_000
"""Most values (scalars, mappings and lists, aliases expanded) a tier file may hold; the presets
hold a few hundred. Bounds the parsing time of a large file and the memory of an alias bomb."""

Path_ = tuple[int | str, ...]
"""A place in the document: mapping keys and list indexes from the root."""

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_SCALAR_TAGS = {
    _STR: "a string",
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "true or false",
    "tag:yaml.org,2002:null": "null",
}
# The characters YAML 1.1 allows in a stream (yaml.reader.Reader.NON_PRINTABLE, PyYAML 6.0).
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TOO_MANY = f"holds more than {MAX_VALUES:,} values (YAML aliases expanded); a tier file holds a few hundred"
_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)


@dataclass(frozen=True)
class Origin:
    """Where a value of the document was written: file (as shown to the user) and line (from 1).

    `text` is set for a plain (unquoted) scalar that YAML 1.1 read as something that does not
    print back as what was written: ``012345670123`` (octal), ``no`` (false), ``1.10`` (1.1).
    """

    file: str
    line: int
    text: str | None = None
    read_as: str | None = None
    """What YAML made of `text`, in JSON spelling (``1402433619``, ``false``, ``1.1``)."""


@dataclass
class Document:
    """A tier file's settings and the origin of each value, by its place in the document."""

    data: dict[str, Any]
    origins: dict[Path_, Origin] = field(default_factory=dict)
    via: dict[str, str] = field(default_factory=dict)
    """For each file named in `origins`: the `extends` chain that reached it
    (``my.yaml extends production``)."""


def read_document(file: Path, *, source: str, shown: str | None = None) -> Document:
    """Read and parse `file`; raise :class:`ConfigError` (naming `source`) when it is not a tier document.

    `shown` is how origins name the file (default: `file` as given).
    """
    try:
        if file.is_dir():
            _fail(source, "is a folder, not a tier file (give the path of a .yaml file)")
        with file.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        _fail(source, f"cannot read the file: {exc.strerror}")
    return parse_document(raw, source=source, shown=shown or str(file))


def parse_document(raw: bytes, *, source: str, shown: str) -> Document:
    """Parse the bytes of a tier file (see the module docstring for what is refused)."""
    text = _decode(raw, source)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except _TooDeepError as exc:
        _fail(source, f"nests deeper than {MAX_DEPTH} levels at line {exc.line}")
    except _TooManyError:
        _fail(source, _TOO_MANY)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        _fail(source, f"is not valid YAML{where}: {problem}")
    finally:
        loader.dispose()
    if root is None:
        return Document(data={})
    _measure(root, source)
    builder = _Builder(loader, shown)
    data = builder.build(root, ())
    if builder.issues:
        raise ConfigError(builder.issues, source=source)
    if not isinstance(data, dict):
        _fail(source, f"must be a mapping of settings, got {kind_of(data)}")
    return Document(data=data, origins=builder.origins)


def _fail(source: str, message: str) -> NoReturn:
    raise ConfigError([ConfigIssue(path="", message=message)], source=source)


def _decode(raw: bytes, source: str) -> str:
    if len(raw) > MAX_FILE_BYTES:
        _fail(source, f"is larger than {MAX_FILE_BYTES // 1024} KiB; a tier file is a few KiB of YAML")
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            _fail(
                source, f"is {encoding} text (it starts with a {encoding} byte-order mark); save it as UTF-8"
            )
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    if (nul := raw.find(b"\x00")) >= 0:
        line, column = _position(raw, nul)
        # ASCII text saved as UTF-16 has a NUL beside every character.
        if raw[1::2].count(0) > len(raw) // 4 or raw[0::2].count(0) > len(raw) // 4:
            _fail(source, "looks like UTF-16 text (every other byte is NUL); save it as UTF-8")
        _fail(source, f"contains a NUL byte at line {line}, column {column}: it is binary, not YAML text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(raw, exc.start)
        _fail(
            source,
            f"is not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line}, column {column} is not "
            "valid UTF-8 (saved as Latin-1 or Windows-1252?); save it as UTF-8",
        )
    if bad := _NON_PRINTABLE.search(text):
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        _fail(
            source,
            f"contains the control character U+{ord(bad.group()):04X} at line {line}, column {column}: "
            "a tier file is YAML text",
        )
    return text


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    """Line and column (from 1; column in bytes) of a byte offset."""
    line_start = raw.rfind(b"\n", 0, offset) + 1
    return raw.count(b"\n", 0, offset) + 1, offset - line_start + 1


# --------------------------------------------------------------------------- parsing


class _TooDeepError(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _TooManyError(Exception):
    pass


class _Resolver(Resolver):
    """YAML 1.1 implicit types, without timestamps: a date in a string field stays its text."""

    yaml_implicit_resolvers = {  # noqa: RUF012 (PyYAML's own class attribute, replaced whole)
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()
    }


class _DepthComposer(Composer):
    """PyYAML's composer, which recurses once per level: stop at :data:`MAX_DEPTH` levels, and
    at :data:`MAX_VALUES` nodes (before the parser reads the rest of a large file)."""

    _depth = 0
    _values = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        self._values += 1
        try:
            if self._values > MAX_VALUES:
                raise _TooManyError
            if self._depth > MAX_DEPTH:
                raise _TooDeepError(self.peek_event().start_mark.line + 1)  # type: ignore[attr-defined]
            node = super().compose_node(parent, index)
            assert node is not None  # an event was there: the parser checked
            return node
        finally:
            self._depth -= 1


class _Loader(Reader, Scanner, Parser, _DepthComposer, SafeConstructor, _Resolver):
    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def dispose(self) -> None:
        """Drop parser state (PyYAML's loaders do the same after loading)."""
        self.state = None


def _measure(root: Node, source: str) -> None:
    """Refuse a node graph that is too big, too deep or cyclic once aliases are expanded.

    Each node is measured once (aliases share nodes), and the walk stops at :data:`MAX_DEPTH`,
    so this is linear in the file and never recurses deeper than the limit.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (height, values)
    open_nodes: set[int] = set()

    def walk(node: Node, level: int) -> tuple[int, int]:
        key = id(node)
        if key in open_nodes:
            _fail(
                source, f"has a YAML alias to an enclosing value at line {node.start_mark.line + 1} (a cycle)"
            )
        height, count = sizes.get(key) or (0, 0)
        if key not in sizes:
            if level > MAX_DEPTH:
                _fail(source, f"nests deeper than {MAX_DEPTH} levels (YAML aliases expanded)")
            height, count = 1, 1
            if isinstance(node, MappingNode | SequenceNode):
                open_nodes.add(key)
                children = (
                    [part for pair in node.value for part in pair]
                    if isinstance(node, MappingNode)
                    else node.value
                )
                for child in children:
                    child_height, child_count = walk(child, level + 1)
                    height, count = max(height, child_height + 1), count + child_count
                    if count > MAX_VALUES:
                        break
                open_nodes.discard(key)
            sizes[key] = (height, count)
        if level + height - 1 > MAX_DEPTH:
            _fail(source, f"nests deeper than {MAX_DEPTH} levels (YAML aliases expanded)")
        if count > MAX_VALUES:
            _fail(source, _TOO_MANY)
        return height, count

    walk(root, 1)


class _Builder:
    """Plain Python values from a measured node graph, with origins and duplicate keys found."""

    def __init__(self, loader: _Loader, shown: str) -> None:
        self.loader = loader
        self.shown = shown
        self.origins: dict[Path_, Origin] = {}
        self.issues: list[ConfigIssue] = []
        self._reported: set[str] = set()

    def build(self, node: Node, path: Path_) -> Any:
        line = node.start_mark.line + 1
        if isinstance(node, ScalarNode):
            return self._scalar(node, path, line)
        self.origins[path] = Origin(self.shown, line)
        if isinstance(node, SequenceNode):
            if node.tag != _SEQ:
                return self._unsupported(node, path, line)
            return [self.build(child, (*path, index)) for index, child in enumerate(node.value)]
        if node.tag != _MAP:
            return self._unsupported(node, path, line)
        out: dict[str, Any] = {}
        explicit: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                self._merge_in(out, value_node, path)
                continue
            if not isinstance(key_node, ScalarNode):
                self._issue(path, f"has a {_kind(key_node)} as a key at line {key_node.start_mark.line + 1}")
                continue
            key = str(key_node.value)
            key_line = key_node.start_mark.line + 1
            if key in explicit:
                self._issue(
                    (*path, key),
                    f"is given twice, at lines {explicit[key]} and {key_line}; YAML would keep only the "
                    "second: merge them into one",
                )
                continue
            explicit[key] = key_line
            if key in out:  # merged in with '<<': this key replaces it, origins included
                self._forget((*path, key))
            out[key] = self.build(value_node, (*path, key))
        return out

    def _merge_in(self, out: dict[str, Any], value: Node, path: Path_) -> None:
        """`<<: *anchor` (or a list of them): keys not set explicitly come from the anchors,
        the first anchor winning (https://yaml.org/type/merge.html)."""
        sources = value.value if isinstance(value, SequenceNode) else [value]
        for source in reversed(sources):
            if not isinstance(source, MappingNode):
                self._issue(path, f"merges a {_kind(source)} with '<<' at line {source.start_mark.line + 1}")
                continue
            merged = self.build(source, path)
            if isinstance(merged, dict):
                out.update(merged)

    def _scalar(self, node: ScalarNode, path: Path_, line: int) -> Any:
        if node.tag not in _SCALAR_TAGS:
            return self._unsupported(node, path, line)
        try:
            value = self.loader.construct_object(node)
        except (ValueError, KeyError, yaml.YAMLError):  # an explicit tag on a value it does not fit
            self._issue(path, f"has {node.value!r} tagged {node.tag} at line {line}, which it is not")
            return None
        read_as = json.dumps(value)
        # An empty value (`name:`) is null as written: nothing to show instead.
        if node.style is None and node.value and not isinstance(value, str) and read_as != node.value:
            self.origins[path] = Origin(self.shown, line, str(node.value), read_as)
        else:
            self.origins[path] = Origin(self.shown, line)
        return value

    def _unsupported(self, node: Node, path: Path_, line: int) -> None:
        self._issue(
            path,
            f"has the YAML tag {node.tag} at line {line}; a tier file holds strings, numbers, "
            "true/false, null, lists and mappings",
        )

    def _issue(self, path: Path_, message: str) -> None:
        # A node reached through several aliases is built once per place: report it at the first.
        if message not in self._reported:
            self._reported.add(message)
            self.issues.append(ConfigIssue(path=render_path(path), message=message))

    def _forget(self, path: Path_) -> None:
        """Drop origins under `path` (a merged-in value that an explicit key replaces)."""
        for known in [p for p in self.origins if p[: len(path)] == path]:
            del self.origins[known]


def _kind(node: Node) -> str:
    return (
        "mapping" if isinstance(node, MappingNode) else "list" if isinstance(node, SequenceNode) else "value"
    )


def render_path(path: Path_) -> str:
    """A document place as the config errors spell it: ``node_pools[0].gpu_limit``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
