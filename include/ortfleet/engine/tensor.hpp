#pragma once
// Tensors crossing ortfleet's API: host or device memory, owned or borrowed, with ONNX's element types.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

/// ONNX TensorProto element types (same numbering).
enum class ElementType : int {
  undefined = 0, float32 = 1, uint8 = 2, int8 = 3, uint16 = 4, int16 = 5, int32 = 6, int64 = 7,
  string = 8, boolean = 9, float16 = 10, float64 = 11, uint32 = 12, uint64 = 13, bfloat16 = 16
};

/// One row of the element-type table: how each type is named and stored, and what it is called in
/// numpy and DLPack (the exchange protocols of the Python module).
struct ElementTypeInfo {
  ElementType type;
  const char* name;     ///< "float32", ...; also numpy's name where numpy has the type
  size_t size;          ///< bytes per element; 0 for string
  char numpy_kind;      ///< numpy's dtype.kind ('f', 'i', 'u', 'b'), 0 where numpy lacks the type
  int dlpack_code;      ///< DLPack's type code (0 int, 1 uint, 2 float, 4 bfloat, 6 bool), -1 where none
};
/// Every element type ortfleet handles.
const std::vector<ElementTypeInfo>& element_types();
/// The row of `type`; nullptr for undefined.
const ElementTypeInfo* element_type_info(ElementType type);

size_t element_size(ElementType type);    ///< bytes per element; 0 for string/undefined
std::string to_string(ElementType type);  ///< "float32", ...
ElementType parse_element_type(const std::string& name);

/// A model input or output as the model declares it; -1 marks a dynamic dimension.
struct TensorSpec {
  std::string name;
  ElementType type = ElementType::undefined;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;  ///< symbolic names of dynamic dimensions ("batch"), "" otherwise
};

/// A tensor: `data` points at `bytes` bytes in host memory or on `device` (a GPU). `owner` keeps the
/// memory alive when the tensor owns it (a std::vector, an ONNX Runtime value, a shared-memory
/// mapping); a null owner means the caller keeps the memory alive for as long as the tensor is used.
struct Tensor {
  std::string name;
  ElementType type = ElementType::float32;
  std::vector<int64_t> shape;
  void* data = nullptr;
  size_t bytes = 0;
  Device device = Device::cpu();  ///< where `data` lives; cpu = host memory
  std::shared_ptr<void> owner;

  int64_t element_count() const;
  /// In a device's memory of its own (a GPU's), not the host's: made and copied by the device's execution
  /// provider (ortfleet/engine/device_tensor.hpp).
  bool on_gpu() const { return device.kind != Device::Kind::cpu; }

  /// A host tensor owning a copy of `bytes` (zero-filled when src is null).
  static Tensor host_copy(std::string name, ElementType type, std::vector<int64_t> shape, const void* src);
  /// A host tensor owning uninitialised memory for its elements: for the caller to write every byte of
  /// (an output copied down from a GPU), without zeroing it first.
  static Tensor host_allocate(std::string name, ElementType type, std::vector<int64_t> shape);
  /// A tensor over memory the caller owns.
  static Tensor borrow(std::string name, ElementType type, std::vector<int64_t> shape, void* data, Device device = Device::cpu());
  template <typename T>
  T* values() { return static_cast<T*>(data); }
  template <typename T>
  const T* values() const { return static_cast<const T*>(data); }
};

/// Elements in a tensor of `shape`, and its bytes for `type`; throws ortfleet::Error naming `what`
/// when a dim is negative or the size overflows.
int64_t checked_element_count(const std::vector<int64_t>& shape, const std::string& what);
size_t checked_bytes(const std::vector<int64_t>& shape, ElementType type, const std::string& what);

/// "[batch, 3, 224, 224]": dims, dynamic ones by name (or '?').
std::string shape_text(const TensorSpec& spec);
std::string shape_text(const std::vector<int64_t>& dims);

/// Inputs with random values matching `specs`, deterministic from `seed`: what warm-up runs feed the
/// model. Dynamic dimensions take `dynamic_dim`. Values lie in `ranges[name]` when given (a
/// vocabulary, a sample rate), else in [-1, 1) for floats and {0, 1} for integers.
std::vector<Tensor> random_inputs(const std::vector<TensorSpec>& specs, uint64_t seed, int64_t dynamic_dim = 1,
                                  const std::map<std::string, ValueRange>& ranges = {});

/// A float as IEEE half precision (round to nearest even) and as bfloat16.
uint16_t float_to_half(float value);
uint16_t float_to_bfloat16(float value);

}  // namespace ortfleet
