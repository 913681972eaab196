#pragma once
// A GGUF file (llama.cpp's and ollama's model format, versions 2 and 3), mapped and
// read in place: its metadata (typed key/value pairs) and its tensor directory.
//
// Layout, little-endian: "GGUF", u32 version, u64 tensor count, u64 metadata count;
// each metadata entry a string key, a u32 value type and the value (an array: u32
// element type, u64 count, the elements); each tensor a string name, u32 n_dims, u64
// dims[n_dims] innermost first, u32 ggml type, u64 offset into the data section; then
// padding to general.alignment (32 unless given) and the data section, each tensor at
// an aligned offset. A string is a u64 length and its bytes.
//
// Every count and offset is checked against the file before it is used, so a crafted
// file is refused with a message naming the file and what is wrong, never read out of
// bounds. Tensors of a type whose size is not known here (Q6_K and the other formats
// Canopy does not compute with) keep data == nullptr; their type name is kept, so the
// model loader can refuse them by name.
// Thread contract: immutable after construction; read from any thread.

#include <canopy/backends/checkpoints/mapped_file.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace canopy::backends {

/// A metadata value. Integers of every width are int64 (a u64 above its range is kept
/// as a double), float32/64 are double, arrays of scalars are vectors of the same, and
/// nested arrays (which no key read here uses) and skipped ones are std::monostate.
using gguf_value = std::variant<std::monostate, std::int64_t, double, bool, std::string,
                                std::vector<std::string>, std::vector<std::int64_t>,
                                std::vector<double>>;

struct gguf_tensor {
  std::string name;
  std::vector<std::int64_t> shape; // outermost first (GGUF's dims reversed)
  std::uint32_t type = 0;          // ggml_type
  std::string type_name;           // "F32", "Q4_0", "Q6_K", ... or "type 99"
  const std::byte* data = nullptr; // nullptr for a type whose size is not known here
  std::uint64_t bytes = 0;         // 0 when data is nullptr
};

/// Whether a gguf_file keeps its metadata arrays. A tokenizer's arrays are most of the
/// metadata (Llama 3's 128k tokens and 280k merges); the weights and the config never
/// read them, so their readers skip them: still walked and bounds-checked, not kept.
enum class gguf_arrays { keep, skip };

class gguf_file {
public:
  /// Maps and reads `path`; throws checkpoint_error naming it on any defect.
  explicit gguf_file(const std::filesystem::path& path,
                     gguf_arrays arrays = gguf_arrays::keep);

  /// Whether the file at `path` starts with the GGUF magic.
  static bool has_magic(const std::filesystem::path& path);

  const std::string& source() const { return source_; }
  std::uint32_t version() const { return version_; }
  const std::map<std::string, gguf_value>& metadata() const { return metadata_; }
  const std::vector<gguf_tensor>& tensors() const { return tensors_; }
  /// Keeps the mapping alive (tensor data points into it).
  std::shared_ptr<const mapped_file> storage() const { return file_; }

  /// The value of `key`, or nullptr.
  const gguf_value* find(const std::string& key) const;
  /// An integer (or bool) value; nullopt when absent; throws checkpoint_error naming
  /// the key when it holds another type.
  std::optional<std::int64_t> integer(const std::string& key) const;
  /// A number (integer or float); as integer() otherwise.
  std::optional<double> number(const std::string& key) const;
  /// A string; as integer() otherwise.
  std::optional<std::string> string(const std::string& key) const;
  /// An array of `T` (std::string, std::int64_t or double); nullptr when absent; throws
  /// as integer() otherwise, and for an array skipped (gguf_arrays::skip).
  template <class T> const std::vector<T>* array(const std::string& key) const {
    const gguf_value* v = find(key);
    if (!v)
      return nullptr;
    if (const auto* out = std::get_if<std::vector<T>>(v))
      return out;
    not_an_array(key, *v);
  }

  /// Throws checkpoint_error "<file>: <what>".
  [[noreturn]] void fail(const std::string& what) const;

private:
  [[noreturn]] void wrong_type(const std::string& key, const char* expected) const;
  [[noreturn]] void not_an_array(const std::string& key, const gguf_value& v) const;

  std::string source_;
  gguf_arrays arrays_;
  std::shared_ptr<const mapped_file> file_;
  std::uint32_t version_ = 0;
  std::map<std::string, gguf_value> metadata_;
  std::vector<gguf_tensor> tensors_;
};

} // namespace canopy::backends
