"""tests/role_readme.py: the role READMEs are generated from the argument specs and --check catches drift."""

import importlib.util
import os

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_spec = importlib.util.spec_from_file_location("role_readme", os.path.join(ROOT, "tests", "role_readme.py"))
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)

SPECS = {
    "argument_specs": {
        "main": {
            "short_description": "Do the thing.",
            "description": [
                "Reads O(demo_path) and writes C(/etc/demo) with M(airgap.vllm.stage_state).",
                "A second paragraph with B(bold) and I(italic) and L(a link, https://example.org).",
            ],
            "options": {
                "demo_path": {"type": "path", "required": True, "description": "Where the input is."},
                "demo_mode": {
                    "type": "str",
                    "default": "fast",
                    "choices": ["fast", "slow"],
                    "description": "How; a | in text is escaped.",
                },
                "demo_keys": {
                    "type": "list",
                    "elements": "str",
                    "default": [],
                    "no_log": True,
                    "description": "Secret keys.",
                },
                "demo_disks": {
                    "type": "list",
                    "elements": "dict",
                    "default": [{"path": "/opt", "gb": 1}],
                    "description": "Disks.",
                    "options": {"path": {"type": "path", "required": True, "description": "A path."}},
                },
            },
        }
    }
}


@pytest.fixture
def roles(tmp_path):
    role = tmp_path / "roles" / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(SPECS))
    (role / "tasks" / "main.yml").write_text(
        "- name: Install\n  ansible.builtin.import_tasks: install.yml\n  tags: [demo, demo_install]\n"
    )
    return tmp_path / "roles"


def test_readme_holds_purpose_variables_and_example(roles):
    assert R.main(["--roles-dir", str(roles)]) == 0
    text = (roles / "demo" / "README.md").read_text()
    assert text.startswith("# airgap.vllm.demo\n\nDo the thing.\n")
    assert "- Reads `demo_path` and writes `/etc/demo` with `airgap.vllm.stage_state`." in text
    assert "**bold** and *italic* and [a link](https://example.org)" in text
    assert "| `demo_path` | path | **required** | Where the input is. |" in text
    assert "| `demo_mode` | str | `fast` | How; a \\| in text is escaped. Choices: `fast`, `slow`. |" in text
    assert "| `demo_keys` | list of str | `[]` | Secret keys. Secret: never logged. |" in text
    assert '| `demo_disks` | list of dict | `[{"gb": 1, "path": "/opt"}]` | Disks. |' in text
    assert "| `demo_disks[].path` | path | **required** | A path. |" in text
    assert "The role's own tags: `demo`, `demo_install`." in text
    assert "    - role: airgap.vllm.demo\n      vars:\n        demo_path: <path>  # Where the input is" in text


def test_check_fails_on_a_missing_or_stale_readme_and_the_hand_part_is_kept(roles, capsys):
    assert R.main(["--check", "--roles-dir", str(roles)]) == 1
    assert "README.md is missing" in capsys.readouterr().err
    R.main(["--roles-dir", str(roles)])
    readme = roles / "demo" / "README.md"
    text = readme.read_text().replace(R.HAND_BEGIN + "\n", R.HAND_BEGIN + "\nWritten by a person.\n")
    readme.write_text(text)
    assert R.main(["--check", "--roles-dir", str(roles)]) == 0, "the hand-written part is not drift"
    specs = roles / "demo" / "meta" / "argument_specs.yml"
    specs.write_text(specs.read_text().replace("Where the input is.", "Where the input lives."))
    assert R.main(["--check", "--roles-dir", str(roles)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert R.main(["--roles-dir", str(roles)]) == 0
    assert "Written by a person." in readme.read_text() and "Where the input lives." in readme.read_text()


def test_a_role_without_argument_specs_is_an_error(roles, capsys):
    (roles / "bare" / "tasks").mkdir(parents=True)
    assert R.main(["--check", "--roles-dir", str(roles)]) == 1
    assert "bare:" in capsys.readouterr().err
