#include <canopy/backends/checkpoints/gguf_file.hpp>

#include <canopy/backends/checkpoints/checkpoint_error.hpp>

#include "checkpoints/checked_math.hpp"
#include "checkpoints/message_text.hpp"

#include <array>
#include <cstring>
#include <fstream>
#include <limits>
#include <string_view>

namespace canopy::backends {

namespace {

constexpr char magic[4] = {'G', 'G', 'U', 'F'};
constexpr std::uint64_t default_alignment = 32;

enum value_type : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

struct ggml_type_info {
  const char* name;
  std::uint64_t block_values; // 0: size not known here
  std::uint64_t block_bytes;
};

/// ggml_type by number (ggml.h); the sizes of the types Canopy reads.
const ggml_type_info& type_info(std::uint32_t type) {
  static const std::array<ggml_type_info, 41> known{{
      {"F32", 1, 4},        {"F16", 1, 2},        {"Q4_0", 32, 18},
      {"Q4_1", 0, 0},       {"Q4_2", 0, 0},       {"Q4_3", 0, 0},
      {"Q5_0", 0, 0},       {"Q5_1", 0, 0},       {"Q8_0", 32, 34},
      {"Q8_1", 0, 0},       {"Q2_K", 0, 0},       {"Q3_K", 0, 0},
      {"Q4_K", 0, 0},       {"Q5_K", 0, 0},       {"Q6_K", 0, 0},
      {"Q8_K", 0, 0},       {"IQ2_XXS", 0, 0},    {"IQ2_XS", 0, 0},
      {"IQ3_XXS", 0, 0},    {"IQ1_S", 0, 0},      {"IQ4_NL", 0, 0},
      {"IQ3_S", 0, 0},      {"IQ2_S", 0, 0},      {"IQ4_XS", 0, 0},
      {"I8", 0, 0},         {"I16", 0, 0},        {"I32", 0, 0},
      {"I64", 0, 0},        {"F64", 0, 0},        {"IQ1_M", 0, 0},
      {"BF16", 1, 2},       {"Q4_0_4_4", 0, 0},   {"Q4_0_4_8", 0, 0},
      {"Q4_0_8_8", 0, 0},   {"TQ1_0", 0, 0},      {"TQ2_0", 0, 0},
      {"IQ4_NL_4_4", 0, 0}, {"IQ4_NL_4_8", 0, 0}, {"IQ4_NL_8_8", 0, 0},
      {"MXFP4", 0, 0},      {"NVFP4", 0, 0},
  }};
  static const ggml_type_info unknown{nullptr, 0, 0};
  return type < known.size() ? known[type] : unknown;
}

/// Reads the mapped bytes front to back; every read is bounds-checked.
class reader {
public:
  reader(const gguf_file& owner, const std::byte* data, std::size_t size,
         gguf_arrays arrays)
      : owner_(owner), data_(data), size_(size), arrays_(arrays) {}

  std::size_t offset() const { return at_; }
  std::size_t left() const { return size_ - at_; }

  template <class T> T scalar(const char* what) {
    if (left() < sizeof(T))
      owner_.fail("truncated at byte " + std::to_string(at_) + " (reading " + what + ")");
    T out;
    std::memcpy(&out, data_ + at_, sizeof(T)); // GGUF is little-endian, as the hosts
    at_ += sizeof(T);
    return out;
  }

  /// A string's bytes, in place.
  std::string_view view(const char* what) {
    const auto length = scalar<std::uint64_t>(what);
    if (length > left())
      owner_.fail(std::string(what) + " at byte " + std::to_string(at_ - 8) + " claims " +
                  std::to_string(length) + " bytes; " + std::to_string(left()) +
                  " are left");
    const std::string_view out(reinterpret_cast<const char*>(data_ + at_), length);
    at_ += length;
    return out;
  }

  std::string text(const char* what) { return std::string(view(what)); }

  /// A count of items each at least `min_bytes` long, checked against what is left
  /// before anything is allocated for them.
  std::uint64_t count(const char* what, std::uint64_t min_bytes) {
    const auto n = scalar<std::uint64_t>(what);
    if (n > left() / min_bytes)
      owner_.fail(std::string(what) + " is " + std::to_string(n) + ", more than the " +
                  std::to_string(left()) + " bytes left can hold");
    return n;
  }

  gguf_value value(std::uint32_t type, const std::string& key, bool in_array = false) {
    switch (type) {
    case u8:
      return std::int64_t{scalar<std::uint8_t>("a u8")};
    case i8:
      return std::int64_t{scalar<std::int8_t>("an i8")};
    case u16:
      return std::int64_t{scalar<std::uint16_t>("a u16")};
    case i16:
      return std::int64_t{scalar<std::int16_t>("an i16")};
    case u32:
      return std::int64_t{scalar<std::uint32_t>("a u32")};
    case i32:
      return std::int64_t{scalar<std::int32_t>("an i32")};
    case i64:
      return scalar<std::int64_t>("an i64");
    case u64: {
      const auto v = scalar<std::uint64_t>("a u64");
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return static_cast<double>(v);
      return static_cast<std::int64_t>(v);
    }
    case f32:
      return double{scalar<float>("an f32")};
    case f64:
      return scalar<double>("an f64");
    case boolean:
      return scalar<std::uint8_t>("a bool") != 0;
    case string:
      return text("a string");
    case array:
      if (in_array || arrays_ == gguf_arrays::skip) {
        skip_elements(key);
        return std::monostate{};
      }
      return elements(key);
    default:
      owner_.fail("metadata " + detail::quote(key) + " has unknown value type " +
                  std::to_string(type));
    }
  }

private:
  template <class T> static T as(gguf_value v) { return std::get<T>(std::move(v)); }

  gguf_value elements(const std::string& key) {
    const auto type = scalar<std::uint32_t>("an array's element type");
    const auto n = count("an array's length", type == string ? 8 : 1);
    switch (type) {
    case string: {
      std::vector<std::string> out;
      out.reserve(n);
      for (std::uint64_t i = 0; i < n; ++i)
        out.push_back(text("a string"));
      return out;
    }
    case f32:
    case f64: {
      std::vector<double> out;
      out.reserve(n);
      for (std::uint64_t i = 0; i < n; ++i)
        out.push_back(as<double>(value(type, key, true)));
      return out;
    }
    case array:
      for (std::uint64_t i = 0; i < n; ++i)
        skip_elements(key);
      return std::monostate{};
    default: {
      std::vector<std::int64_t> out;
      out.reserve(n);
      for (std::uint64_t i = 0; i < n; ++i) {
        const gguf_value v = value(type, key, true);
        if (const auto* b = std::get_if<bool>(&v))
          out.push_back(*b);
        else if (const auto* x = std::get_if<std::int64_t>(&v))
          out.push_back(*x);
        else
          owner_.fail("metadata " + detail::quote(key) +
                      " holds a u64 array element above the int64 range");
      }
      return out;
    }
    }
  }

  /// Walks past an array, checking its bounds and element types, keeping nothing.
  void skip_elements(const std::string& key) {
    const auto type = scalar<std::uint32_t>("an array's element type");
    const auto n = count("an array's length", type == string ? 8 : 1);
    if (const std::size_t width = scalar_width(type)) {
      if (n > left() / width)
        owner_.fail("an array of " + std::to_string(n) + " elements of " +
                    std::to_string(width) + " bytes runs past the end of the file");
      at_ += n * width;
      return;
    }
    for (std::uint64_t i = 0; i < n; ++i)
      if (type == string)
        view("a string");
      else
        value(type, key, true); // a nested array, or an unknown type (refused)
  }

  /// The width of a fixed-size value type; 0 for strings, arrays and unknown types.
  static std::size_t scalar_width(std::uint32_t type) {
    switch (type) {
    case u8:
    case i8:
    case boolean:
      return 1;
    case u16:
    case i16:
      return 2;
    case u32:
    case i32:
    case f32:
      return 4;
    case u64:
    case i64:
    case f64:
      return 8;
    default:
      return 0;
    }
  }

  const gguf_file& owner_;
  const std::byte* data_;
  std::size_t size_;
  gguf_arrays arrays_;
  std::size_t at_ = 0;
};

} // namespace

bool gguf_file::has_magic(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  return in.read(head, 4) && std::memcmp(head, magic, 4) == 0;
}

gguf_file::gguf_file(const std::filesystem::path& path, gguf_arrays arrays)
    : source_(path.string()), arrays_(arrays),
      file_(std::make_shared<const mapped_file>(path)) {
  reader in(*this, file_->data(), file_->size(), arrays);
  if (file_->size() < 4 || std::memcmp(file_->data(), magic, 4) != 0)
    fail("not a GGUF file (no GGUF magic)");
  in.scalar<std::uint32_t>("the magic");
  version_ = in.scalar<std::uint32_t>("the version");
  if (version_ == 1)
    fail("GGUF version 1 (2023, 32-bit counts) is not read; convert the model again "
         "with a current llama.cpp");
  if (version_ != 2 && version_ != 3)
    fail("GGUF version " + std::to_string(version_) +
         (version_ > 0xFFFF ? " (a big-endian file?)" : "") +
         "; versions 2 and 3 are read");
  // The smallest tensor entry: an empty name, one dim, a type and an offset.
  const auto tensor_count = in.count("the tensor count", 8 + 4 + 8 + 4 + 8);
  const auto metadata_count = in.count("the metadata count", 8 + 4 + 1);
  for (std::uint64_t i = 0; i < metadata_count; ++i) {
    std::string key = in.text("a metadata key");
    const auto type = in.scalar<std::uint32_t>("a value type");
    gguf_value value = in.value(type, key);
    if (!metadata_.emplace(key, std::move(value)).second)
      fail("metadata key " + detail::quote(key) + " appears twice");
  }
  std::uint64_t alignment = default_alignment;
  if (const auto a = integer("general.alignment")) {
    if (*a <= 0 || (*a & (*a - 1)) != 0)
      fail("general.alignment " + std::to_string(*a) + " is not a power of two");
    alignment = static_cast<std::uint64_t>(*a);
  }

  struct pending {
    std::uint64_t offset;
    std::optional<std::uint64_t> bytes;
  };
  std::vector<pending> placement;
  tensors_.reserve(tensor_count);
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    gguf_tensor t;
    t.name = in.text("a tensor name");
    const auto dims = in.scalar<std::uint32_t>("a tensor's dimension count");
    if (dims == 0 || dims > 4)
      fail("tensor " + detail::quote(t.name) + " has " + std::to_string(dims) +
           " dimensions (GGUF tensors have 1 to 4)");
    std::vector<std::int64_t> shape;
    for (std::uint32_t d = 0; d < dims; ++d) {
      const auto n = in.scalar<std::uint64_t>("a tensor dimension");
      if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail("tensor " + detail::quote(t.name) + " has dimension " + std::to_string(n));
      shape.insert(shape.begin(), static_cast<std::int64_t>(n));
    }
    t.shape = std::move(shape);
    t.type = in.scalar<std::uint32_t>("a tensor type");
    const auto& info = type_info(t.type);
    t.type_name = info.name ? info.name : "type " + std::to_string(t.type);
    pending p{in.scalar<std::uint64_t>("a tensor offset"), std::nullopt};
    if (info.block_values > 0) {
      if (t.shape.back() % static_cast<std::int64_t>(info.block_values) != 0)
        fail("tensor " + detail::quote(t.name) + " of " + t.type_name + " has rows of " +
             std::to_string(t.shape.back()) + " values, not whole blocks of " +
             std::to_string(info.block_values));
      auto values = detail::checked_product(t.shape);
      p.bytes = values
                    ? detail::checked_mul(*values / info.block_values, info.block_bytes)
                    : std::nullopt;
      if (!p.bytes)
        fail("tensor " + detail::quote(t.name) + " has a shape too large to address");
    }
    placement.push_back(p);
    tensors_.push_back(std::move(t));
  }
  const std::uint64_t data_start = (in.offset() + alignment - 1) / alignment * alignment;
  const std::uint64_t data_size =
      file_->size() > data_start ? file_->size() - data_start : 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    auto& t = tensors_[i];
    const auto& p = placement[i];
    if (p.offset % alignment != 0)
      fail("tensor " + detail::quote(t.name) + " starts at offset " +
           std::to_string(p.offset) + ", not a multiple of the alignment " +
           std::to_string(alignment));
    if (!p.bytes)
      continue;
    if (p.offset > data_size || *p.bytes > data_size - p.offset)
      fail("tensor " + detail::quote(t.name) + " (" + t.type_name + ", " +
           std::to_string(*p.bytes) + " bytes at offset " + std::to_string(p.offset) +
           ") runs past the end of the data section (" + std::to_string(data_size) +
           " bytes; truncated file?)");
    t.data = file_->data() + data_start + p.offset;
    t.bytes = *p.bytes;
  }
}

const gguf_value* gguf_file::find(const std::string& key) const {
  const auto found = metadata_.find(key);
  return found == metadata_.end() ? nullptr : &found->second;
}

std::optional<std::int64_t> gguf_file::integer(const std::string& key) const {
  const gguf_value* v = find(key);
  if (!v)
    return std::nullopt;
  if (const auto* x = std::get_if<std::int64_t>(v))
    return *x;
  if (const auto* b = std::get_if<bool>(v))
    return *b;
  wrong_type(key, "an integer");
}

std::optional<double> gguf_file::number(const std::string& key) const {
  const gguf_value* v = find(key);
  if (v)
    if (const auto* x = std::get_if<double>(v))
      return *x;
  const auto i = integer(key);
  return i ? std::optional<double>(static_cast<double>(*i)) : std::nullopt;
}

std::optional<std::string> gguf_file::string(const std::string& key) const {
  const gguf_value* v = find(key);
  if (!v)
    return std::nullopt;
  if (const auto* s = std::get_if<std::string>(v))
    return *s;
  wrong_type(key, "a string");
}

void gguf_file::fail(const std::string& what) const {
  throw checkpoint_error(source_ + ": " + what);
}

void gguf_file::wrong_type(const std::string& key, const char* expected) const {
  fail("metadata " + detail::quote(key) + " is not " + expected);
}

void gguf_file::not_an_array(const std::string& key, const gguf_value& v) const {
  if (arrays_ == gguf_arrays::skip && std::holds_alternative<std::monostate>(v))
    fail("metadata " + detail::quote(key) +
         " was skipped (the file was opened without its arrays)");
  wrong_type(key, "an array of the expected type");
}

} // namespace canopy::backends
