// A library ortfleet loads into its process is read as the loader reads it first (base/elf_file.hpp):
// issue 58 found a file of libz's first 4 kB (padded to 1 GB or not) passing the ELF header's check
// and killing the caller with SIGBUS or SIGSEGV inside dlopen.
#include "base/elf_file.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/private_dir.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/runtime.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace fs = std::filesystem;

namespace {
/// The libz this process loaded (ortfleet reads .npz files with it).
std::string libz() {
  Dl_info info{};
  EXPECT_NE(::dladdr(reinterpret_cast<void*>(&zlibVersion), &info), 0);
  return fs::canonical(info.dli_fname).string();
}

/// The first `bytes` of `from` in `to`, then the file grown to `size` (zeros, sparse) when larger.
fs::path head_of(const std::string& from, const fs::path& to, size_t bytes, uint64_t size = 0) {
  const std::string whole = test::read_all(from);
  std::ofstream(to, std::ios::binary) << whole.substr(0, bytes);
  if (size > bytes) fs::resize_file(to, size);
  return to;
}

std::string refusal(const fs::path& library, const std::vector<std::string>& symbols) {
  return test::error_of([&] { detail::check_loadable_library(library.string(), symbols, "the library", "Give another"); });
}
}  // namespace

TEST(ElfFile, AWholeLibraryPassesWithWhatItNeedsAndTheSymbolsItExports) {
  EXPECT_NO_THROW(detail::check_loadable_library(libz(), {"deflate", "inflate"}, "libz", "")) << refusal(libz(), {"deflate"});
  const auto needed = detail::check_loadable_library(libz(), {}, "libz", "").needed;
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libc.so.6"), needed.end());
  load_runtime();
  EXPECT_NO_THROW(detail::check_loadable_library(loaded_runtime()->library_path, {"OrtGetApiBase"}, "ONNX Runtime", ""));
  EXPECT_NE(refusal(libz(), {"OrtGetApiBase"}).find("the library " + libz() + " is not a shared library this process can load: it does not export OrtGetApiBase"),
            std::string::npos)
      << refusal(libz(), {"OrtGetApiBase"});
}

TEST(ElfFile, ALibraryCutShortOrPaddedWithZerosIsRefusedBeforeItIsLoaded) {
  const fs::path dir = test::fresh_dir("elf-file");
  const fs::path head = head_of(libz(), dir / "head.so", 4096);
  EXPECT_NE(refusal(head, {}).find("the library " + head.string() + " is cut short or damaged: its section headers lie outside its 4096 bytes"),
            std::string::npos)
      << refusal(head, {});
  // Its section headers cut away too: the loaded segments still end past the file.
  {
    std::string bytes = test::read_all(head);
    Elf64_Ehdr header{};
    std::memcpy(&header, bytes.data(), sizeof header);
    header.e_shoff = 0;
    header.e_shnum = 0;
    std::memcpy(bytes.data(), &header, sizeof header);
    std::ofstream(dir / "stripped.so", std::ios::binary) << bytes;
  }
  EXPECT_NE(refusal(dir / "stripped.so", {}).find("is not a shared library this process can load: it is cut short: a loaded segment ends at byte"),
            std::string::npos)
      << refusal(dir / "stripped.so", {});
  const fs::path padded = head_of(libz(), dir / "padded.so", 4096, uint64_t{1} << 30);
  EXPECT_NE(refusal(padded, {}).find("is not a shared library this process can load: its dynamic section names no string or symbol table"),
            std::string::npos)
      << refusal(padded, {});
  // Half of ONNX Runtime itself.
  const std::string runtime = load_runtime().library_path;
  const fs::path half = head_of(runtime, dir / "half.so", fs::file_size(runtime) / 2);
  EXPECT_NE(refusal(half, {"OrtGetApiBase"}).find(" is cut short or damaged: its section headers lie outside"), std::string::npos) << refusal(half, {});
  std::ofstream(dir / "notes.so") << "not a library";
  EXPECT_NE(refusal(dir / "notes.so", {}).find("the library " + (dir / "notes.so").string() + " is not a shared library (no ELF header)"),
            std::string::npos)
      << refusal(dir / "notes.so", {});
  std::ofstream(dir / "tiny.so") << "\x7f" "ELF";
  EXPECT_NE(refusal(dir / "tiny.so", {}).find("tiny.so is cut short: 4 bytes, shorter than an ELF header"), std::string::npos) << refusal(dir / "tiny.so", {});
  // A named pipe is refused at once: the check opens nothing that can wait.
  ASSERT_EQ(::mkfifo((dir / "pipe.so").c_str(), 0600), 0);
  EXPECT_EQ(test::exit_code_within(30, [&] { return refusal(dir / "pipe.so", {}).find("is a named pipe, not a file") != std::string::npos ? 0 : 1; }), 0);
  fs::remove_all(dir);
}

// The runtime, and the folder it lies in (where it also loads its providers from), are refused where
// another user could change them, as the cache's folders are.
TEST(ElfFile, ALibraryOrItsFolderOtherUsersCanWriteIsRefused) {
  const fs::path dir = test::fresh_dir("library-owners");
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const fs::path library = dir / "libonnxruntime.so";
  fs::copy_file(load_runtime().library_path, library);
  fs::permissions(library, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  const auto refused = [&](const fs::path& path) { return test::error_of([&] { detail::check_library_owners(path, "the ONNX Runtime library", "Fix"); }); };
  EXPECT_EQ(refused(library), "(no error)");
  fs::permissions(library, fs::perms::others_write, fs::perm_options::add);
  EXPECT_NE(refused(library).find("the ONNX Runtime library " + library.string() + " can be written by other users (mode 0646)"), std::string::npos)
      << refused(library);
  fs::permissions(library, fs::perms::others_write, fs::perm_options::remove);
  fs::permissions(dir, fs::perms::group_write, fs::perm_options::add);
  EXPECT_NE(refused(library).find("the folder " + dir.string() + " holding the ONNX Runtime library " + library.string() +
                                  " can be written by other users (mode 0775)"),
            std::string::npos)
      << refused(library);
  // A link to it in a folder others can write is as good as the library there.
  fs::permissions(dir, fs::perms::group_write, fs::perm_options::remove);
  const fs::path open = dir / "open";
  fs::create_directory(open);
  fs::permissions(open, fs::perms::all | fs::perms::sticky_bit);
  fs::create_symlink(library, open / "libonnxruntime.so");
  EXPECT_NE(refused(open / "libonnxruntime.so").find(" holding the ONNX Runtime library " + (open / "libonnxruntime.so").string() +
                                                     " can be written by other users (mode 1777)"),
            std::string::npos)
      << refused(open / "libonnxruntime.so");
  if (::geteuid() == 0) {
    const fs::path theirs = dir / "theirs";
    fs::create_directory(theirs);
    fs::copy_file(library, theirs / "libonnxruntime.so");
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    EXPECT_NE(refused(theirs / "libonnxruntime.so").find("belongs to nobody (uid 65534), who can replace what is in it"), std::string::npos)
        << refused(theirs / "libonnxruntime.so");
  }
  fs::remove_all(dir);
}

}  // namespace ortfleet
