#include "engine/runtime/ort_errors.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cctype>

#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
namespace {

constexpr size_t kMaxCause = 300;
constexpr std::string_view kInconsistentGraph =
    "the model's graph is inconsistent (corrupt, or exported wrongly): check it with onnx.checker.check_model and re-export it";  // a cause longer than this is cut at a sentence (or word) boundary

struct KnownFailure {
  std::array<std::string_view, 2> needles;  // all must occur (an empty needle matches anything)
  std::string_view hint;                    // "{0}" stands for the number that follows `number_after`
  std::string_view number_after = {};       // when set, the rule applies only where that number is there
};

// First match wins: the specific causes come before the general ones they contain.
constexpr std::array kKnownFailures = {
    KnownFailure{{"Unsupported model IR version", ""},
                 "this ONNX Runtime reads models up to IR version {0}; re-export with an older onnx package (or set "
                 "the model's ir_version to {0}) or use a newer ONNX Runtime",
                 "max supported IR version: "},
    KnownFailure{{"is under development", "is till opset "},
                 "this ONNX Runtime reads opsets up to {0}; re-export with an older opset or use a newer ONNX Runtime",
                 "is till opset "},
    KnownFailure{{"No Op registered for", "domain_version of 0"},
                 "the model imports opset 0 of that domain, which has no operators: re-export it with a real opset"},
    KnownFailure{{"No Op registered for", ""},
                 "this ONNX Runtime has no kernel for that operator at the model's opset (a custom operator, a typo, "
                 "or an opset it does not know): re-export with a supported opset, or load the custom-op library"},
    KnownFailure{{"At least one output should be requested", ""},
                 "the model declares no outputs (its graph's output list is empty): re-export it with its outputs"},
    KnownFailure{{"Absolute path not allowed for external data", ""},
                 "ONNX Runtime reads external data only from the model's folder, and this model names its weights "
                 "file by an absolute path: move the file next to the .onnx and save the model with a relative "
                 "location (onnx.save(..., location=\"weights.bin\"))"},
    KnownFailure{{"External data path escapes model directory", ""},
                 "ONNX Runtime reads external data only from the model's folder, and this model's weights file lies "
                 "outside it: move the file next to the .onnx (or into a folder below it) and save the model with "
                 "that relative location"},
    KnownFailure{{"libcudnn", "cannot open"},
                 "cuDNN 9 is missing: install it (e.g. pip install nvidia-cudnn-cu13) and add its lib folder to "
                 "LD_LIBRARY_PATH; 'ortfleet doctor' shows which CUDA libraries resolve"},
    KnownFailure{{"libcu", "cannot open shared object"},
                 "a CUDA 13 runtime library is missing: install the CUDA 13 runtime (cudart, cuBLAS, cuRAND, cuFFT) and "
                 "add its lib folder to LD_LIBRARY_PATH; 'ortfleet doctor' shows which resolve"},
    KnownFailure{{"libcuda.so", ""},
                 "the NVIDIA driver (libcuda.so.1) is not installed or not visible; run 'ortfleet doctor'"},
    KnownFailure{{"no CUDA-capable device", ""},
                 "no GPU is visible to this process: check CUDA_VISIBLE_DEVICES and the driver ('ortfleet doctor')"},
    KnownFailure{{"out of memory", ""},
                 "the GPU ran out of memory: free memory on it, lower cuda.gpu_mem_limit, or run fewer sessions per GPU"},
    KnownFailure{{"Failed to allocate memory", ""},
                 "out of memory: free memory on the device, lower cuda.gpu_mem_limit, or run fewer sessions per device"},
    KnownFailure{{"invalid device ordinal", ""},
                 "that GPU does not exist; 'ortfleet doctor' lists the GPUs (CUDA_VISIBLE_DEVICES may hide some)"},
    KnownFailure{{"CUDA failure", ""},
                 "a CUDA call failed on the GPU: 'ortfleet doctor' checks the driver and libraries; nvidia-smi shows "
                 "the GPU's state (a reset or Xid error needs the machine's administrator)"},
    KnownFailure{{"Protobuf parsing failed", ""},
                 "the file is not a valid ONNX model (corrupt, truncated or another format); re-export it"},
    KnownFailure{{"is not a graph input, initializer, or output", ""},
                 kInconsistentGraph},
    KnownFailure{{"This is an invalid model", ""},
                 kInconsistentGraph},
    KnownFailure{{"External data path does not exist", ""},
                 "the model's external-data file is missing: keep it next to the .onnx file, under the name the model gives"},
    KnownFailure{{"No such file or directory", ""}, "check the model path"},
    KnownFailure{{"external data", ""},
                 "the model's external-data file is missing or unreadable: keep it next to the .onnx file"},
    KnownFailure{{"is not enabled in this build", ""},
                 "this ONNX Runtime build lacks that execution provider; point ORTFLEET_CUDA_EP at "
                 "libonnxruntime_providers_cuda.so or use an onnxruntime-gpu build"},
};

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// The decimal number that follows `label` in `text`, or "" when there is none.
std::string number_after(std::string_view text, std::string_view label) {
  const auto at = text.find(label);
  if (at == std::string_view::npos) return {};
  std::string digits;
  for (size_t i = at + label.size(); i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0; ++i) {
    digits += text[i];
  }
  return digits;
}

/// Python's "[ONNXRuntimeError] : 1 : FAIL : " (its code and status name), which says nothing to a user.
std::string_view without_status_prefix(std::string_view text) {
  if (!starts_with(text, "[ONNXRuntimeError]")) return text;
  size_t at = 0;
  for (int separators = 0; separators < 3; ++separators) {
    at = text.find(" : ", at);
    if (at == std::string_view::npos) return text;
    at += 3;
  }
  return text.substr(at);
}

/// Where `text[from]` starts a balanced (...) or [...], the index just past its end; `from` otherwise.
size_t past_balanced(std::string_view text, size_t from) {
  if (from >= text.size() || (text[from] != '(' && text[from] != '[')) return from;
  const char open = text[from];
  const char close = open == '(' ? ')' : ']';
  int depth = 0;
  for (size_t i = from; i < text.size(); ++i) {
    if (text[i] == open) ++depth;
    if (text[i] == close && --depth == 0) return i + 1;
  }
  return from;  // unbalanced: not a signature after all
}

size_t past_spaces(std::string_view text, size_t i) {
  while (i < text.size() && text[i] == ' ') ++i;
  return i;
}

/// After a source location, ONNX Runtime names the function that threw: a C++ signature
/// ("std::conditional_t<...> onnxruntime::CudaCall(ERRTYPE, ...) [with ERRTYPE = cudaError; ...]",
/// "onnxruntime::Model::Model(...)") or a bare CamelCase name ("ValidateExternalDataPathFromDir").
/// Returns the index past it (and the spaces after it), or `from` when none is there.
size_t past_function_name(std::string_view text, size_t from) {
  const size_t paren = text.find('(', from);
  const size_t sentence_end = text.find(". ", from);
  if (paren != std::string_view::npos && paren < sentence_end &&
      text.substr(from, paren - from).find("::") != std::string_view::npos) {
    size_t i = past_balanced(text, paren);
    if (i == paren) return from;
    i = past_spaces(text, i);
    if (starts_with(text.substr(i), "const")) i = past_spaces(text, i + 5);
    if (starts_with(text.substr(i), "[with ")) i = past_spaces(text, past_balanced(text, i));
    return i;
  }
  size_t end = from;
  int capitals = 0;
  while (end < text.size() && is_identifier_char(text[end])) {
    capitals += std::isupper(static_cast<unsigned char>(text[end])) != 0 ? 1 : 0;
    ++end;
  }
  // Three or more capitals in one word reads as a function name, not as the start of a sentence.
  if (capitals >= 3 && end < text.size() && text[end] == ' ') return past_spaces(text, end);
  return from;
}

/// Whether a source location ("/onnxruntime/core/graph/model.cc:192") has its extension at `dot`; then
/// `begin` is where its path starts and `end` the index past its line number.
bool source_location_at(std::string_view text, size_t dot, size_t& begin, size_t& end) {
  static constexpr std::array kExtensions = {".cc:", ".cpp:", ".cxx:", ".c:", ".h:", ".hpp:", ".cu:", ".cuh:"};
  size_t colon = std::string_view::npos;
  for (std::string_view ext : kExtensions) {
    if (starts_with(text.substr(dot), ext)) colon = dot + ext.size() - 1;
  }
  if (colon == std::string_view::npos) return false;
  end = colon + 1;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])) != 0) ++end;
  if (end == colon + 1) return false;
  begin = dot;
  while (begin > 0 && text[begin - 1] != ' ' && text[begin - 1] != ':') --begin;
  return begin < dot;
}

/// Drops every "path/file.cc:123 function-signature" (ONNX Runtime prints one per frame it rethrows through).
std::string without_source_locations(std::string_view text) {
  std::string out;
  size_t copied = 0;
  for (size_t dot = text.find('.'); dot != std::string_view::npos; dot = text.find('.', dot + 1)) {
    size_t begin = 0;
    size_t end = 0;
    if (dot < copied || !source_location_at(text, dot, begin, end)) continue;
    if (begin < copied) continue;
    out.append(text.substr(copied, begin - copied));
    copied = past_function_name(text, past_spaces(text, end));
    dot = copied == 0 ? 0 : copied - 1;
  }
  out.append(text.substr(copied));
  return out;
}

/// CUDA failures end in " ; hostname=... ; file=... ; line=... ; expr=...;": where, not why.
std::string without_cuda_call_site(std::string text) {
  for (std::string_view marker : {" ; hostname=", " ; file="}) {
    const auto at = text.find(marker);
    if (at != std::string::npos) text.erase(at);
  }
  return text;
}

/// "This is an invalid model. In Node, ("n", Relu, "", -1) : ("x": tensor(float),) -> ("y": ...) ,
/// Error No Op registered ..." -> "invalid model: node "n" (Relu): No Op registered ...".
std::string node_error(std::string text) {
  constexpr std::string_view kHead = "This is an invalid model. In Node, (";
  constexpr std::string_view kError = " , Error ";
  const auto head = text.find(kHead);
  const auto error = text.find(kError);
  if (head == std::string::npos || error == std::string::npos || error < head) return text;
  const std::string_view node = std::string_view(text).substr(head + kHead.size());
  const auto fields_end = node.find(')');
  std::string_view name;
  std::string_view op;
  if (fields_end != std::string_view::npos) {
    const std::string_view fields = node.substr(0, fields_end);
    const auto comma = fields.find(", ");
    name = fields.substr(0, comma);
    if (comma != std::string_view::npos) op = fields.substr(comma + 2, fields.find(',', comma + 2) - comma - 2);
  }
  std::string shorter = text.substr(0, head) + "invalid model: node " + std::string(name);
  if (!op.empty()) shorter += " (" + std::string(op) + ")";
  return shorter + ": " + text.substr(error + kError.size());
}

/// "ONNX Runtime only *guarantees* support ... Opset 9999 is under development ... Current official
/// support for domain ai.onnx is till opset 26." -> the two facts that matter.
std::string opset_error(std::string text) {
  const auto development = text.find(" is under development");
  const auto till = text.find("is till opset ");
  if (development == std::string::npos || till == std::string::npos) return text;
  const auto opset_word = text.rfind("Opset ", development);
  const auto domain_word = text.rfind("for domain ", till);
  if (opset_word == std::string::npos) return text;
  const std::string opset = text.substr(opset_word + 6, development - opset_word - 6);
  const std::string domain =
      domain_word == std::string::npos ? "ai.onnx" : text.substr(domain_word + 11, till - domain_word - 12);
  const auto lead = text.find("ONNX Runtime only");
  return text.substr(0, lead == std::string::npos ? 0 : lead) + "the model uses opset " + opset + " of " + domain +
         ", newer than this ONNX Runtime supports (up to opset " + number_after(text, "is till opset ") + ")";
}

/// A node that failed while running: "Non-zero status code returned while running Add node.
/// Name:'Add_8' Status Message: <why>" -> "node 'Add_8' (Add): <why>".
std::string running_node_error(std::string text) {
  constexpr std::string_view kHead = "Non-zero status code returned while running ";
  constexpr std::string_view kName = " node. Name:'";
  constexpr std::string_view kMessage = "' Status Message: ";
  const auto head = text.find(kHead);
  const auto name = head == std::string::npos ? head : text.find(kName, head);
  const auto message = name == std::string::npos ? name : text.find(kMessage, name);
  if (message == std::string::npos) return text;
  const std::string op = text.substr(head + kHead.size(), name - head - kHead.size());
  const std::string node = text.substr(name + kName.size(), message - name - kName.size());
  return text.substr(0, head) + "node '" + node + "' (" + op + "): " + text.substr(message + kMessage.size());
}

/// ONNX Runtime's broadcast check, "axis == 1 || axis == largest was false. Attempting to broadcast an
/// axis by a dimension other than 1. 9 by 10" -> "dims of 9 and 10 do not broadcast (one must be 1, or both equal)".
std::string broadcast_error(std::string text) {
  constexpr std::string_view kCheck = "axis == 1 || axis == largest was false. ";
  constexpr std::string_view kSays = "Attempting to broadcast an axis by a dimension other than 1. ";
  const auto says = text.find(kSays);
  if (says == std::string::npos) return text;
  const std::string first = number_after(text, kSays);
  const std::string second = number_after(text, std::string(kSays) + first + " by ");
  if (first.empty() || second.empty()) return text;
  const auto check = text.rfind(kCheck, says);
  const size_t begin = check != std::string::npos && check + kCheck.size() == says ? check : says;
  const size_t end = says + kSays.size() + first.size() + 4 + second.size();
  return text.substr(0, begin) + "dims of " + first + " and " + second + " do not broadcast (one must be 1, or both equal)" + text.substr(end);
}

/// One line of printable text, single-spaced, trimmed.
std::string one_line(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || (static_cast<unsigned char>(c) < 0x20) || c == 0x7f;
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

/// A long cause cut at the last sentence end (else word) before kMaxCause.
std::string cut(std::string text) {
  if (text.size() <= kMaxCause) return text;
  auto at = text.rfind(". ", kMaxCause);
  if (at != std::string::npos && at > kMaxCause / 3) return text.substr(0, at + 1);
  at = text.rfind(' ', kMaxCause);
  return text.substr(0, at == std::string::npos || at < kMaxCause / 3 ? kMaxCause : at) + " ...";
}

}  // namespace

OrtFailure describe_ort_failure(std::string_view raw) {
  std::string_view text = without_status_prefix(raw);
  // "Load model from x.onnx failed:" repeats the path that our own "creating the session for x.onnx" gives.
  if (starts_with(text, "Load model from ")) {
    const auto failed = text.find(" failed:");
    if (failed != std::string_view::npos) text = text.substr(failed + 8);
  }
  OrtFailure failure;
  // A status prefix may also follow a source location ("graph.cc:5331 <signature> [ONNXRuntimeError] :
  // 1 : FAIL : ...", a failure rethrown through another frame): dropped there too.
  const std::string located = without_source_locations(text);
  failure.cause = cut(broadcast_error(
      running_node_error(opset_error(node_error(one_line(without_cuda_call_site(std::string(without_status_prefix(located)))))))));
  if (failure.cause.empty()) failure.cause = one_line(raw).substr(0, kMaxCause);
  for (const auto& known : kKnownFailures) {
    bool all = true;
    for (auto needle : known.needles) all = all && (needle.empty() || raw.find(needle) != std::string_view::npos);
    if (!all) continue;
    if (known.number_after.empty()) {
      failure.hint = known.hint;
      break;
    }
    const std::string number = number_after(raw, known.number_after);
    if (number.empty()) continue;
    failure.hint = fmt::format(fmt::runtime(known.hint), number);
    break;
  }
  return failure;
}

void rethrow_ort_error(const Ort::Exception& e, const std::string& doing, const std::string& where) {
  const std::string_view raw = e.what();
  spdlog::debug("{} failed; ONNX Runtime said: {}", doing, raw);
  const OrtFailure failure = describe_ort_failure(raw);
  throw Error(doing + " failed: " + failure.cause, failure.hint, where);
}

}  // namespace ortfleet::detail
