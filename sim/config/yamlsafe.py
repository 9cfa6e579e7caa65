"""Read a user's YAML without trusting it: bounded size, UTF-8 only, bounded expansion.

    read_text(path, what)  -> str      a regular file <= MAX_FILE_BYTES of UTF-8 text
    parse(text, where)     -> object   YAML with <= MAX_NODES values after alias expansion,
                                       <= MAX_DEPTH levels, no duplicate keys

Every failure is an InputError of one line naming the file (and the line). A FIFO or a
device is refused before it is opened for reading (a FIFO would block, /dev/zero never
ends); an alias bomb is refused from its node graph before any value is built.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import yaml

from traces import files
from traces.errors import InputError, clip

MAX_FILE_BYTES = 1 << 20  # a scenario is a page of YAML; 1 MiB leaves room for long mixes
MAX_NODES = 100_000  # values after alias expansion (a scenario has a few hundred)
MAX_DEPTH = 64  # nesting levels (a scenario has about six)

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def read_bytes(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The file's bytes, refusing anything but a regular file of at most ``limit`` bytes
    (traces/files.py, shared by every command that reads a user's file)."""
    return files.read_bytes(path, what, limit)


def decode(data: bytes, where: str) -> str:
    """UTF-8 text (an optional BOM dropped); other encodings named in the message."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            raise InputError(f"{where}: the file is {enc} text; save it as UTF-8")
    if b"\0" in data:
        raise InputError(f"{where}: the file contains NUL bytes (binary, or UTF-16/32 without "
                         "a byte-order mark); expected UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(f"{where}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} "
                         f"at offset {e.start}); save the file as UTF-8") from None


def read_text(path: Path, what: str = "scenario") -> str:
    return decode(read_bytes(path, what), Path(path).name)


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (YAML says they are an error; PyYAML keeps the
    last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}  # key -> the line it was first given on
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {clip(repr(key))} (first on line {seen[key]})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        """Integers as YAML 1.2 reads them: 064 is 64 (YAML 1.1, PyYAML's, reads a leading
        zero as octal: engine.max_num_seqs=064 ran 52); 0o100 and 0x40 keep their base."""
        text = self.construct_scalar(node).replace("_", "")
        digits = text.lstrip("+-")
        if len(digits) > 1 and digits[0] == "0" and digits.isdigit():
            return int(text, 10)
        return super().construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
Loader = _Loader  # for a value given on the command line (sim/plan/grid.py)


def _expanded_size(root: yaml.Node, where: str) -> None:
    """Count values after alias expansion (memoised per node, so linear in the graph)."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    open_: set[int] = set()  # nodes whose children are being counted
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        kids = _children(node)
        if not done and kids:
            if id(node) in open_:
                raise InputError(f"{where}: a YAML alias refers to a node that contains it")
            open_.add(id(node))
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in sizes)
            continue
        open_.discard(id(node))
        sizes[id(node)] = 1 + sum(sizes.get(id(k), 1) for k in kids)
        depths[id(node)] = 1 + max((depths.get(id(k), 1) for k in kids), default=0)
        if sizes[id(node)] > MAX_NODES:
            raise InputError(f"{where}: expands to more than {MAX_NODES:,} values (YAML "
                             "aliases); a scenario needs far fewer")
        if depths[id(node)] > MAX_DEPTH:
            raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep")


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def parse(text: str, where: str):
    """YAML ``text`` as Python values (None for an empty document)."""
    loader = None
    try:
        loader = _Loader(text)  # its reader refuses control characters here (ReaderError)
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, where)
        return loader.construct_document(node)
    except yaml.reader.ReaderError as e:  # no mark: the character and where it stands
        raise InputError(f"{where}: a control character ({e.character!r}) at character "
                         f"{e.position + 1}; YAML allows printable text only") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise InputError(f"{where}: {at}{clip(problem)}") from None
    except RecursionError:
        raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    finally:
        if loader is not None:
            loader.dispose()
