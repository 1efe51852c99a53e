"""Run the real airgap.vllm.bundle_stage (or bundle_verify) module in this process and report its io.

Usage: python3 bench/stage_child.py MODULE ARGS.json [--die-at FRACTION]
  MODULE   bundle_stage | bundle_verify (plugins/modules/<MODULE>.py, run as Ansible would: argv[1] is
           the args file {"ANSIBLE_MODULE_ARGS": {...}})
  --die-at the process SIGKILLs itself once a staged file's progress passes FRACTION of its size (an
           interruption mid-copy, at a deterministic point; the .part stays as a kill leaves it)

Prints one JSON line: {"result": <module result>, "io": <io delta of the module run>,
"local_io": <io of reads from the destination disk: .part prefix re-hash and staged-file checks>}.
The medium's share is io - local_io: the only other files the module reads are the bundle's.
Ansible and the module_utils are imported before the first snapshot, so imports are not counted.
"""

import io
import json
import os
import runpy
import signal
import sys

import benchlib as B

B.import_collection()
from ansible.module_utils import basic as _basic  # noqa: E402  (imported before the io snapshot)
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_stage  # noqa: E402


def main(argv):
    module, args_file = argv[0], argv[1]
    die_at = float(argv[argv.index("--die-at") + 1]) if "--die-at" in argv else None
    local = {}

    def add_local(before):
        for k, v in B.io_delta(before, B.proc_io()).items():
            local[k] = local.get(k, 0) + v

    # Count (not change) the reads the module makes of the destination disk.
    real_probe, real_current = _bundle_stage.probe_part, _bundle_stage.dest_is_current

    def probe_part(*a, **kw):
        before = B.proc_io()
        try:
            return real_probe(*a, **kw)
        finally:
            add_local(before)

    def dest_is_current(*a, **kw):
        before = B.proc_io()
        try:
            return real_current(*a, **kw)
        finally:
            add_local(before)

    _bundle_stage.probe_part, _bundle_stage.dest_is_current = probe_part, dest_is_current
    if die_at is not None:
        real_update = _bundle_stage.Progress.update

        def update(self, n):
            real_update(self, n)
            if self.total and self.done >= die_at * self.total:
                os.kill(os.getpid(), signal.SIGKILL)

        _bundle_stage.Progress.update = update

    path = os.path.join(B.ROOT, "plugins", "modules", module + ".py")
    assert _basic.AnsibleModule  # the module's own import is then a dictionary lookup
    sys.argv = [path, args_file]
    out = io.StringIO()
    real_stdout = sys.stdout
    before = B.proc_io()
    sys.stdout = out
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit:
        pass
    finally:
        sys.stdout = real_stdout
    delta = B.io_delta(before, B.proc_io())
    text = out.getvalue()
    res = json.loads(text[text.index("{") :]) if "{" in text else {"failed": True, "msg": text}
    print(json.dumps({"result": res, "io": delta, "local_io": local}))
    return 1 if res.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
