#include "engine/cache/tar_archive.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/private_dir.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

namespace {
// The ustar header's fields: offset and length.
struct Field {
  size_t at;
  size_t length;
};
constexpr Field kName{0, 100};
constexpr Field kMode{100, 8};
constexpr Field kUid{108, 8};
constexpr Field kGid{116, 8};
constexpr Field kSize{124, 12};
constexpr Field kMtime{136, 12};
constexpr Field kChecksum{148, 8};
constexpr size_t kType = 156;
constexpr Field kLink{157, 100};
constexpr Field kMagic{257, 6};
constexpr Field kVersion{263, 2};
constexpr Field kPrefix{345, 155};

using Block = std::array<unsigned char, kTarBlock>;

uint64_t padding_of(uint64_t size) { return (kTarBlock - size % kTarBlock) % kTarBlock; }

/// `value` in octal, zero-padded to fill the field but its last byte (a NUL).
void put_octal(Block& block, Field f, uint64_t value) {
  const std::string digits = fmt::format("{:0{}o}", value, f.length - 1);
  std::memcpy(block.data() + f.at, digits.data(), f.length - 1);
  block[f.at + f.length - 1] = '\0';
}

/// GNU tar's base-256 form for numbers octal cannot hold: the first byte 0x80, then big-endian.
void put_number(Block& block, Field f, uint64_t value) {
  if (value < (uint64_t{1} << (3 * (f.length - 1)))) {
    put_octal(block, f, value);
    return;
  }
  block[f.at] = 0x80;
  for (size_t i = f.length - 1; i >= 1; --i) {
    block[f.at + i] = static_cast<unsigned char>(value & 0xff);
    value >>= 8;
  }
}

/// The number in a header field (octal, or base-256); nullopt when it is not one.
std::optional<uint64_t> get_number(const Block& block, Field f) {
  if (block[f.at] == 0x80) {
    uint64_t value = 0;
    for (size_t i = 1; i < f.length; ++i) {
      if (value >> 56) return std::nullopt;  // too large for 64 bits
      value = (value << 8) | block[f.at + i];
    }
    return value;
  }
  size_t i = 0;
  while (i < f.length && block[f.at + i] == ' ') ++i;
  uint64_t value = 0;
  bool any = false;
  for (; i < f.length && block[f.at + i] >= '0' && block[f.at + i] <= '7'; ++i) {
    if (value >> 60) return std::nullopt;
    value = value * 8 + static_cast<uint64_t>(block[f.at + i] - '0');
    any = true;
  }
  for (; i < f.length; ++i) {
    if (block[f.at + i] != ' ' && block[f.at + i] != '\0') return std::nullopt;
  }
  if (!any) return std::nullopt;
  return value;
}

/// A NUL-terminated (or field-filling) text field; nullopt when bytes follow its NUL.
std::optional<std::string> get_text(const Block& block, Field f) {
  const auto* begin = reinterpret_cast<const char*>(block.data() + f.at);
  const size_t length = strnlen(begin, f.length);
  for (size_t i = length; i < f.length; ++i) {
    if (begin[i] != '\0') return std::nullopt;
  }
  return std::string(begin, length);
}

uint64_t checksum_of(const Block& block) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    sum += (i >= kChecksum.at && i < kChecksum.at + kChecksum.length) ? ' ' : block[i];
  }
  return sum;
}

bool all_zero(const unsigned char* data, size_t size) { return std::all_of(data, data + size, [](unsigned char c) { return c == 0; }); }

/// A write that failed is the disk's or the folder's fault, never the archive's (FolderNotWritable).
[[noreturn]] void write_failed(const std::string& path, int error) {
  if (error == ENOSPC || error == EDQUOT) throw FolderNotWritable("cannot write " + path + ": the disk is full", "Free some space, or write the file elsewhere");
  throw FolderNotWritable("cannot write " + path + ": " + std::strerror(error), "Check the folder and its free space");
}

void write_fd(int fd, const void* data, size_t size, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) write_failed(path, n < 0 ? errno : ENOSPC);
    p += n;
    size -= static_cast<size_t>(n);
  }
}
}  // namespace

void TarWriter::write_all(const void* data, size_t size) {
  write_fd(fd_, data, size, path_);
  written_ += size;
}

void TarWriter::add(const std::string& name, const void* data, uint64_t size, int64_t mtime_s, char type, const std::string& link) {
  if (type == '1' || type == '2' || type == '5') size = 0;  // no bytes of their own
  Block header{};
  // ustar keeps a long name as prefix "/" name, split at a slash.
  std::string prefix;
  std::string leaf = name;
  if (name.size() > kName.length) {
    const size_t slash = name.rfind('/', kPrefix.length);
    if (slash == std::string::npos || name.size() - slash - 1 > kName.length || slash == 0) {
      throw Error("cannot write " + path_ + ": the member name " + name + " is too long for the tar format (ustar: 100 bytes, or 155 + 100 split at a '/')",
                  "Give the model file a shorter name");
    }
    prefix = name.substr(0, slash);
    leaf = name.substr(slash + 1);
  }
  std::memcpy(header.data() + kName.at, leaf.data(), leaf.size());
  std::memcpy(header.data() + kPrefix.at, prefix.data(), prefix.size());
  put_octal(header, kMode, 0644);
  put_octal(header, kUid, 0);
  put_octal(header, kGid, 0);
  put_number(header, kSize, size);
  put_number(header, kMtime, static_cast<uint64_t>(std::max<int64_t>(0, mtime_s)));
  header[kType] = static_cast<unsigned char>(type);
  if (link.size() > kLink.length) throw Error("cannot write " + path_ + ": the link target " + link + " is too long for the tar format");
  std::memcpy(header.data() + kLink.at, link.data(), link.size());
  std::memcpy(header.data() + kMagic.at, "ustar", 6);  // with its NUL
  std::memcpy(header.data() + kVersion.at, "00", 2);
  const std::string sum = fmt::format("{:06o}", checksum_of(header));
  std::memcpy(header.data() + kChecksum.at, sum.data(), 6);
  header[kChecksum.at + 6] = '\0';
  header[kChecksum.at + 7] = ' ';
  write_all(header.data(), header.size());
  write_all(data, size);
  const Block zeros{};
  write_all(zeros.data(), padding_of(size));
}

void TarWriter::finish() {
  const Block zeros{};
  write_all(zeros.data(), zeros.size());
  write_all(zeros.data(), zeros.size());
}

bool TarReader::read_exact(void* into, size_t size, const char* what, bool end_allowed) {
  auto* p = static_cast<char*>(into);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd_, p + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read " + path_ + ": " + std::strerror(errno), "Check the file");
    if (n == 0) {
      if (got == 0 && end_allowed) return false;
      throw Error(fmt::format("{} is truncated: it ends inside {} (member {})", path_, what, members_),
                  "Copy the whole file again (its size should match the one it was written with)");
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

void TarReader::skip_rest() {
  std::vector<char> buffer(std::min<uint64_t>(left_ + padding_, uint64_t{1} << 20));
  while (left_ > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, buffer.size()));
    read_exact(buffer.data(), n, "a member's bytes");
    left_ -= n;
  }
  if (padding_ > 0) read_exact(buffer.data(), static_cast<size_t>(padding_), "a member's padding");
  padding_ = 0;
}

std::optional<TarMember> TarReader::next() {
  if (ended_) return std::nullopt;
  skip_rest();
  Block header{};
  if (!read_exact(header.data(), header.size(), "a header", /*end_allowed=*/true)) {
    throw Error(fmt::format("{} is truncated: it ends after {} member(s), without the end of the archive", path_, members_),
                "Copy the whole file again (its size should match the one it was written with)");
  }
  if (all_zero(header.data(), header.size())) {
    // A file of zeros (or one that starts with them) holds no archive: said at its first block, not
    // after reading it to its end.
    if (members_ == 0) throw Error(path_ + " holds no tar archive: it starts with a block of zeros", "Give the file `ortfleet cache export` wrote");
    // The end: a second zero block, then nothing but zeros (some writers pad to a record).
    ended_ = true;
    if (!read_exact(header.data(), header.size(), "the end of the archive") || !all_zero(header.data(), header.size())) {
      throw Error(path_ + " is damaged: a lone zero block inside the archive", "Copy the file again from where it was written");
    }
    check_end_padding();
    return std::nullopt;
  }
  ++members_;
  const auto damaged = [&](const std::string& what) {
    return Error(fmt::format("{} is damaged: the header of member {} {}", path_, members_, what),
                 "Copy the file again from where it was written, or export it again");
  };
  const auto stored_sum = get_number(header, kChecksum);
  if (!stored_sum || *stored_sum != checksum_of(header)) throw damaged("fails its checksum");
  if (std::memcmp(header.data() + kMagic.at, "ustar", 5) != 0) throw damaged("is not a POSIX tar (ustar) header");
  const auto size = get_number(header, kSize);
  if (!size) throw damaged("has no readable size");
  const auto name = get_text(header, kName);
  const auto prefix = get_text(header, kPrefix);
  const auto link = get_text(header, kLink);
  if (!name || !prefix || !link) throw damaged("has a name that does not end where its field does");
  TarMember m;
  m.name = prefix->empty() ? *name : *prefix + "/" + *name;
  m.size = *size;
  m.type = static_cast<char>(header[kType]);
  m.link = *link;
  m.index = members_;
  // Links and folders carry no bytes of their own, whatever their size field says; extensions (GNU
  // long names, pax headers) carry theirs: either way they are skipped as the format says.
  left_ = (m.type == '1' || m.type == '2' || m.type == '5') ? 0 : m.size;
  padding_ = padding_of(left_);
  return m;
}

void TarReader::check_end_padding() {
  // Writers pad an archive to their record size (GNU tar: 10 KiB by default, 1 MiB at the largest
  // blocking factor anyone uses): more is not padding, and is not read to its end.
  constexpr uint64_t kMostPadding = uint64_t{1} << 20;
  std::array<unsigned char, 65536> rest{};
  uint64_t padding = 0;
  for (;;) {
    const ssize_t n = ::read(fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read " + path_ + ": " + std::strerror(errno), "Check the file");
    if (n == 0) return;
    padding += static_cast<uint64_t>(n);
    if (!all_zero(rest.data(), static_cast<size_t>(n)) || padding > kMostPadding) {
      throw Error(path_ + " has bytes after the end of its archive", "It is not a file `ortfleet cache export` wrote, or was appended to");
    }
  }
}

void TarReader::copy_to(int out, const std::string& out_path) {
  std::vector<char> buffer(static_cast<size_t>(std::min<uint64_t>(std::max<uint64_t>(left_, 1), uint64_t{4} << 20)));
  while (left_ > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, buffer.size()));
    read_exact(buffer.data(), n, "a member's bytes");
    write_fd(out, buffer.data(), n, out_path);
    left_ -= n;
  }
}

std::string TarReader::read_small(uint64_t limit) {
  if (left_ > limit) {
    throw Error(fmt::format("{} is damaged: member {} claims {} bytes, more than the {} it may have", path_, members_, left_, limit),
                "Export it again");
  }
  std::string text(static_cast<size_t>(left_), '\0');
  if (left_ > 0) read_exact(text.data(), text.size(), "a member's bytes");
  left_ = 0;
  return text;
}

}  // namespace ortfleet::detail
