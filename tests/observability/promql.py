"""Series names a PromQL expression reads (the rule tests and the live check, live_check.py)."""

import re

KEYWORDS = {
    'and',
    'or',
    'unless',
    'by',
    'without',
    'on',
    'ignoring',
    'group_left',
    'group_right',
    'offset',
    'bool',
    'inf',
    'nan',
}


def metric_names(expr):
    """Series names an expression reads (strings, label matchers, label lists and durations removed)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r'\{[^}]*\}', ' ', e)
    e = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', ' ', e)
    e = re.sub(r'\[[^\]]*\]', ' ', e)
    e = re.sub(r'\boffset\s+\w+', ' ', e)
    found = set()
    for m in re.finditer(r'(?<![\w:.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?', e):
        if m.group(2) or m.group(1).lower() in KEYWORDS:
            continue
        found.add(m.group(1))
    return found
