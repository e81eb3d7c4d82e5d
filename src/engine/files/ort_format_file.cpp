#include "engine/files/ort_format_file.hpp"

#include <cstring>
#include <filesystem>

#include "engine/files/mapped_file.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

namespace {

// The fields read, by their index in ONNX Runtime's schema (onnxruntime/core/flatbuffers/schema/ort.fbs).
// A FlatBuffer finds a table's fields through its vtable, so fields added later do not move these.
constexpr int kSessionModel = 1;      // InferenceSession.model
constexpr int kModelGraph = 7;        // Model.graph
constexpr int kGraphInitializers = 0; // Graph.initializers
constexpr int kGraphNodes = 2;        // Graph.nodes
constexpr int kNodeProvider = 7;      // Node.execution_provider_type
constexpr int kNodeInputs = 8;        // Node.inputs
constexpr int kNodeImplicitInputs = 12;  // Node.implicit_inputs (what its subgraphs read)
constexpr int kTensorName = 0;        // Tensor.name
constexpr int kTensorDims = 2;        // Tensor.dims
constexpr int kTensorDataType = 3;    // Tensor.data_type
constexpr int kTensorRawData = 4;     // Tensor.raw_data

/// Bounds-checked reads of a FlatBuffer in memory: every offset is checked against the buffer before
/// it is followed, so a damaged file is an error, never a read outside the mapping.
class FlatBuffer {
 public:
  explicit FlatBuffer(const MappedFile& file)
      : data_(static_cast<const std::byte*>(file.data())), size_(file.size()), path_(file.path()) {}

  template <typename T>
  T read(uint64_t at) const {
    need(at, sizeof(T));
    T value;
    std::memcpy(&value, data_ + at, sizeof(T));  // FlatBuffers are little-endian, as is every host ortfleet builds for
    return value;
  }

  /// The position of the root table.
  uint64_t root() const { return read<uint32_t>(0); }

  /// The position of field `index` of the table at `table`, or 0 when the field is absent.
  uint64_t field(uint64_t table, int index) const {
    const int64_t vtable = static_cast<int64_t>(table) - read<int32_t>(table);
    if (vtable < 0) fail("a table's vtable lies before the file");
    const auto vtable_bytes = read<uint16_t>(static_cast<uint64_t>(vtable));
    const uint64_t slot = 4 + 2 * static_cast<uint64_t>(index);
    if (slot + 2 > vtable_bytes) return 0;
    const auto offset = read<uint16_t>(static_cast<uint64_t>(vtable) + slot);
    return offset == 0 ? 0 : table + offset;
  }

  /// Follows the offset stored at `at` (a table, vector or string field).
  uint64_t follow(uint64_t at) const { return at + read<uint32_t>(at); }

  /// A vector at `at`: its element count and where the elements start, checked to lie in the file.
  std::pair<uint64_t, uint64_t> vector(uint64_t at, uint64_t element_bytes) const {
    const uint64_t count = read<uint32_t>(at);
    need(at + 4, count * element_bytes);
    return {count, at + 4};
  }

  std::string string(uint64_t at) const {
    const auto [length, begin] = vector(at, 1);
    return {reinterpret_cast<const char*>(data_ + begin), static_cast<size_t>(length)};
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("ORT-format model " + path_ + " is damaged: " + what, "Clear the model cache (ortfleet cache clear) or save the model again");
  }

 private:
  void need(uint64_t at, uint64_t bytes) const {
    if (at > size_ || bytes > size_ - at) fail("an offset points past its end (" + std::to_string(size_) + " bytes)");
  }

  const std::byte* data_;
  uint64_t size_;
  const std::string& path_;
};

}  // namespace

bool has_ort_format_identifier(const MappedFile& file) {
  return file.size() >= 8 && std::memcmp(static_cast<const char*>(file.data()) + 4, "ORTM", 4) == 0;
}

namespace {
/// The position of the main graph's table in `fb`, which reads `file`.
uint64_t main_graph(const FlatBuffer& fb, const MappedFile& file) {
  if (!has_ort_format_identifier(file)) fb.fail("it lacks the ORT-format identifier 'ORTM'");
  const uint64_t model = fb.field(fb.root(), kSessionModel);
  if (model == 0) fb.fail("it holds no model");
  const uint64_t graph = fb.field(fb.follow(model), kModelGraph);
  if (graph == 0) fb.fail("its model holds no graph");
  return fb.follow(graph);
}

}  // namespace

std::vector<InitializerBytes> ort_format_initializers(const MappedFile& file) {
  const FlatBuffer fb(file);
  const uint64_t initializers = fb.field(main_graph(fb, file), kGraphInitializers);
  std::vector<InitializerBytes> out;
  if (initializers == 0) return out;
  const std::string absolute = fs::absolute(file.path()).string();
  const auto [count, first] = fb.vector(fb.follow(initializers), 4);
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t tensor = fb.follow(first + 4 * i);
    const uint64_t raw = fb.field(tensor, kTensorRawData);
    if (raw == 0) continue;  // a string tensor, or bytes kept outside the FlatBuffer
    InitializerBytes init;
    init.file = absolute;
    const auto [bytes, data] = fb.vector(fb.follow(raw), 1);
    init.offset = data;
    init.bytes = bytes;
    if (const uint64_t name = fb.field(tensor, kTensorName); name != 0) init.name = fb.string(fb.follow(name));
    if (init.name.empty()) fb.fail("initializer " + std::to_string(i) + " has no name");
    if (const uint64_t type = fb.field(tensor, kTensorDataType); type != 0) {
      init.type = static_cast<ElementType>(fb.read<int32_t>(type));
    }
    if (const uint64_t dims = fb.field(tensor, kTensorDims); dims != 0) {
      const auto [rank, begin] = fb.vector(fb.follow(dims), 8);
      for (uint64_t d = 0; d < rank; ++d) init.dims.push_back(fb.read<int64_t>(begin + 8 * d));
    }
    out.push_back(std::move(init));
  }
  return out;
}

std::unordered_set<std::string> inputs_of_nodes_not_on(const MappedFile& file, const std::string& provider) {
  const FlatBuffer fb(file);
  const uint64_t nodes = fb.field(main_graph(fb, file), kGraphNodes);
  std::unordered_set<std::string> out;
  if (nodes == 0) return out;
  const auto [count, first] = fb.vector(fb.follow(nodes), 4);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t node = fb.follow(first + 4 * i);
    const uint64_t assigned = fb.field(node, kNodeProvider);
    if (assigned != 0 && fb.string(fb.follow(assigned)) == provider) continue;
    for (const int list : {kNodeInputs, kNodeImplicitInputs}) {
      const uint64_t names = fb.field(node, list);
      if (names == 0) continue;
      const auto [n, begin] = fb.vector(fb.follow(names), 4);
      for (uint64_t k = 0; k < n; ++k) out.insert(fb.string(fb.follow(begin + 4 * k)));
    }
  }
  return out;
}

}  // namespace ortfleet::detail
