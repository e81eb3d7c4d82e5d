#include "engine/files/npy_file.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <unistd.h>

#include "base/file_reading.hpp"
#include "engine/files/mapped_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/engine/tensor.hpp"

#ifdef ORTFLEET_HAVE_ZLIB
#include <zlib.h>
#endif

namespace ortfleet::detail {
namespace {

constexpr std::string_view kNpyMagic = "\x93NUMPY";
constexpr const char* kNpyHint = "Save the arrays with numpy.save or numpy.savez (C order, a numeric dtype)";

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  throw Error(path + " is not a numpy array file ortfleet can read: " + why, kNpyHint);
}

/// numpy's dtype string ("<f4", "|b1") for an element type, and back.
std::string descr_of(ElementType type) {
  const auto* info = element_type_info(type);
  if (info == nullptr || info->numpy_kind == 0) throw Error("numpy has no dtype for " + to_string(type));
  const char order = info->size == 1 ? '|' : '<';
  return fmt::format("{}{}{}", order, info->numpy_kind, info->size);
}

ElementType type_of_descr(const std::string& descr, const std::string& path) {
  if (descr.size() < 3) bad_file(path, "its dtype '" + descr + "' is not one ONNX has");
  const char order = descr[0];
  const char kind = descr[1];
  const size_t size = std::strtoul(descr.c_str() + 2, nullptr, 10);
  if (order == '>' && size > 1) bad_file(path, "its dtype '" + descr + "' is big-endian; convert it with .astype('<" + descr.substr(1) + "')");
  for (const auto& row : element_types()) {
    if (row.numpy_kind == kind && row.size == size) return row.type;
  }
  bad_file(path, "its dtype '" + descr + "' has no ONNX element type (use float32, float16, int64, int32, uint8, bool, ...)");
}

/// The value after `'key':` in numpy's header dict, up to the next top-level ',' or '}'.
std::string header_value(const std::string& header, const std::string& key, const std::string& path) {
  const auto at = header.find("'" + key + "'");
  if (at == std::string::npos) bad_file(path, "its header has no '" + key + "'");
  size_t i = header.find(':', at);
  if (i == std::string::npos) bad_file(path, "its header is malformed");
  ++i;
  while (i < header.size() && header[i] == ' ') ++i;
  size_t end = i;
  int depth = 0;
  while (end < header.size() && (depth > 0 || (header[end] != ',' && header[end] != '}'))) {
    if (header[end] == '(') ++depth;
    if (header[end] == ')') --depth;
    ++end;
  }
  return header.substr(i, end - i);
}

/// numpy's shape tuple, "(2, 3)", "(5,)" or "()": dims of 0 or more, each a number.
std::vector<int64_t> shape_of_header(const std::string& text, const std::string& path) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') bad_file(path, "its shape " + text + " is not a tuple");
  std::vector<int64_t> shape;
  std::istringstream dims(text.substr(1, text.size() - 2));
  for (std::string dim; std::getline(dims, dim, ',');) {
    const auto first = dim.find_first_not_of(' ');
    if (first == std::string::npos) continue;  // the empty piece after the comma of "(5,)"
    dim = dim.substr(first, dim.find_last_not_of(' ') - first + 1);
    if (dim.front() == '-') bad_file(path, "its shape " + text + " has a negative dim (" + dim + "); numpy never writes one, so the file is damaged");
    if (dim.find_first_not_of("0123456789") != std::string::npos || dim.size() > 18) {
      bad_file(path, "its shape " + text + " has a dim that is not a whole number of at most 18 digits (" + dim + ")");
    }
    shape.push_back(std::stoll(dim));
  }
  return shape;
}

/// Parses one `.npy` image (`data`, `size` bytes) into a host tensor.
Tensor parse_npy(const unsigned char* data, size_t size, const std::string& name, const std::string& path) {
  if (size < 10 || std::memcmp(data, kNpyMagic.data(), kNpyMagic.size()) != 0) bad_file(path, "it does not start with numpy's magic bytes");
  const int major = data[6];
  size_t header_len = 0;
  size_t offset = 0;
  if (major == 1) {
    header_len = data[8] | (size_t{data[9]} << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) bad_file(path, "it is cut short");
    header_len = data[8] | (size_t{data[9]} << 8) | (size_t{data[10]} << 16) | (size_t{data[11]} << 24);
    offset = 12;
  } else {
    bad_file(path, fmt::format("its format version {} is unknown", major));
  }
  if (header_len > size - offset) bad_file(path, "it is cut short");
  const std::string header(reinterpret_cast<const char*>(data + offset), header_len);
  offset += header_len;

  std::string descr = header_value(header, "descr", path);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"')) bad_file(path, "its dtype is structured or not a string");
  descr = descr.substr(1, descr.size() - 2);
  const ElementType type = type_of_descr(descr, path);
  if (header_value(header, "fortran_order", path) != "False") bad_file(path, "it is in Fortran order; save numpy.ascontiguousarray(a)");
  const std::vector<int64_t> shape = shape_of_header(header_value(header, "shape", path), path);
  const size_t bytes = checked_bytes(shape, type, "array '" + name + "' of " + path);
  if (bytes > size - offset) bad_file(path, fmt::format("array '{}' needs {} bytes and the file holds {}", name, bytes, size - offset));
  return Tensor::host_copy(name, type, shape, data + offset);
}

uint16_t u16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const unsigned char* p) { return u16(p) | (static_cast<uint32_t>(u16(p + 2)) << 16); }
uint64_t u64(const unsigned char* p) { return u32(p) | (static_cast<uint64_t>(u32(p + 4)) << 32); }

void put16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
void put32(std::string& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v & 0xffff));
  put16(out, static_cast<uint16_t>(v >> 16));
}

uint32_t crc32_of(const std::string& bytes) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (const char b : bytes) c = table[(c ^ static_cast<unsigned char>(b)) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/// One member of a zip file, as its central directory records it.
struct ZipMember {
  std::string name;
  uint16_t method = 0;
  uint64_t compressed = 0;
  uint64_t uncompressed = 0;
  uint64_t local_offset = 0;
};

/// Applies a zip64 extra field (id 1) to the fields the entry marked as too large for 32 bits.
void apply_zip64(ZipMember& m, const unsigned char* extra, size_t length, bool want_uncompressed, bool want_compressed, bool want_offset) {
  for (size_t i = 0; i + 4 <= length;) {
    const uint16_t id = u16(extra + i);
    const uint16_t n = u16(extra + i + 2);
    if (i + 4 + n > length) return;
    if (id == 1) {
      size_t at = i + 4;
      auto take = [&](uint64_t& field) {
        if (at + 8 <= i + 4 + n) field = u64(extra + at);
        at += 8;
      };
      if (want_uncompressed) take(m.uncompressed);
      if (want_compressed) take(m.compressed);
      if (want_offset) take(m.local_offset);
      return;
    }
    i += 4 + n;
  }
}

std::vector<ZipMember> zip_members(const unsigned char* data, size_t size, const std::string& path) {
  if (size < 22) bad_file(path, "it is not a zip file (too short)");
  size_t eocd = std::string::npos;
  const size_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (size_t i = size - 22 + 1; i-- > lowest;) {
    if (u32(data + i) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos) bad_file(path, "it is not a zip file (no end of central directory)");
  uint64_t count = u16(data + eocd + 10);
  uint64_t dir_size = u32(data + eocd + 12);
  uint64_t dir_offset = u32(data + eocd + 16);
  if ((count == 0xffff || dir_offset == 0xffffffffu) && eocd >= 20 && u32(data + eocd - 20) == 0x07064b50) {
    const uint64_t record = u64(data + eocd - 20 + 8);  // the zip64 end of central directory
    if (record + 56 > size || u32(data + record) != 0x06064b50) bad_file(path, "its zip64 directory is damaged");
    count = u64(data + record + 32);
    dir_size = u64(data + record + 40);
    dir_offset = u64(data + record + 48);
  }
  if (dir_offset > size || dir_size > size - dir_offset) bad_file(path, "its zip directory lies outside the file");
  std::vector<ZipMember> members;
  size_t at = dir_offset;
  for (uint64_t k = 0; k < count; ++k) {
    if (at + 46 > size || u32(data + at) != 0x02014b50) bad_file(path, "its zip directory is damaged");
    ZipMember m;
    m.method = u16(data + at + 10);
    m.compressed = u32(data + at + 20);
    m.uncompressed = u32(data + at + 24);
    const uint16_t name_len = u16(data + at + 28);
    const uint16_t extra_len = u16(data + at + 30);
    const uint16_t comment_len = u16(data + at + 32);
    m.local_offset = u32(data + at + 42);
    if (at + 46 + name_len + extra_len + comment_len > size) bad_file(path, "its zip directory is damaged");
    m.name.assign(reinterpret_cast<const char*>(data + at + 46), name_len);
    apply_zip64(m, data + at + 46 + name_len, extra_len, m.uncompressed == 0xffffffffu, m.compressed == 0xffffffffu,
                m.local_offset == 0xffffffffu);
    members.push_back(std::move(m));
    at += 46 + name_len + extra_len + comment_len;
  }
  return members;
}

/// The uncompressed bytes of member `m`.
std::string member_bytes(const unsigned char* data, size_t size, const ZipMember& m, const std::string& path) {
  const uint64_t local = m.local_offset;
  if (local + 30 > size || u32(data + local) != 0x04034b50) bad_file(path, "member " + m.name + " is damaged");
  const uint64_t start = local + 30 + u16(data + local + 26) + u16(data + local + 28);
  if (start > size || m.compressed > size - start) bad_file(path, "member " + m.name + " is cut short");
  const auto* body = data + start;
  if (m.method == 0) {
    if (m.compressed != m.uncompressed) bad_file(path, "member " + m.name + " has inconsistent sizes");
    return {reinterpret_cast<const char*>(body), m.compressed};
  }
  if (m.method != 8) bad_file(path, fmt::format("member {} uses zip compression method {} (numpy uses stored or deflate)", m.name, m.method));
#ifdef ORTFLEET_HAVE_ZLIB
  std::string out(m.uncompressed, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw Error("zlib could not start inflating " + m.name + " of " + path);
  z.next_in = const_cast<Bytef*>(body);  // zlib's API is not const-correct; it only reads the input
  z.avail_in = static_cast<uInt>(std::min<uint64_t>(m.compressed, std::numeric_limits<uInt>::max()));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(std::min<uint64_t>(m.uncompressed, std::numeric_limits<uInt>::max()));
  const int rc = inflate(&z, Z_FINISH);
  const uint64_t produced = z.total_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != m.uncompressed) bad_file(path, "member " + m.name + " does not inflate to its recorded size");
  return out;
#else
  bad_file(path, "member " + m.name + " is compressed and this build has no zlib; save with numpy.savez instead of savez_compressed");
#endif
}

}  // namespace

Tensor read_npy(const std::string& path, const std::string& name) {
  const MappedFile file(path);
  return parse_npy(static_cast<const unsigned char*>(file.data()), file.size(), name, path);
}

std::vector<Tensor> read_npz(const std::string& path) {
  const MappedFile file(path);
  const auto* data = static_cast<const unsigned char*>(file.data());
  std::vector<Tensor> out;
  for (const ZipMember& m : zip_members(data, file.size(), path)) {
    if (m.name.empty() || m.name.back() == '/') continue;
    const std::string bytes = member_bytes(data, file.size(), m, path);
    std::string name = m.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    out.push_back(parse_npy(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), name, path + ":" + m.name));
  }
  if (out.empty()) {
    throw Error(path + " is an .npz file with no arrays in it",
                "Save the warm-up inputs into it by name: numpy.savez(FILE, input_name=array, ...)");
  }
  return out;
}

std::vector<Tensor> read_array_file(const std::string& path, const std::string& npy_name) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error("cannot read the array file " + path + ": it does not exist or is not a file", "Check the path");
  }
  const FileToRead file = open_file_to_read(path, "the array file", "Check the path");  // never waiting on a pipe put there since
  std::array<char, 4> head{};
  const ssize_t got = ::pread(file.fd.get(), head.data(), head.size(), 0);
  // A zip file: its first member, or the end of its directory when it has none (numpy.savez(FILE)).
  if (got == 4 && (std::memcmp(head.data(), "PK\x03\x04", 4) == 0 || std::memcmp(head.data(), "PK\x05\x06", 4) == 0)) {
    return read_npz(path);
  }
  return {read_npy(path, npy_name)};
}

std::string npy_bytes(const Tensor& tensor) {
  if (tensor.on_gpu()) throw Error("tensor '" + tensor.name + "' is on " + tensor.device.to_string() + "; copy it to the host first");
  std::string shape;
  for (const auto d : tensor.shape) shape += std::to_string(d) + ", ";
  if (tensor.shape.size() > 1) shape.resize(shape.size() - 1);  // "(1, 3)" but "(5,)"
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr_of(tensor.type), shape);
  // numpy pads the header with spaces and a newline so that the data starts 64-byte aligned.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kNpyMagic);
  out.push_back('\x01');
  out.push_back('\x00');
  put16(out, static_cast<uint16_t>(header.size()));
  out += header;
  out.append(static_cast<const char*>(tensor.data), tensor.bytes);
  return out;
}

void write_npz(const std::string& path, const std::vector<Tensor>& tensors) {
  std::string archive;
  std::string directory;
  for (const Tensor& t : tensors) {
    const std::string name = t.name + ".npy";
    const std::string body = npy_bytes(t);
    if (archive.size() + body.size() >= 0xffffffffu) throw Error("cannot write " + path + ": more than 4 GB of arrays");
    const uint32_t crc = crc32_of(body);
    const auto offset = static_cast<uint32_t>(archive.size());
    auto header = [&](std::string& out, bool central) {
      put32(out, central ? 0x02014b50 : 0x04034b50);
      if (central) put16(out, 20);  // made by
      put16(out, 20);               // needed to extract
      put16(out, 0);                // flags
      put16(out, 0);                // stored
      put16(out, 0);                // time
      put16(out, 0x21);             // date: 1980-01-01
      put32(out, crc);
      put32(out, static_cast<uint32_t>(body.size()));
      put32(out, static_cast<uint32_t>(body.size()));
      put16(out, static_cast<uint16_t>(name.size()));
      put16(out, 0);  // extra
      if (central) {
        put16(out, 0);  // comment
        put16(out, 0);  // disk
        put16(out, 0);  // internal attributes
        put32(out, 0);  // external attributes
        put32(out, offset);
      }
      out += name;
    };
    header(archive, false);
    archive += body;
    header(directory, true);
  }
  const auto dir_offset = static_cast<uint32_t>(archive.size());
  archive += directory;
  put32(archive, 0x06054b50);
  put16(archive, 0);
  put16(archive, 0);
  put16(archive, static_cast<uint16_t>(tensors.size()));
  put16(archive, static_cast<uint16_t>(tensors.size()));
  put32(archive, static_cast<uint32_t>(directory.size()));
  put32(archive, dir_offset);
  put16(archive, 0);
  write_output_file(path, archive);
}

}  // namespace ortfleet::detail
