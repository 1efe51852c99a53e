"""Shared helpers of the test-world tests (a uniquely named module: every test tree has a conftest)."""

import json
import os
import subprocess

WORLD = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKES = os.path.join(WORLD, "fakes")
KYLIN_IMAGE = "airgap-test/kylin:v10sp3"
KYLIN_KERNEL = "4.19.90-52.22.v2207.ky10.x86_64"
NEW_DRIVER = "580.65.06"
OLD_DRIVER = "560.35.03"
TOOLKIT = "1.17.8-1"


def sh(cmd, check=False, **kw):
    return subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=check, **kw
    )


class Container(object):
    def __init__(self, name):
        self.name = name

    def run(self, script, check=False):
        p = sh(["docker", "exec", self.name, "bash", "-c", script])
        if check:
            assert p.returncode == 0, "%s\nstdout:\n%s\nstderr:\n%s" % (script, p.stdout, p.stderr)
        return p

    def read(self, path):
        return self.run("cat %s" % path, check=True).stdout

    def state(self):
        return json.loads(self.read("/etc/fake-nvidia/state.json"))

    def set_state(self, **changes):
        st = self.state()
        st.update(changes)
        self.run("cat > /etc/fake-nvidia/state.json <<'EOF'\n%s\nEOF" % json.dumps(st), check=True)
