# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel the next boot starts, read offline from grub2's files, and what the driver stage does about it.

grub2 on RHEL 8 / Kylin V10 boots `next_entry` (grub2-reboot, once) or else the `saved_entry` of its
environment block (/boot/grub2/grubenv) when /etc/default/grub says GRUB_DEFAULT=saved (RHEL's default), or the
entry GRUB_DEFAULT names; an empty choice is entry 0. An entry is named by its id, its title or its index in the
menu. With BLS (GRUB_ENABLE_BLSCFG=true, grub.cfg calls `blscfg`) the menu is /boot/loader/entries/*.conf,
id = the file name without .conf (<machine-id>-<kernel>), newest version first; without BLS it is grub.cfg's
menuentry blocks in file order. The kernel is the entry's `linux /vmlinuz-<kernel>` line. `grubby
--default-kernel` (/boot/vmlinuz-<kernel>) is only the fallback when the files name nothing, so grubby is not
required. next_kernel_plan() decides: nothing, build the module for that kernel, fail, or ignore.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

GRUBENV = '/boot/grub2/grubenv'
DEFAULT_GRUB = '/etc/default/grub'
GRUB_CFG = '/boot/grub2/grub.cfg'
BLS_DIR = '/boot/loader/entries'
MODULES_DIR = '/lib/modules'
KERNEL_SRC_DIR = '/usr/src/kernels'
MODES = ('build', 'fail', 'ignore')

_MENUENTRY = re.compile(r'''^\s*menuentry\s+(?:'([^']*)'|"([^"]*)"|(\S+))(.*?)\{\s*$''')
_ENTRY_ID = re.compile(r'''(?:--id|\$menuentry_id_option)\s+(?:'([^']*)'|"([^"]*)"|(\S+))''')
_LINUX = re.compile(r'^\s*linux(?:16|efi)?\s+(\S+)')
_MODINFO_VERSION = re.compile(rb'(?:^|\x00)version=([0-9][^\x00]*)\x00')


def parse_grubenv(text):
    """key=value pairs of a grub environment block (comments and the '#' padding ignored)."""
    env = {}
    for line in (text or '').splitlines():
        if line.startswith('#'):
            continue
        key, sep, value = line.partition('=')
        if sep and key:
            env[key] = value
    return env


def grub_default(text):
    """GRUB_DEFAULT of /etc/default/grub (quotes removed), None when unset or the file is absent."""
    value = None
    for line in (text or '').splitlines():
        m = re.match(r'''^\s*(?:export\s+)?GRUB_DEFAULT=(?:"([^"]*)"|'([^']*)'|(\S*))''', line)
        if m:
            value = next(g for g in m.groups() if g is not None)
    return value


def kernel_of(linux_path):
    """'<kernel>' of a /vmlinuz-<kernel> (or /boot/vmlinuz-<kernel>) path, None for anything else."""
    name = (linux_path or '').rsplit('/', 1)[-1]
    if not name.startswith('vmlinuz-'):
        return None
    return name[len('vmlinuz-') :] or None


def parse_bls(text):
    """The keys of a BLS entry (first word of a line -> the rest; the first occurrence wins)."""
    entry = {}
    for line in (text or '').splitlines():
        parts = line.strip().split(None, 1)
        if parts and not parts[0].startswith('#'):
            entry.setdefault(parts[0], parts[1].strip() if len(parts) > 1 else '')
    return entry


def _segments(version):
    return re.findall(r'[0-9]+|[A-Za-z]+|~|\^', version)


def rpmvercmp(a, b):
    """rpm's version comparison (-1, 0, 1): numeric segments as numbers, a number beats letters, ~ sorts first."""
    sa, sb = _segments(a), _segments(b)
    for x, y in zip(sa, sb):
        if x == y:
            continue
        if '~' in (x, y):
            return -1 if x == '~' else 1
        if '^' in (x, y):
            return 1 if x == '^' else -1
        if x.isdigit() and y.isdigit():
            return (int(x) > int(y)) - (int(x) < int(y))
        if x.isdigit() != y.isdigit():
            return 1 if x.isdigit() else -1
        return (x > y) - (x < y)
    longer = sa[len(sb) :] or sb[len(sa) :]
    if not longer:
        return 0
    sign = 1 if len(sa) > len(sb) else -1
    return -sign if longer[0] == '~' else sign


def bls_menu(entries):
    """Menu of BLS entries ({file stem: content}) as grub's blscfg orders it: version, then id, newest first.

    Each item: {id, title, kernel, aliases} (aliases: the names grub matches, id first)."""
    items = []
    for stem, text in entries.items():
        e = parse_bls(text)
        kernel = kernel_of(e.get('linux')) or e.get('version')
        items.append(
            {
                'id': stem,
                'title': e.get('title', ''),
                'kernel': kernel,
                'version': e.get('version') or kernel or '',
                'aliases': [n for n in (stem, e.get('id'), e.get('title')) if n],
            }
        )

    def key_of(item):
        return item['version'], item['id']

    # Insertion sort with rpmvercmp (a handful of entries): newest first, ties by id descending.
    ordered = []
    for item in items:
        i = 0
        while i < len(ordered):
            v = rpmvercmp(key_of(item)[0], key_of(ordered[i])[0])
            if v > 0 or (v == 0 and item['id'] > ordered[i]['id']):
                break
            i += 1
        ordered.insert(i, item)
    for item in ordered:
        item.pop('version')
    return ordered


def grub_cfg_menu(text):
    """Top-level menuentry blocks of a grub.cfg in order: {id, title, kernel, aliases}."""
    items, current, depth = [], None, 0
    for line in (text or '').splitlines():
        m = _MENUENTRY.match(line)
        if m and depth == 0:
            title = next(g for g in m.groups()[:3] if g is not None)
            idm = _ENTRY_ID.search(m.group(4))
            entry_id = next(g for g in idm.groups() if g is not None) if idm else None
            current = {'id': entry_id, 'title': title, 'kernel': None, 'aliases': [n for n in (entry_id, title) if n]}
            items.append(current)
            depth = 1
            continue
        if re.match(r'^\s*submenu\b', line) and line.rstrip().endswith('{'):
            depth += 1
            continue
        if depth and current is not None and current['kernel'] is None:
            lm = _LINUX.match(line)
            if lm:
                current['kernel'] = kernel_of(lm.group(1))
        if line.strip() == '}' and depth:
            depth -= 1
            if depth == 0:
                current = None
    return items


def pick(menu, name):
    """The menu item grub boots for `name` (an index, an id, a title, or 'submenu>title'), None when none."""
    name = (name or '').strip() or '0'
    if name.isdigit():
        return menu[int(name)] if int(name) < len(menu) else None
    for candidate in (name, name.split('>')[-1]):
        for item in menu:
            if candidate in item['aliases']:
                return item
    return None


def default_kernel(grubenv_text, default_grub_text, bls_entries, grub_cfg_text, grubby_out=None):
    """(kernel, how it was found) of the next boot; kernel None with the reason when nothing says.

    grubenv_text/default_grub_text/grub_cfg_text: file contents (None: absent); bls_entries: {file stem: content};
    grubby_out: `grubby --default-kernel` output (None: no grubby or it failed)."""
    env = parse_grubenv(grubenv_text)
    setting = grub_default(default_grub_text)
    if env.get('next_entry'):
        name, how = env['next_entry'], 'grubenv next_entry'
    elif setting in (None, 'saved'):
        name, how = env.get('saved_entry', ''), 'grubenv saved_entry'
    else:
        name, how = setting, 'GRUB_DEFAULT'
    use_bls = bool(bls_entries) and (grub_cfg_text is None or 'blscfg' in grub_cfg_text)
    menu = bls_menu(bls_entries) if use_bls else grub_cfg_menu(grub_cfg_text)
    item = pick(menu, name) if menu else None
    if item and item['kernel']:
        where = 'BLS entry ' + item['id'] if use_bls else 'grub.cfg menuentry ' + repr(item['title'])
        return item['kernel'], '%s %r -> %s' % (how, name or '0', where)
    gk = kernel_of((grubby_out or '').strip().splitlines()[-1] if (grubby_out or '').strip() else '')
    if gk:
        return gk, 'grubby --default-kernel'
    if not menu:
        return None, 'no boot menu found (%s, %s/*.conf, %s) and no grubby' % (GRUBENV, BLS_DIR, GRUB_CFG)
    return None, '%s %r names no menu entry with a kernel (%d entries)' % (how, name or '0', len(menu))


def module_version(data):
    """Version in the .modinfo of an nvidia.ko's bytes (uncompressed), None when it carries none."""
    m = _MODINFO_VERSION.search(data or b'')
    return m.group(1).decode('ascii', 'replace') if m else None


def next_kernel_plan(default, how, build_kernel, version, installed, module, tree, dkms_registered, mode):
    """What the driver stage does about the next boot's kernel.

    default/how: default_kernel()'s answer; build_kernel: the kernel the driver install builds for
    (nvidia_driver_kernel_release); version: the driver version; installed: /lib/modules/<default> exists;
    module: version of the nvidia.ko built for it (None: none); tree: its kernel-devel tree is there;
    dkms_registered: the driver's version is registered with dkms; mode: build, fail or ignore.
    Returns {action: none|build|fail|ignore, kernel, how, reason, method: dkms|run, source_path,
    devel_package, needs_devel}.
    """
    if mode not in MODES:
        raise ValueError('next kernel mode %r is not one of %s' % (mode, ', '.join(MODES)))
    plan = {
        'kernel': default,
        'how': how,
        'method': 'dkms' if dkms_registered else 'run',
        'source_path': '%s/%s' % (KERNEL_SRC_DIR, default) if default else None,
        'devel_package': 'kernel-devel-%s' % default if default else None,
        'needs_devel': False,
    }
    if not default:
        return dict(plan, action='none', reason='next boot kernel unknown: %s' % how)
    if default == build_kernel:
        return dict(plan, action='none', reason='the next boot runs %s, the kernel the driver is built for' % default)
    if not installed:
        return dict(
            plan,
            action='none',
            reason='the next boot entry names %s, which is not installed (no %s/%s)' % (default, MODULES_DIR, default),
        )
    if module == version:
        return dict(plan, action='none', reason='the next boot kernel %s has the nvidia %s module' % (default, version))
    missing = 'the next boot kernel %s (%s) has %s' % (
        default,
        how,
        'no nvidia module' if module is None else 'the nvidia %s module, not %s' % (module, version),
    )
    if mode == 'ignore':
        return dict(
            plan,
            action='ignore',
            reason='%s; left as it is (nvidia_driver_next_kernel=ignore): that boot '
            'comes up without the driver' % missing,
        )
    if mode == 'fail':
        return dict(
            plan,
            action='fail',
            reason='%s; nvidia_driver_next_kernel=fail: build it (set it to build) or '
            'boot %s' % (missing, build_kernel),
        )
    return dict(
        plan,
        action='build',
        needs_devel=not tree,
        reason='%s: building nvidia %s for it (%s)%s'
        % (
            missing,
            version,
            'dkms' if dkms_registered else 'the .run, --kernel-module-only',
            '' if tree else ', after installing %s from the bundle' % plan['devel_package'],
        ),
    )


def module_candidates(paths):
    """The nvidia.ko files (plain, .xz, .gz) among paths under /lib/modules/<kernel>, in the order depmod prefers
    them: updates/, extra/, the kernel's own tree, weak-updates/ (kABI links to another kernel's module)."""
    rank = ('/updates/', '/extra/', '/kernel/', '/weak-updates/')
    found = [p for p in paths if p.rsplit('/', 1)[-1] in ('nvidia.ko', 'nvidia.ko.xz', 'nvidia.ko.gz')]
    return sorted(found, key=lambda p: (next((i for i, r in enumerate(rank) if r in p), len(rank)), p))
