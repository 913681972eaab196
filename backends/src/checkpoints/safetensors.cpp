#include <canopy/backends/checkpoints/safetensors.hpp>

#include "checkpoints/checked_math.hpp"
#include "checkpoints/message_text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

namespace canopy::backends {

namespace {

using json = nlohmann::json;

// A valid header nests at most 3 deep (top object > entry object > shape array);
// refusing deeper input before building the DOM bounds the memory a crafted 100 MB
// header of brackets could take.
constexpr int max_header_depth = 4;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw checkpoint_error(file + ": " + what);
}

[[noreturn]] void fail_tensor(const std::string& file, const std::string& name,
                              const std::string& what) {
  throw checkpoint_error(file + ": tensor " + detail::quote(name) + ": " + what);
}

std::uint64_t read_u64_le(const char* p) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

/// Deepest bracket nesting outside strings (the JSON need not be valid yet).
int nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

weight_dtype parse_dtype(const json& value, const std::string& file,
                         const std::string& name) {
  if (!value.is_string())
    fail_tensor(file, name, "\"dtype\" is not a string");
  const auto& text = value.get_ref<const std::string&>();
  if (const auto dtype = value_of(weight_dtype_names, text);
      dtype && !is_block_dtype(*dtype))
    return *dtype;
  fail_tensor(file, name,
              "unsupported dtype " + detail::quote(text) + " (accepted: F32, F16, BF16)");
}

/// A JSON value that must be a non-negative integer (nlohmann keeps those as unsigned;
/// negative ones as signed; 2^64 and beyond, and anything with a fraction, as float).
std::uint64_t parse_count(const json& value, const std::string& file,
                          const std::string& name, const char* what) {
  if (value.is_number_unsigned())
    return value.get<std::uint64_t>();
  if (value.is_number_integer())
    fail_tensor(file, name, std::string(what) + " is negative (" + value.dump() + ")");
  fail_tensor(file, name,
              std::string(what) + " is not a non-negative integer (" +
                  detail::clip(value.dump()) + ")");
}

const json& require(const json& entry, const char* key, const std::string& file,
                    const std::string& name) {
  auto it = entry.find(key);
  if (it == entry.end())
    fail_tensor(file, name, std::string("missing \"") + key + "\"");
  return *it;
}

safetensors_entry parse_entry(const json& entry, std::uint64_t data_size,
                              const std::string& file, const std::string& name) {
  if (!entry.is_object())
    fail_tensor(file, name, "entry is not an object");
  safetensors_entry out;
  out.dtype = parse_dtype(require(entry, "dtype", file, name), file, name);

  const json& shape = require(entry, "shape", file, name);
  if (!shape.is_array())
    fail_tensor(file, name, "\"shape\" is not an array");
  for (const json& dim : shape) {
    std::uint64_t value = parse_count(dim, file, name, "a dimension");
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail_tensor(file, name, "dimension " + std::to_string(value) + " is too large");
    out.shape.push_back(static_cast<std::int64_t>(value));
  }

  const json& offsets = require(entry, "data_offsets", file, name);
  if (!offsets.is_array() || offsets.size() != 2)
    fail_tensor(file, name, "\"data_offsets\" is not an array of two offsets");
  out.begin = parse_count(offsets[0], file, name, "the begin offset");
  out.end = parse_count(offsets[1], file, name, "the end offset");
  const std::string range =
      "[" + std::to_string(out.begin) + ", " + std::to_string(out.end) + "]";
  if (out.begin > out.end)
    fail_tensor(file, name, "data_offsets " + range + " begin after they end");
  if (out.end > data_size)
    fail_tensor(file, name,
                "data_offsets " + range + " run past the end of the data section (" +
                    std::to_string(data_size) + " bytes)");

  auto bytes = detail::checked_product(out.shape, element_size(out.dtype));
  if (!bytes)
    fail_tensor(file, name, "shape " + detail::shape_text(out.shape) + " is too large");
  if (*bytes != out.end - out.begin)
    fail_tensor(file, name,
                "data_offsets " + range + " hold " + std::to_string(out.end - out.begin) +
                    " bytes but shape " + detail::shape_text(out.shape) + " of " +
                    to_string(out.dtype) + " needs " + std::to_string(*bytes));
  return out;
}

std::map<std::string, std::string> parse_metadata(const json& value,
                                                  const std::string& file) {
  if (!value.is_object())
    fail(file, "\"__metadata__\" is not an object");
  std::map<std::string, std::string> out;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      fail(file, "\"__metadata__\" value for " + detail::quote(key) + " is not a string");
    out.emplace(key, item.get<std::string>());
  }
  return out;
}

/// Tensors sorted by begin must each start at or after the previous one's end
/// (empty tensors take no bytes and overlap nothing).
void check_no_overlap(const std::map<std::string, safetensors_entry>& tensors,
                      const std::string& file) {
  std::vector<std::pair<const std::string*, const safetensors_entry*>> order;
  for (const auto& [name, entry] : tensors)
    if (entry.end > entry.begin)
      order.emplace_back(&name, &entry);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->begin < b.second->begin;
  });
  for (std::size_t i = 1; i < order.size(); ++i)
    if (order[i].second->begin < order[i - 1].second->end)
      fail_tensor(file, *order[i].first,
                  "overlaps tensor " + detail::quote(*order[i - 1].first));
}

} // namespace

safetensors_header parse_safetensors_header(std::string_view file_bytes,
                                            const std::string& file_name) {
  const std::string& file = file_name;
  if (file_bytes.size() < 8)
    fail(file, "file is " + std::to_string(file_bytes.size()) +
                   " bytes, too short for the 8-byte safetensors header length");
  const std::uint64_t header_size = read_u64_le(file_bytes.data());
  if (header_size > max_safetensors_header_bytes)
    fail(file, "header length " + std::to_string(header_size) + " is absurd (limit " +
                   std::to_string(max_safetensors_header_bytes) +
                   "); not a safetensors file?");
  if (header_size > file_bytes.size() - 8)
    fail(file, "header length " + std::to_string(header_size) +
                   " runs past the end of the file (" +
                   std::to_string(file_bytes.size()) + " bytes)");

  const std::string_view text = file_bytes.substr(8, header_size);
  if (nesting_depth(text) > max_header_depth)
    fail(file, "header nests deeper than a safetensors header can");

  // Tensor names are keys of the top-level object: a repeated one would silently
  // drop an entry in the DOM, so it is caught while parsing.
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !seen.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    fail(file, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object())
    fail(file, "header is not a JSON object");
  if (!duplicate.empty())
    fail_tensor(file, duplicate, "appears twice in the header");

  safetensors_header out;
  out.data_offset = 8 + header_size;
  const std::uint64_t data_size = file_bytes.size() - out.data_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__")
      out.metadata = parse_metadata(entry, file);
    else if (name.empty())
      fail(file, "a tensor has an empty name");
    else
      out.tensors.emplace(name, parse_entry(entry, data_size, file, name));
  }
  check_no_overlap(out.tensors, file);
  return out;
}

std::map<std::string, tensor_view> safetensors_views(const safetensors_header& header,
                                                     std::string_view file_bytes) {
  const auto* base = reinterpret_cast<const std::byte*>(file_bytes.data());
  std::map<std::string, tensor_view> out;
  for (const auto& [name, entry] : header.tensors)
    out.emplace(name, tensor_view{entry.dtype, entry.shape,
                                  base + header.data_offset + entry.begin});
  return out;
}

std::string
encode_safetensors_header(const std::map<std::string, tensor_view>& tensors,
                          const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, view] : tensors) {
    if (name == "__metadata__" || name.empty())
      throw std::invalid_argument("encode_safetensors_header: invalid tensor name " +
                                  detail::quote(name));
    if (is_block_dtype(view.dtype))
      throw std::invalid_argument(
          "encode_safetensors_header: tensor " + detail::quote(name) + " is in " +
          to_string(view.dtype) + " blocks, which safetensors cannot hold");
    const std::uint64_t bytes = byte_size(view);
    header[name] = {{"dtype", to_string(view.dtype)},
                    {"shape", view.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  std::uint64_t length = text.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return out + text;
}

std::string encode_safetensors(const std::map<std::string, tensor_view>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::string out = encode_safetensors_header(tensors, metadata);
  for (const auto& [name, view] : tensors) {
    const std::size_t bytes = byte_size(view);
    if (bytes > 0)
      out.append(reinterpret_cast<const char*>(view.data), bytes);
  }
  return out;
}

} // namespace canopy::backends
