"""tests/lanes.py: a scenario whose proof ran whole and whose only failure was a clean-up destroy that molecule's own
second destroy completed is not failed; any other failure still is (the DETAILS block molecule prints at the end)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import lanes  # noqa: E402

ARROW = "\u279c"


def details(*actions):
    head = "INFO     Molecule executed 1 scenario\n\nDETAILS\n"
    return head + "".join("control %s %s: Executed: %s\n" % (ARROW, a, o) for a, o in actions) + "\nSCENARIO RECAP\n"


PROOF = [("destroy", "Successful"), ("create", "Successful"), ("prepare", "Successful"), ("converge", "Successful")]


def test_a_destroy_docker_did_not_finish_then_completed_by_molecule_is_not_the_scenarios_failure():
    # What a rehearsal saw (2026-12-07, molecule control at load 18): "tried to kill container, but did not receive an
    # exit event", then molecule's clean-up destroy succeeded.
    text = details(
        *PROOF,
        ("destroy", "Failed (Ansible return code was 2, command was: ansible-playbook ... destroy.yml)"),
        ("cleanup", "Missing playbook (Remove from test_sequence to suppress)"),
        ("destroy", "Successful"),
    )
    assert lanes.only_cleanup_failed(text)
    # As molecule prints it, with colours.
    assert lanes.only_cleanup_failed(text.replace("Executed: Failed", "\x1b[31mExecuted: Failed\x1b[0m"))


def test_a_failed_converge_is_failed():
    text = details(
        ("destroy", "Successful"),
        ("create", "Successful"),
        ("prepare", "Successful"),
        ("converge", "Failed (Ansible return code was 2, command was: ansible-playbook ... converge.yml)"),
        ("cleanup", "Missing playbook (Remove from test_sequence to suppress)"),
        ("destroy", "Successful"),
    )
    assert not lanes.only_cleanup_failed(text)


def test_a_destroy_that_never_completed_is_failed():
    text = details(*PROOF, ("destroy", "Failed (Ansible return code was 2)"))
    assert not lanes.only_cleanup_failed(text)


def test_without_molecules_details_nothing_is_excused():
    assert not lanes.only_cleanup_failed("ERROR no served host for this world\n")
    assert not lanes.only_cleanup_failed(details(*PROOF, ("destroy", "Successful")))
