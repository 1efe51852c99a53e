"""The YAML subset a `vllm serve --config` file uses (the image carries no PyYAML).

Block mappings (nested by indentation), block lists (`- item`), flow lists/maps (`[a, b]`,
`{"k": 1}`), plain/quoted scalars with YAML 1.1 booleans, ints, floats and null, `#` comments.
Anything else raises ValueError instead of being guessed.
"""
import json
import re

_BOOL = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def scalar(text):
    text = text.strip()
    if not text:
        return None
    if text[0] in "\"'":
        if len(text) < 2 or text[-1] != text[0]:
            raise ValueError("unterminated string: %s" % text)
        if text[0] == '"':
            return json.loads(text)
        return text[1:-1].replace("''", "'")
    if text[0] in "[{":
        return _flow(text)
    low = text.lower()
    if low in _BOOL:
        return _BOOL[low]
    if low in ("null", "~"):
        return None
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", text):
        return float(text)
    return text


def _flow(text):
    try:
        return json.loads(text)
    except ValueError:
        pass
    if text[0] == "[" and text[-1] == "]":
        inner = text[1:-1].strip()
        return [scalar(p) for p in _split(inner)] if inner else []
    raise ValueError("unsupported flow collection: %s" % text)


def _split(text):
    parts, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return parts


def _strip_comment(line):
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def load(text):
    lines = []
    for raw in text.splitlines():
        if raw.strip() in ("---", "..."):
            continue
        line = _strip_comment(raw).rstrip()
        if line.strip():
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise ValueError("tabs are not allowed for indentation")
            lines.append((len(line) - len(line.lstrip()), line.strip()))
    if not lines:
        return None
    value, pos = _block(lines, 0, lines[0][0])
    if pos != len(lines):
        raise ValueError("bad indentation near: %s" % lines[pos][1])
    return value


def _block(lines, pos, indent):
    if lines[pos][1].startswith("- ") or lines[pos][1] == "-":
        out = []
        while pos < len(lines) and lines[pos][0] == indent and lines[pos][1][:1] == "-":
            item = lines[pos][1][1:].strip()
            pos += 1
            if item:
                out.append(scalar(item))
            elif pos < len(lines) and lines[pos][0] > indent:
                val, pos = _block(lines, pos, lines[pos][0])
                out.append(val)
            else:
                out.append(None)
        return out, pos
    out = {}
    while pos < len(lines) and lines[pos][0] == indent:
        m = re.match(r"""^("[^"]*"|'[^']*'|[^:]+?)\s*:(\s+(.*))?$""", lines[pos][1])
        if not m:
            raise ValueError("not a mapping entry: %s" % lines[pos][1])
        key = scalar(m.group(1))
        rest = (m.group(3) or "").strip()
        pos += 1
        if rest:
            out[key] = scalar(rest)
        elif pos < len(lines) and (lines[pos][0] > indent or
                                   (lines[pos][0] == indent and lines[pos][1][:1] == "-")):
            out[key], pos = _block(lines, pos, lines[pos][0])
        else:
            out[key] = None
    return out, pos
