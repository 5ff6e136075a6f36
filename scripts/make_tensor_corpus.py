#!/usr/bin/python3
"""Regenerates the .npz and .safetensors test corpora (tests/data/{npz,safetensors}_{good,bad}/):

  *_good/manifest.txt   file member dtype dims... ; the member's values are 0, 1, 2, ... in C order
  *_bad/expected.txt    file<TAB>fragment of the error message (member q is read)

Good .npz files are written by numpy.savez / savez_compressed themselves, plus an archive with
zip64 end records written here; bad ones are those files with one field broken. .safetensors
files are written here (the format is an 8-byte length, a JSON header, the data). The files
also seed the fuzz targets npz_fuzz and safetensors_fuzz (scripts/fuzz.sh).
Usage: scripts/make_tensor_corpus.py [REPO_ROOT]
"""
import io
import json
import os
import struct
import sys
import zlib

import numpy as np

from make_npy_corpus import data_dir, write_dir  # the same script folder


def arange(shape, dtype, order="C"):
    n = int(np.prod(shape))
    return np.asarray(np.arange(n).reshape(shape), dtype=dtype, order=order)


def savez(compressed=False, **arrays):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def zip_archive(members, zip64_end=False, method=0, flags=0, disk=0):
    """A zip written by hand: members (name, data) stored or deflated, optional zip64 end records."""
    out, cd = b"", b""
    for name, data in members:
        body = data if method != 8 else zlib.compress(data)[2:-4]   # raw deflate
        crc = zlib.crc32(data)
        local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, flags, method, 0, 0x21, crc, len(body), len(data),
                            len(name), 0) + name.encode()
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, flags, method, 0, 0x21, crc, len(body),
                          len(data), len(name), 0, 0, 0, 0, 0, len(out)) + name.encode()
        out += local + body
    n, off = len(members), len(out)
    out += cd
    if zip64_end:
        z = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(cd), off)
        out += struct.pack("<IIQI", 0x07064B50, 0, z, 1)
        return out + struct.pack("<IHHHHIIH", 0x06054B50, disk, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return out + struct.pack("<IHHHHIIH", 0x06054B50, disk, 0, n, n, len(cd), off, 0)


def patch(data, offset, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


def eocd(data):
    return data.rfind(b"PK\x05\x06")


def cd_entry(data, i=0):
    pos = -1
    for _ in range(i + 1):
        pos = data.find(b"PK\x01\x02", pos + 1)
    return pos


def npz_good():
    """(file, bytes, [(member, dtype, shape)])"""
    q, k = arange((2, 3), "<f8"), arange((4,), "<f4")
    return [
        ("savez_f8_f4.npz", savez(q=q, k=k), [("q", "<f8", (2, 3)), ("k", "<f4", (4,))]),
        ("savez_compressed_f8_f4.npz", savez(True, q=q, k=k), [("q", "<f8", (2, 3)), ("k", "<f4", (4,))]),
        ("savez_f2_fortran.npz", savez(q=arange((3, 2), "<f2", "F")), [("q", "<f2", (3, 2))]),
        ("savez_compressed_long.npz", savez(True, q=arange((1000,), ">f8")), [("q", ">f8", (1000,))]),
        ("zip64_end_deflate.npz", zip_archive([("q.npy", npy_bytes(q)), ("v.npy", npy_bytes(k))], True, 8),
         [("q", "<f8", (2, 3)), ("v", "<f4", (4,))]),
        ("positional_arr_0.npz", savez(arr_0=q), [("arr_0", "<f8", (2, 3))]),
    ]


def npz_bad():
    q = arange((2, 3), "<f8")
    plain = savez(q=q)
    comp = savez(True, q=q)
    e, c = eocd(plain), cd_entry(plain)
    local_comp = comp.find(b"PK\x03\x04")
    comp_data = local_comp + 30 + struct.unpack_from("<HH", comp, local_comp + 26)[0] + struct.unpack_from("<HH", comp, local_comp + 26)[1]
    stored_data = 30 + sum(struct.unpack_from("<HH", plain, 26))
    return [
        ("empty.npz", b"", "too short for a zip archive"),
        ("npy_not_zip.npz", npy_bytes(q), "no zip end-of-central-directory record"),
        ("truncated_end.npz", plain[:-5], "no zip end-of-central-directory record"),
        ("cd_offset_wrong.npz", patch(plain, e + 16, "<I", c + 1), "does not end where the end record starts"),
        ("multi_disk.npz", patch(plain, e + 4, "<H", 1), "multi-disk"),
        ("entries_more.npz", patch(patch(plain, e + 8, "<H", 2), e + 10, "<H", 2), "central directory entry 1 is missing"),
        ("zip64_locator_missing.npz", patch(patch(plain, e + 8, "<H", 0xFFFF), e + 10, "<H", 0xFFFF), "locator missing"),
        ("crc_mismatch.npz", patch(plain, stored_data + 130, "<B", 0x55), "CRC-32 mismatch"),
        ("deflate_corrupt.npz", patch(comp, comp_data, "<B", 0xFF), "corrupt compressed data"),
        ("deflate_bomb_size.npz", patch(comp, cd_entry(comp) + 24, "<I", 0xFFFFFFF0), "more than deflate can produce"),
        ("deflate_size_larger.npz", patch(comp, cd_entry(comp) + 24, "<I", 200), "trailing data after the array"),
        ("method_bzip2.npz", patch(patch(plain, c + 10, "<H", 12), 8, "<H", 12), "compression method 12"),
        ("encrypted.npz", patch(plain, c + 8, "<H", 1), "is encrypted"),
        ("no_member_q.npz", savez(x=q), "no array 'q' (the archive holds: x)"),
        ("duplicate_member.npz", zip_archive([("q.npy", npy_bytes(q)), ("q.npy", npy_bytes(q))]), "duplicate member 'q.npy'"),
        ("local_sig_wrong.npz", patch(plain, 0, "<I", 0x04034B51), "no local header"),
        ("local_name_differs.npz", patch(plain, 30, "<B", ord("x")), "local header names another member"),
        ("local_method_differs.npz", patch(plain, 8, "<H", 8), "local header gives another compression method"),
        ("stored_size_mismatch.npz", patch(plain, c + 24, "<I", 100), "stored with"),
        ("data_beyond_directory.npz", patch(patch(plain, c + 20, "<I", 10**6), c + 24, "<I", 10**6), "data goes beyond the central directory"),
        ("member_not_npy.npz", zip_archive([("q.npy", b"hello world, not a .npy image")]), "bad magic"),
        ("member_npy_truncated.npz", zip_archive([("q.npy", npy_bytes(q)[:-8])]), "truncated data"),
        ("overlapping_members.npz", overlapping(q), "members overlap"),
        ("ambiguous_q_and_q_npy.npz", zip_archive([("q", npy_bytes(q)), ("q.npy", npy_bytes(q))]),
         "members 'q' and 'q.npy' are both read as array 'q' (ambiguous; rename one)"),
        ("ambiguous_npy_npy.npz", zip_archive([("q.npy", npy_bytes(q)), ("q.npy.npy", npy_bytes(q))]),
         "members 'q.npy' and 'q.npy.npy' are both read as array 'q.npy'"),
    ]


def overlapping(q):
    """Two directory entries, the second's local header inside the first member's data."""
    inner = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, 0, 0, 0, 5, 0) + b"k.npy"
    data = npy_bytes(q)[:-len(inner)] + inner
    z = bytearray(zip_archive([("q.npy", data)]))
    e = eocd(z)
    cd_off = struct.unpack_from("<I", z, e + 16)[0]
    k_local = cd_off - len(inner)
    entry = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, 0, 0, 0, 5, 0, 0, 0, 0, 0, k_local) + b"k.npy"
    cd = bytes(z[cd_off:e]) + entry
    return bytes(z[:cd_off]) + cd + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, len(cd), cd_off, 0)


def safetensors(entries, meta=None, header=None, tail=b""):
    """entries: (name, dtype, shape, bytes); offsets follow one another."""
    hdr, data = {}, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, raw in entries:
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = (json.dumps(hdr) if header is None else header).encode()
    text += b" " * ((-len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data + tail


def bf16(a):
    return (np.asarray(a, "<f4").view("<u4") >> 16).astype("<u2").tobytes()


def st_good():
    q = arange((2, 3), "<f8")
    return [
        ("f64.safetensors", safetensors([("q", "F64", (2, 3), q.tobytes())]), [("q", "F64", (2, 3))]),
        ("f32_meta.safetensors", safetensors([("q", "F32", (3, 2), arange((3, 2), "<f4").tobytes())], {"format": "pt"}),
         [("q", "F32", (3, 2))]),
        ("f16_bf16_i64.safetensors",
         safetensors([("q", "F16", (2, 2), arange((2, 2), "<f2").tobytes()), ("k", "BF16", (5,), bf16(np.arange(5))),
                      ("step", "I64", (), struct.pack("<q", 7))]),
         [("q", "F16", (2, 2)), ("k", "BF16", (5,))]),
        ("empty_tensor.safetensors", safetensors([("e", "F32", (0, 4), b""), ("q", "F64", (4,), arange((4,), "<f8").tobytes())]),
         [("q", "F64", (4,)), ("e", "F32", (0, 4))]),
    ]


def st_bad():
    q = arange((2, 3), "<f4").tobytes()
    good = safetensors([("q", "F32", (2, 3), q)])
    hdr = lambda d: safetensors([], header=json.dumps(d), tail=q)
    ent = lambda **kw: {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24], **kw}
    return [
        ("empty.safetensors", b"", "no header length"),
        ("header_len_huge.safetensors", struct.pack("<Q", 2**40) + good[8:], "exceeds the limit"),
        ("header_len_beyond.safetensors", struct.pack("<Q", len(good)) + good[8:], "goes beyond the end of the file"),
        ("not_object.safetensors", safetensors([], header="[1, 2]", tail=q), "does not start with '{'"),
        ("invalid_json.safetensors", safetensors([], header='{"q": ', tail=q), "invalid JSON"),
        ("comment.safetensors", safetensors([], header='{/* c */ "q": ' + json.dumps(ent()) + "}", tail=q), "invalid JSON"),
        ("duplicate_key.safetensors", safetensors([], header='{"q": %s, "q": %s}' % (json.dumps(ent()), json.dumps(ent())), tail=q),
         "duplicate key"),
        ("nul.safetensors", safetensors([], header='{"q": ' + json.dumps(ent()) + "}\0", tail=q), "is NUL"),
        ("deep.safetensors", safetensors([], header='{"a": ' + "[" * 100 + "]" * 100 + "}", tail=b""), "nested deeper"),
        ("dtype_unknown.safetensors", hdr({"q": ent(dtype="F128")}), "unknown dtype 'F128'"),
        ("dtype_not_string.safetensors", hdr({"q": ent(dtype=4)}), "dtype is not a string"),
        ("dtype_i32.safetensors", hdr({"q": ent(dtype="I32")}), "unsupported dtype I32"),
        ("shape_negative.safetensors", hdr({"q": ent(shape=[-2, 3])}), "shape[0] is not a non-negative integer"),
        ("shape_float.safetensors", hdr({"q": ent(shape=[2.0, 3])}), "shape[0] is not a non-negative integer"),
        ("shape_not_list.safetensors", hdr({"q": ent(shape=6)}), "shape is not a list"),
        ("shape_huge.safetensors", hdr({"q": ent(shape=[2**62, 2**62])}), "is too large"),
        ("offsets_size.safetensors", hdr({"q": ent(data_offsets=[0, 8])}), "needs 24"),
        ("offsets_reversed.safetensors", hdr({"q": ent(data_offsets=[24, 0])}), "outside the data"),
        ("offsets_beyond.safetensors", hdr({"q": ent(data_offsets=[8, 32])}), "outside the data"),
        ("offsets_three.safetensors", hdr({"q": ent(data_offsets=[0, 12, 24])}), "not a list [begin, end]"),
        ("overlap.safetensors", hdr({"q": ent(), "k": ent(shape=[3], data_offsets=[12, 24])}), "without gap or overlap"),
        ("gap.safetensors", safetensors([], header=json.dumps({"q": ent(shape=[2, 2], data_offsets=[8, 24])}), tail=q),
         "starts at data byte 8, expected 0"),
        ("trailing.safetensors", safetensors([("q", "F32", (2, 3), q)], tail=b"\0" * 8), "bytes after the last tensor"),
        ("extra_key.safetensors", hdr({"q": ent(offsets=1)}), "unexpected key 'offsets'"),
        ("missing_offsets.safetensors", hdr({"q": {"dtype": "F32", "shape": [2, 3]}}), "missing 'data_offsets'"),
        ("entry_not_object.safetensors", hdr({"q": [1]}), "tensor 'q' is not an object"),
        ("meta_not_string.safetensors", safetensors([("q", "F32", (2, 3), q)], {"a": 1}), "__metadata__: 'a' is not a string"),
        ("no_q.safetensors", safetensors([("x", "F32", (2, 3), q)]), "no tensor 'q' (the file holds: x)"),
        ("data_truncated.safetensors", good[:-4], "outside the data"),
    ]


def write(path, files, manifest, lines, header):
    write_dir(path, files)
    with open(os.path.join(path, manifest), "w") as f:
        f.write(header + "\n")
        f.writelines(line + "\n" for line in lines)


def main():
    data = data_dir("make_tensor_corpus.py", "usage: make_tensor_corpus.py [REPO_ROOT]   "
                    "(rewrites REPO_ROOT/tests/data/{npz,safetensors}_{good,bad})")
    if data is None:
        return
    good_head = "# file member dtype dims... (values 0, 1, 2, ... in C order; scripts/make_tensor_corpus.py)"
    bad_head = "# file<TAB>fragment of the error message reading member q (scripts/make_tensor_corpus.py)"
    for kind, good, bad in (("npz", npz_good(), npz_bad()), ("safetensors", st_good(), st_bad())):
        assert len({n for n, _, _ in bad}) == len(bad)
        write(os.path.join(data, kind + "_good"), [(n, b) for n, b, _ in good], "manifest.txt",
              [" ".join([n, m, t] + [str(d) for d in s]) for n, _, ms in good for m, t, s in ms], good_head)
        write(os.path.join(data, kind + "_bad"), [(n, b) for n, b, _ in bad], "expected.txt",
              ["%s\t%s" % (n, m) for n, _, m in bad], bad_head)
        print("%s corpus: %d good, %d bad files" % (kind, len(good), len(bad)))


if __name__ == "__main__":
    main()
