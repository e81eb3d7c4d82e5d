#pragma once
// numpy's array files, read and written without Python: `.npy` (one array) and `.npz` (a zip of
// `.npy` files, one per name, as numpy.savez and numpy.savez_compressed write them). Warm-up inputs
// come in these files (--warmup-inputs), and a crash reproducer is written as one.
#include <string>
#include <vector>

#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {

/// One `.npy` file's array, named `name`. Throws ortfleet::Error naming the file and what is wrong
/// (not an array file, a dtype ONNX has no type for, Fortran order, a cut-short file).
Tensor read_npy(const std::string& path, const std::string& name);
/// The arrays of a `.npz` file, each named after its member without ".npy", in the file's order.
/// Members stored or deflated (numpy.savez_compressed) are read; deflated ones need zlib at build time.
std::vector<Tensor> read_npz(const std::string& path);
/// The arrays of `path`: a `.npz` file's members, or a `.npy` file's one array named `npy_name`.
std::vector<Tensor> read_array_file(const std::string& path, const std::string& npy_name);

/// The bytes of a `.npy` file holding `tensor` (host memory; not string tensors).
std::string npy_bytes(const Tensor& tensor);
/// Writes `tensors` (host memory) as an uncompressed `.npz` file numpy.load reads, each under its name.
void write_npz(const std::string& path, const std::vector<Tensor>& tensors);

}  // namespace ortfleet::detail
