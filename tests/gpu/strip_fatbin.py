"""Keep only what one GPU architecture loads from the CUDA fatbins of a shared library (tests/gpu, issue 43).

vLLM's `_C_stable_libtorch.abi3.so` carries cubins for sm_75 ... sm_120 (78.8 MB, 55.8 MB under xz): too much
for the GPU machine's 64 MiB a call. A card of compute capability 9.0 loads its own SASS (sm_90, sm_90a) and,
for a kernel without it, PTX it can JIT (compute_XX with XX <= 90). This zeroes the payload of every other
fatbin entry: other architectures' SASS, PTX where SASS for the card exists in the same container, PTX newer
than the card. Headers, sizes and offsets are left as they are, so the file keeps its length, its ELF layout
and every fatbin the CUDA runtime registers; only the zeroed payloads compress to nothing (14.8 MB under xz).

The fatbin layout (little endian), as cuobjdump reads it:

    container: magic u32 0xBA55ED50, version u16 1, header_size u16 16, entries_size u64
    entry:     kind u16 (1 PTX, 2 ELF), version u16, header_size u32, payload_size u64,
               compressed_size u32, options_offset u32, minor u16, major u16, arch u32,
               obj_name_offset u32, obj_name_len u32, flags u64, zero u64, decompressed_size u64
               ... then header_size - 64 bytes (options, names), then payload_size bytes of payload

Usage: python3 strip_fatbin.py --arch 90 IN.so OUT.so   (prints what it kept and zeroed)
"""

import argparse
import json
import struct
import sys

MAGIC = 0xBA55ED50
CONTAINER = struct.Struct("<IHHQ")
ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
KIND_PTX, KIND_ELF = 1, 2
SECTIONS = (b".nv_fatbin",)


class FatbinError(ValueError):
    pass


def parse_entries(buf, start, end):
    """The containers and entries between start and end: [(container_offset, [entry dict, ...]), ...].

    Containers follow each other, each aligned to 8 bytes; anything else between them (padding) is skipped.
    """
    containers = []
    off = start
    while off + CONTAINER.size <= end:
        magic, version, hsize, size = CONTAINER.unpack_from(buf, off)
        if magic != MAGIC:
            off += 8 - (off % 8) if off % 8 else 8
            continue
        if hsize != CONTAINER.size:
            raise FatbinError("container at %#x: header size %d, not %d" % (off, hsize, CONTAINER.size))
        body, body_end = off + hsize, off + hsize + size
        if body_end > end:
            raise FatbinError("container at %#x runs past its section (%d bytes)" % (off, size))
        entries = []
        e = body
        while e < body_end:
            if e + ENTRY.size > body_end:
                raise FatbinError("entry at %#x: header runs past its container" % e)
            f = ENTRY.unpack_from(buf, e)
            kind, ehsize, psize, arch, flags = f[0], f[2], f[3], f[8], f[11]
            if kind not in (KIND_PTX, KIND_ELF) or ehsize < ENTRY.size or e + ehsize + psize > body_end:
                raise FatbinError("entry at %#x: kind %d, header %d, payload %d" % (e, kind, ehsize, psize))
            entries.append(
                dict(
                    offset=e,
                    kind="elf" if kind == KIND_ELF else "ptx",
                    arch=arch,
                    header_size=ehsize,
                    payload_offset=e + ehsize,
                    payload_size=psize,
                    flags=flags,
                )
            )
            e += ehsize + psize
        containers.append((off, entries))
        off = body_end
    return containers


def keep(entry, siblings, arch):
    """Whether a card of this architecture (90 for 9.0) may load this entry."""
    if entry["kind"] == "elf":
        return entry["arch"] == arch
    has_sass = any(s["kind"] == "elf" and s["arch"] == arch for s in siblings)
    return not has_sass and entry["arch"] <= arch


def strip_region(buf, start, end, arch):
    """Zero, in place (buf is a bytearray), the payloads this architecture never loads. Returns the tally."""
    tally = dict(containers=0, kept=0, zeroed=0, kept_bytes=0, zeroed_bytes=0, archs={})
    for _header, entries in parse_entries(buf, start, end):
        tally["containers"] += 1
        for ent in entries:
            name = "%s_%d" % ("sm" if ent["kind"] == "elf" else "compute", ent["arch"])
            tally["archs"][name] = tally["archs"].get(name, 0) + 1
            if keep(ent, entries, arch):
                tally["kept"] += 1
                tally["kept_bytes"] += ent["payload_size"]
            else:
                p, n = ent["payload_offset"], ent["payload_size"]
                buf[p : p + n] = bytes(n)
                tally["zeroed"] += 1
                tally["zeroed_bytes"] += n
    return tally


def elf_sections(buf):
    """(name, file offset, size) of every section of a little-endian ELF64 file."""
    if buf[:4] != b"\x7fELF" or buf[4] != 2 or buf[5] != 1:
        raise FatbinError("not a little-endian ELF64 file")
    shoff = struct.unpack_from("<Q", buf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", buf, shoff + i * shentsize) for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    out = []
    for h in hdrs:
        name_end = buf.index(b"\0", stroff + h[0])
        out.append((bytes(buf[stroff + h[0] : name_end]), h[4], h[5], h[1]))
    return out


def strip_elf(data, arch):
    """A copy of an ELF shared library's bytes with its fatbins stripped to one architecture, and the tally."""
    buf = bytearray(data)
    total = dict(containers=0, kept=0, zeroed=0, kept_bytes=0, zeroed_bytes=0, archs={})
    found = False
    for name, off, size, stype in elf_sections(buf):
        if name in SECTIONS and stype != 8:  # SHT_NOBITS holds no bytes
            found = True
            t = strip_region(buf, off, off + size, arch)
            for k in ("containers", "kept", "zeroed", "kept_bytes", "zeroed_bytes"):
                total[k] += t[k]
            for k, v in t["archs"].items():
                total["archs"][k] = total["archs"].get(k, 0) + v
    if not found:
        raise FatbinError("no .nv_fatbin section")
    return bytes(buf), total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90, help="SM number to keep (90 for compute capability 9.0)")
    ap.add_argument("src")
    ap.add_argument("dst")
    a = ap.parse_args(argv)
    with open(a.src, "rb") as fh:
        data = fh.read()
    out, tally = strip_elf(data, a.arch)
    assert len(out) == len(data)
    with open(a.dst, "wb") as fh:
        fh.write(out)
    print(json.dumps(dict(file=a.src, arch=a.arch, **tally), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
