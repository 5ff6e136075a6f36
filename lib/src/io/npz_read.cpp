// The .npz reader (tensor_file.hpp): a zip archive as numpy.savez (stored) and
// numpy.savez_compressed (deflate) write it, zip64 records included. The end record, the
// central directory and each member's local header are checked against the file size and
// each other before anything is read or sized from them; members must not overlap; a
// member's .npy image is streamed through the .npy parser (read_npy_stream) as it is
// inflated, its size bounded by what deflate can produce, its CRC-32 checked at the end.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>

#include <zlib.h>

#include "io/byte_source.hpp"
#include "favor/core/error.hpp"
#include "favor/io/tensor_file.hpp"
#include "io/npy_header.hpp"

namespace favor {
namespace {

using npy::ByteSource;
using npy::fail;
using npy::le;

constexpr std::uint32_t kEndSig = 0x06054b50, kDirSig = 0x02014b50, kLocalSig = 0x04034b50,
                        kZip64LocatorSig = 0x07064b50, kZip64EndSig = 0x06064b50;
constexpr std::size_t kEndLen = 22, kDirLen = 46, kLocalLen = 30, kZip64LocatorLen = 20, kZip64EndLen = 56;
// Deflate produces at most 258 bytes per 2-bit code, about 1032 : 1; a larger claimed size is
// a lie (or a bomb) and is refused before any buffer is sized from it.
constexpr std::uint64_t kMaxDeflateRatio = 1100;

// One member as the central directory describes it.
struct Member {
    std::string name;
    std::uint16_t method = 0;
    std::uint32_t crc = 0;
    std::uint64_t csize = 0, usize = 0, local = 0;
    std::uint64_t data = 0;   // where its data starts (from the local header)
};

// The end of the central directory: where it starts, its size, its entry count; `limit` is
// where the records after it begin (the zip64 record or the end record).
struct End {
    std::uint64_t entries = 0, dir_size = 0, dir_offset = 0, limit = 0;
};

End read_zip64_end(const ByteSource& src, std::uint64_t end_pos) {
    const std::string& n = src.name();
    if (end_pos < kZip64LocatorLen) fail(n, "zip64 end-of-central-directory locator missing");
    const std::string loc = src.read_string(end_pos - kZip64LocatorLen, kZip64LocatorLen);
    if (le(loc.data(), 4) != kZip64LocatorSig) fail(n, "zip64 end-of-central-directory locator missing");
    if (le(loc.data() + 4, 4) != 0 || le(loc.data() + 16, 4) > 1) fail(n, "multi-disk zip archives are not supported");
    const std::uint64_t at = le(loc.data() + 8, 8);
    if (at > end_pos - kZip64LocatorLen || end_pos - kZip64LocatorLen - at < kZip64EndLen)
        fail(n, "zip64 end record offset " + std::to_string(at) + " is outside the file");
    const std::string z = src.read_string(at, kZip64EndLen);
    if (le(z.data(), 4) != kZip64EndSig) fail(n, "no zip64 end-of-central-directory record at byte " + std::to_string(at));
    if (le(z.data() + 16, 4) != 0 || le(z.data() + 20, 4) != 0 || le(z.data() + 24, 8) != le(z.data() + 32, 8))
        fail(n, "multi-disk zip archives are not supported");
    return {le(z.data() + 32, 8), le(z.data() + 40, 8), le(z.data() + 48, 8), at};
}

// The end record: the last signature whose comment length reaches exactly the end of the file.
End read_end(const ByteSource& src) {
    const std::string& n = src.name();
    if (src.size() < kEndLen)
        fail(n, "not a .npz file (" + std::to_string(src.size()) + " bytes, too short for a zip archive)");
    const std::size_t tail = std::size_t(std::min<std::uint64_t>(src.size(), kEndLen + 0xffff));
    const std::string t = src.read_string(src.size() - tail, tail);
    std::size_t p = tail - kEndLen + 1;
    do {
        --p;
    } while (p > 0 && !(le(t.data() + p, 4) == kEndSig && p + kEndLen + le(t.data() + p + 20, 2) == tail));
    if (le(t.data() + p, 4) != kEndSig || p + kEndLen + le(t.data() + p + 20, 2) != tail)
        fail(n, "not a .npz file (no zip end-of-central-directory record)");
    const char* e = t.data() + p;
    if (le(e + 4, 2) != 0 || le(e + 6, 2) != 0 || le(e + 8, 2) != le(e + 10, 2))
        fail(n, "multi-disk zip archives are not supported");
    const std::uint64_t end_pos = src.size() - tail + p;
    End end{le(e + 10, 2), le(e + 12, 4), le(e + 16, 4), end_pos};
    if (end.entries == 0xffff || end.dir_size == 0xffffffff || end.dir_offset == 0xffffffff)
        end = read_zip64_end(src, end_pos);
    if (end.dir_offset > end.limit || end.dir_size != end.limit - end.dir_offset)
        fail(n, "central directory (offset " + std::to_string(end.dir_offset) + ", " + std::to_string(end.dir_size) +
                    " bytes) does not end where the end record starts (byte " + std::to_string(end.limit) + ")");
    if (end.entries > kNpzMaxMembers) fail(n, std::to_string(end.entries) + " members (favor reads at most " + std::to_string(kNpzMaxMembers) + ")");
    if (end.dir_size > kNpzMaxDirectoryBytes)
        fail(n, "central directory of " + std::to_string(end.dir_size) + " bytes (favor reads at most " +
                    std::to_string(kNpzMaxDirectoryBytes) + ")");
    return end;
}

// The zip64 extended information of a directory entry: the 8-byte values of the fields that
// hold 0xffffffff, in the order usize, csize, local offset.
void read_zip64_extra(const std::string& n, const char* x, std::size_t len, Member& m) {
    for (std::size_t i = 0; i + 4 <= len;) {
        const std::uint64_t id = le(x + i, 2), size = le(x + i + 2, 2);
        if (size > len - i - 4) fail(n, "member '" + m.name + "': extra field goes beyond its entry");
        if (id == 1) {
            std::size_t at = i + 4;
            for (std::uint64_t* f : {&m.usize, &m.csize, &m.local}) {
                if (*f != 0xffffffff) continue;
                if (at + 8 > i + 4 + size) fail(n, "member '" + m.name + "': zip64 extra field too short");
                *f = le(x + at, 8);
                at += 8;
            }
        }
        i += 4 + size;
    }
}

// The central directory's entries, checked one by one; it must hold exactly them.
std::vector<Member> read_directory(const ByteSource& src, const End& end) {
    const std::string& n = src.name();
    const std::string dir = src.read_string(end.dir_offset, std::size_t(end.dir_size));
    std::vector<Member> out;
    std::size_t p = 0;
    for (std::uint64_t i = 0; i < end.entries; ++i) {
        const std::string which = "central directory entry " + std::to_string(i);
        if (dir.size() - p < kDirLen || le(dir.data() + p, 4) != kDirSig) fail(n, which + " is missing or malformed");
        const char* e = dir.data() + p;
        const std::size_t name_len = le(e + 28, 2), extra_len = le(e + 30, 2), comment_len = le(e + 32, 2);
        if (dir.size() - p - kDirLen < name_len + extra_len + comment_len) fail(n, which + " goes beyond the directory");
        Member m;
        m.name.assign(e + kDirLen, name_len);
        m.method = std::uint16_t(le(e + 10, 2));
        m.crc = std::uint32_t(le(e + 16, 4));
        m.csize = le(e + 20, 4);
        m.usize = le(e + 24, 4);
        m.local = le(e + 42, 4);
        read_zip64_extra(n, e + kDirLen + name_len, extra_len, m);
        if (le(e + 8, 2) & 1) fail(n, "member '" + m.name + "' is encrypted");
        if (m.method != 0 && m.method != 8)
            fail(n, "member '" + m.name + "': compression method " + std::to_string(m.method) + " (supported: stored, deflate)");
        if (le(e + 34, 2) != 0 && le(e + 34, 2) != 0xffff) fail(n, "multi-disk zip archives are not supported");
        out.push_back(std::move(m));
        p += kDirLen + name_len + extra_len + comment_len;
    }
    if (p != dir.size()) fail(n, "central directory has " + std::to_string(dir.size() - p) + " bytes after its entries");
    return out;
}

// Each member's local header (signature, name, method) and the place of its data, which must
// lie before the directory; no two members may share bytes.
void locate_members(const ByteSource& src, const End& end, std::vector<Member>& members) {
    const std::string& n = src.name();
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    for (Member& m : members) {
        const std::string who = "member '" + m.name + "'";
        if (m.local > end.dir_offset || end.dir_offset - m.local < kLocalLen) fail(n, who + ": local header outside the archive");
        const std::string h = src.read_string(m.local, kLocalLen);
        if (le(h.data(), 4) != kLocalSig) fail(n, who + ": no local header at byte " + std::to_string(m.local));
        const std::uint64_t name_len = le(h.data() + 26, 2), extra_len = le(h.data() + 28, 2);
        if (end.dir_offset - m.local - kLocalLen < name_len + extra_len) fail(n, who + ": local header goes beyond the data");
        if (src.read_string(m.local + kLocalLen, std::size_t(name_len)) != m.name)
            fail(n, who + ": local header names another member");
        if (le(h.data() + 8, 2) != m.method) fail(n, who + ": local header gives another compression method");
        m.data = m.local + kLocalLen + name_len + extra_len;
        if (m.csize > end.dir_offset - m.data) fail(n, who + ": data goes beyond the central directory");
        if (m.method == 0 && m.csize != m.usize)
            fail(n, who + ": stored with " + std::to_string(m.csize) + " bytes but " + std::to_string(m.usize) + " declared");
        if (m.method == 8 && m.usize / kMaxDeflateRatio > m.csize)
            fail(n, who + ": " + std::to_string(m.usize) + " bytes declared from " + std::to_string(m.csize) +
                        " compressed, more than deflate can produce");
        spans.emplace_back(m.local, m.data + m.csize);
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i)
        if (spans[i].first < spans[i - 1].second) fail(n, "members overlap at byte " + std::to_string(spans[i].first));
}

// The uncompressed bytes of one member, front to back; finish() checks the end and the CRC.
class MemberStream {
public:
    MemberStream(const ByteSource& src, const Member& m, std::string name) : src_(src), m_(m), name_(std::move(name)) {
        if (m_.method == 8 && inflateInit2(&z_, -MAX_WBITS) != Z_OK) fail(name_, "cannot start zlib");
        started_ = m_.method == 8;
    }
    ~MemberStream() {
        if (started_) inflateEnd(&z_);
    }
    MemberStream(const MemberStream&) = delete;
    MemberStream& operator=(const MemberStream&) = delete;

    void read(char* dst, std::size_t n) {
        if (n > m_.usize - out_) fail(name_, "internal error: read beyond the member");
        if (m_.method == 0) src_.read_at(m_.data + out_, dst, n);
        else inflate_into(dst, n);
        crc_ = crc32_z(crc_, reinterpret_cast<const Bytef*>(dst), n);
        out_ += n;
    }
    // All declared bytes read: the deflate stream ends exactly there, and the CRC matches.
    void finish() {
        if (m_.method == 8 && !ended_) {
            char extra;
            inflate_into(&extra, 1, true);
            if (!ended_) fail(name_, "compressed data holds more than the declared " + std::to_string(m_.usize) + " bytes");
        }
        if (m_.method == 8 && (z_.avail_in != 0 || in_ != m_.csize))
            fail(name_, "bytes after the end of the compressed data");
        if (crc_ != m_.crc) fail(name_, "CRC-32 mismatch (the member is corrupt)");
    }

private:
    // Inflates exactly n bytes into dst (probe: at most n, stopping at the stream's end).
    void inflate_into(char* dst, std::size_t n, bool probe = false) {
        std::size_t done = 0;
        while (done < n) {
            if (ended_) {
                if (probe) return;
                fail(name_, "compressed data ends after " + std::to_string(out_ + done) + " of the declared " +
                                std::to_string(m_.usize) + " bytes");
            }
            if (z_.avail_in == 0) {
                if (in_ == m_.csize) fail(name_, "compressed data is truncated");
                buf_.resize(std::size_t(std::min<std::uint64_t>(m_.csize - in_, 1 << 16)));
                src_.read_at(m_.data + in_, buf_.data(), buf_.size());
                in_ += buf_.size();
                z_.next_in = reinterpret_cast<Bytef*>(buf_.data());
                z_.avail_in = uInt(buf_.size());
            }
            const std::size_t want = std::min<std::size_t>(n - done, 1u << 30);
            z_.next_out = reinterpret_cast<Bytef*>(dst + done);
            z_.avail_out = uInt(want);
            const int ret = inflate(&z_, Z_NO_FLUSH);
            if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR)
                fail(name_, std::string("corrupt compressed data (zlib: ") + (z_.msg ? z_.msg : "error") + ")");
            if (probe && want - z_.avail_out > 0) return;
            done += want - z_.avail_out;
            ended_ = ret == Z_STREAM_END;
        }
    }

    const ByteSource& src_;
    const Member& m_;
    std::string name_;
    z_stream z_{};
    bool started_ = false, ended_ = false;
    std::vector<char> buf_;
    std::uint64_t in_ = 0, out_ = 0;
    uLong crc_ = crc32_z(0, nullptr, 0);
};

// numpy.savez stores array `x` as member "x.npy".
std::string array_name(const std::string& member) {
    const std::string ext = ".npy";
    return member.size() > ext.size() && member.compare(member.size() - ext.size(), ext.size(), ext) == 0
               ? member.substr(0, member.size() - ext.size())
               : member;
}

// The checked members of an archive. A member is read by its name or its array name
// (read_member), so no name may lead to two members: "q" and "q.npy" (both array q), or
// "q.npy" and "q.npy.npy", would be read by directory order; refused, as a repeated name is.
std::vector<Member> open_archive(const ByteSource& src) {
    const End end = read_end(src);
    std::vector<Member> members = read_directory(src, end);
    std::map<std::string, const Member*> by_name;
    for (const Member& m : members)
        for (const std::string& key : {m.name, array_name(m.name)}) {
            const auto [it, fresh] = by_name.emplace(key, &m);
            if (fresh || it->second == &m) continue;
            if (it->second->name == m.name) fail(src.name(), "duplicate member '" + m.name + "'");
            fail(src.name(), "members '" + it->second->name + "' and '" + m.name + "' are both read as array '" + key +
                                 "' (ambiguous; rename one)");
        }
    locate_members(src, end, members);
    return members;
}

NpyArray read_member(const ByteSource& src, const std::string& array, bool header_only) {
    const std::vector<Member> members = open_archive(src);
    for (const Member& m : members) {
        if (array_name(m.name) != array && m.name != array) continue;
        MemberStream s(src, m, src.name() + ":" + array);
        if (m.usize > std::numeric_limits<std::size_t>::max()) fail(src.name(), "member '" + m.name + "' too large");
        NpyArray a = npy::read_npy_stream(
            src.name() + ":" + array, std::size_t(m.usize), [&](char* dst, std::size_t n) { s.read(dst, n); }, header_only);
        if (!header_only) s.finish();
        return a;
    }
    std::vector<std::string> names;
    for (const Member& m : members) names.push_back(array_name(m.name));
    fail(src.name(), "no array '" + array + "' (the archive holds: " + npy::held_names(names) + ")");
}

}  // namespace

std::vector<std::string> npz_members(const std::string& name, const char* bytes, std::size_t size) {
    const ByteSource src(name, bytes, size);
    std::vector<std::string> out;
    for (const Member& m : open_archive(src)) out.push_back(array_name(m.name));
    return out;
}

NpyArray parse_npz(const std::string& name, const char* bytes, std::size_t size, const std::string& member) {
    return read_member(ByteSource(name, bytes, size), member, false);
}

namespace npy {
NpyArray read_npz(const std::string& path, const std::string& member, bool header_only) {
    return read_member(ByteSource(path, ".npz file"), member, header_only);
}
}  // namespace npy

}  // namespace favor
