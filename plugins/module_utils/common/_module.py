# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one module base: every module's main() is its work, under ``@ansible_module(argument_spec, ...)``.

The decorator builds the AnsibleModule (every module of the collection supports check mode), calls the work with
it and exits with the dict the work returns. It is the one place where an error becomes fail_json:

- an exception of ``errors`` fails with its message and, when it carries them, its result keys (a ``details`` dict);
- an exception of ``worded`` (IOError/OSError unless the module says otherwise) fails with ``wording``, a
  str.format template of the error (``{0}``) and the module's parameters (``{name}``); a module that words none
  leaves them tracebacks (a bug to see).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools

from ansible.module_utils.basic import AnsibleModule


def fail_details(exc):
    """The result keys an error carries beside its message (its ``details`` dict; none for a plain error)."""
    return dict(getattr(exc, "details", None) or {})


def ansible_module(argument_spec, errors=(), wording=None, worded=(IOError, OSError), **module_kwargs):
    """Decorator: ``main(module) -> result`` becomes the module's ``main()`` (see the module docstring)."""
    errors = tuple(errors)
    worded = tuple(worded) if wording else ()

    def decorate(work):
        @functools.wraps(work)
        def main():
            module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True, **module_kwargs)
            try:
                result = work(module)
            except errors as exc:
                module.fail_json(msg=str(exc), **fail_details(exc))
            except worded as exc:
                module.fail_json(msg=wording.format(exc, **module.params))
            module.exit_json(**result)

        return main

    return decorate
