"""The tasks that changed something, by host, in an ansible-playbook output of the default stdout callback.

changed_tasks.py OUTPUT_FILE     prints {"HOST": ["ROLE : TASK", ...]} as JSON
"""

import json
import re
import sys

TASK = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(.*)\] \**$")
CHANGED = re.compile(r"^changed: \[([^\]]+)\]")


def changed_tasks(text):
    out = {}
    task = None
    for line in text.splitlines():
        m = TASK.match(line)
        if m:
            task = m.group(1)
            continue
        m = CHANGED.match(line)
        if m and task is not None:
            names = out.setdefault(m.group(1), [])
            if task not in names:
                names.append(task)
    return out


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[0]) as f:
        print(json.dumps(changed_tasks(f.read())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
