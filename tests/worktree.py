"""The working tree as a fresh clone has it: for the tests that run the README's commands in a new copy
(tests/first_hour, tests/offline_control/test_usb_disk.py)."""

import os
import shutil
import subprocess


def copy_tree(root, dest):
    """Copy root's tracked and new files (nothing git ignores: no build/) to dest, links as links."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        stdout=subprocess.PIPE,
        check=True,
    ).stdout.split(b"\0")
    for rel in files:
        src = os.path.join(root, rel.decode())
        if not rel or not os.path.lexists(src) or os.path.isdir(src):
            continue
        dst = os.path.join(dest, rel.decode())
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
