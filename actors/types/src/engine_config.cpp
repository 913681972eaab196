#include <canopy/engine_config.hpp>

#include <canopy/backends/models/torch_backend.hpp>
#include <canopy/cache/eviction_policy.hpp>
#include <canopy/cache/logprob_row.hpp>
#include <canopy/error.hpp>
#include <canopy/messages/adapter_key.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <type_traits>

namespace canopy {

namespace {

using json = nlohmann::json;

[[noreturn]] void invalid(std::string_view key, const std::string& why) {
  throw error(errc::invalid_config, "setting '" + std::string(key) + "': " + why);
}

/// One configuration key: how to read it from JSON and write it back.
struct setting {
  std::string key;
  std::string description;
  std::function<void(engine_config&, const json&)> assign;
  std::function<json(const engine_config&)> read;
};

template <class T> const char* type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "a boolean";
  else if constexpr (std::is_integral_v<T>)
    return std::is_unsigned_v<T> ? "a non-negative integer" : "an integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "a number";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else
    return "a list of strings";
}

template <class T> bool holds(const json& value) {
  if constexpr (std::is_same_v<T, bool>)
    return value.is_boolean();
  else if constexpr (std::is_integral_v<T>)
    return value.is_number_integer() && (!std::is_unsigned_v<T> || value >= 0);
  else if constexpr (std::is_floating_point_v<T>)
    return value.is_number();
  else if constexpr (std::is_same_v<T, std::string>)
    return value.is_string();
  else
    return value.is_array() && std::all_of(value.begin(), value.end(),
                                           [](const json& x) { return x.is_string(); });
}

template <class T>
setting make_setting(std::string key, std::string description, T engine_config::*member) {
  auto assign = [key, member](engine_config& config, const json& value) {
    if (!holds<T>(value))
      invalid(key, std::string("expected ") + type_name<T>() + ", got " + value.dump());
    config.*member = value.get<T>();
  };
  auto read = [member](const engine_config& config) { return json(config.*member); };
  return {std::move(key), std::move(description), assign, read};
}

const std::vector<setting>& settings() {
  using c = engine_config;
  static const std::vector<setting> table = {
      make_setting("backend", "model backend: mock | torch", &c::backend),
      make_setting("model",
                   "torch: HF directory, GGUF file or llama2.c .bin; empty: built-in "
                   "synthetic Llama",
                   &c::model),
      make_setting("tokenizer",
                   "tokenizer file or folder; torch: empty finds the model's; "
                   "mock: rows of its size, as genlm's MockAsyncLM(tokenizer)",
                   &c::tokenizer),
      make_setting("dtype", "torch: compute dtype float32 | float16 | bfloat16",
                   &c::dtype),
      make_setting("weight_dtype",
                   "torch: the weight matrices' format bfloat16 | int8 | int4 (int8 and "
                   "int4: blocks of 32, as llama.cpp's Q8_0 and Q4_0; Llama family, "
                   "float32 on the CPU); empty: the compute dtype",
                   &c::weight_dtype),
      make_setting("kv_dtype",
                   "torch: KV storage float32 | float16 | bfloat16 | int8 (lossy); "
                   "empty: the compute dtype",
                   &c::kv_dtype),
      make_setting("kv_residual_tokens",
                   "torch: the newest N tokens a worker stored also keep their KV in the "
                   "compute dtype, which passes read (out of kv_budget_bytes); 0: none",
                   &c::kv_residual_tokens),
      make_setting("kv_host_budget_bytes",
                   "torch: per worker, host memory that KV evicted from the device moves "
                   "to instead of being dropped, and comes back from; 0: none (not with "
                   "a sliding window)",
                   &c::kv_host_budget_bytes),
      make_setting("kv_host_dtype",
                   "torch: the host tier's KV format; empty: the device's (lossless); "
                   "int8 (lossy)",
                   &c::kv_host_dtype),
      make_setting(
          "threads_per_worker",
          "torch: ATen intra-op threads per worker, 0: 1 (matmuls use OpenBLAS's pool)",
          &c::threads_per_worker),
      make_setting("direct_forward",
                   "torch: float32 Llama on the CPU without ATen's per-op dispatch; "
                   "false: ATen's ops",
                   &c::direct_forward),
      make_setting("decode_graphs",
                   "torch: decode passes padded to buckets and replayed as CUDA graphs "
                   "on a CUDA device (auto); off: ragged; eager: buckets without graphs, "
                   "on any device",
                   &c::decode_graphs),
      make_setting("vocab_size", "mock: entries per log-prob row", &c::vocab_size),
      make_setting("context_length", "mock: longest accepted sequence",
                   &c::context_length),
      make_setting("mock_cost_per_pass_us", "mock: simulated microseconds per pass",
                   &c::mock_cost_per_pass_us),
      make_setting("mock_cost_per_token_us", "mock: simulated microseconds per new token",
                   &c::mock_cost_per_token_us),
      make_setting("mock_kv_bytes_per_token", "mock: KV budget bytes per token",
                   &c::mock_kv_bytes_per_token),
      make_setting("mock_kv_window",
                   "mock: sliding window its passes read KV through, 0: none",
                   &c::mock_kv_window),
      make_setting("mock_seed", "mock: seed of the log-prob hash", &c::mock_seed),
      make_setting("workers", "worker actors (one per device) when devices is empty",
                   &c::workers),
      make_setting("devices", "devices, e.g. [\"cpu\", \"cpu\"] or [\"cuda:0\"]",
                   &c::devices),
      make_setting("worker_passes_in_flight", "passes one worker runs or holds at once",
                   &c::worker_passes_in_flight),
      make_setting("remote_workers",
                   "\"host:port\" of canopy worker processes, e.g. "
                   "[\"127.0.0.1:7101\"]",
                   &c::remote_workers),
      make_setting("worker_timeout_ms",
                   "a remote worker that does not answer within this is lost",
                   &c::worker_timeout_ms),
      make_setting("cluster_token_file",
                   "file whose first line is the cluster's shared secret",
                   &c::cluster_token_file),
      make_setting("tls_cert", "PEM certificate of this node (TLS between nodes)",
                   &c::tls_cert),
      make_setting("tls_key", "PEM private key of tls_cert", &c::tls_key),
      make_setting("tls_ca", "PEM certificate of the CA that signed every node's",
                   &c::tls_ca),
      make_setting("batch_size",
                   "flush when this many distinct queries wait (0: 256 on CUDA "
                   "devices, else 64)",
                   &c::batch_size),
      make_setting("batch_timeout_ms", "flush this long after the first waiting query",
                   &c::batch_timeout_ms),
      make_setting("flush_when_idle", "flush at once when a worker is idle",
                   &c::flush_when_idle),
      make_setting("merge_duplicates", "equal sequences share one computation",
                   &c::merge_duplicates),
      make_setting("rows_at_every_position", "store the row after every computed token",
                   &c::rows_at_every_position),
      make_setting("cache_enabled", "false: no cached rows and no KV reuse",
                   &c::cache_enabled),
      make_setting("kv_reuse",
                   "false: every pass recomputes its whole sequence (rows still cached)",
                   &c::kv_reuse),
      make_setting("logprob_budget_bytes", "hard limit on cached row bytes",
                   &c::logprob_budget_bytes),
      make_setting("logprob_max_entries",
                   "limit on cached rows, 0: none (OutputCache maxsize)",
                   &c::logprob_max_entries),
      make_setting("kv_budget_bytes", "hard limit on KV bytes per worker",
                   &c::kv_budget_bytes),
      make_setting("adapter_budget_bytes",
                   "hard limit on LoRA adapters' bytes (files kept, factors per worker)",
                   &c::adapter_budget_bytes),
      make_setting("adapters",
                   "LoRA adapters loaded at start, e.g. [\"tuned=/models/tuned-lora\"] "
                   "(name=PEFT directory)",
                   &c::adapters),
      make_setting("max_context_length",
                   "torch: 0: the model's context; N: up to N tokens (more only with a "
                   "sliding window)",
                   &c::max_context_length),
      make_setting("eviction_policy", "lru | lfu | fifo | priority", &c::eviction_policy),
      make_setting("logprob_dtype", "stored rows: float32 | float16 | bfloat16",
                   &c::logprob_dtype),
      make_setting("request_actors",
                   "front actors callers are spread over, 0: half the cores",
                   &c::request_actors),
      make_setting("scheduler_threads", "CAF worker threads of an owned system, 0: cores",
                   &c::scheduler_threads),
      make_setting(
          "scheduler_poll_sleep_us",
          "CAF workers' sleep between looks for work while briefly idle; 0: they look "
          "a few hundred times, then wait to be woken by a message (lone queries "
          "answered soonest)",
          &c::scheduler_poll_sleep_us),
      make_setting("query_timeout_ms", "0: none; else a query fails after this long",
                   &c::query_timeout_ms),
      make_setting("pass_timeout_ms", "a pass running longer fails its batch",
                   &c::pass_timeout_ms),
  };
  return table;
}

/// What is wrong with a "host:port", or "".
std::string address_problem(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return "'" + address + "' is not host:port";
  const auto port = address.substr(colon + 1);
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoul(port) == 0 || std::stoul(port) > 65535)
    return "'" + address + "': port must be in 1..65535";
  return {};
}

const setting& find_setting(std::string_view key) {
  for (const auto& s : settings())
    if (s.key == key)
      return s;
  std::string known;
  for (const auto& s : settings())
    known += (known.empty() ? "" : ", ") + s.key;
  invalid(key, "unknown key (known: " + known + ")");
}

} // namespace

engine_config engine_config::from_json(std::string_view text) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded())
    throw error(errc::invalid_config, "configuration is not valid JSON");
  if (!parsed.is_object())
    throw error(errc::invalid_config, "configuration must be a JSON object");
  engine_config config;
  for (const auto& [key, value] : parsed.items())
    find_setting(key).assign(config, value);
  config.validate();
  return config;
}

void engine_config::set(std::string_view key, std::string_view value) {
  const auto& s = find_setting(key);
  // Text that parses as JSON (numbers, booleans, lists) is taken as such; anything
  // else is a string, so `--eviction_policy lfu` needs no quotes.
  json parsed = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || parsed.is_object())
    parsed = std::string(value);
  if (s.read(*this).is_string() && !parsed.is_string())
    parsed = std::string(value);
  // A list may also be given as text separated by commas: `--adapters a=/x,b=/y`.
  if (s.read(*this).is_array() && parsed.is_string()) {
    json items = json::array();
    for (std::size_t begin = 0; begin <= value.size();) {
      const auto comma = std::min(value.find(',', begin), value.size());
      if (comma > begin)
        items.push_back(std::string(value.substr(begin, comma - begin)));
      begin = comma + 1;
    }
    parsed = std::move(items);
  }
  s.assign(*this, parsed);
}

void engine_config::validate() const {
  if (backend != "mock" && backend != "torch" && !backend_factory)
    invalid("backend", "unknown backend '" + backend + "' (known: mock, torch)");
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16")
    invalid("dtype", "unknown dtype '" + dtype + "' (float32, float16, bfloat16)");
  if (const auto& known = backends::kv_dtype_names();
      !kv_dtype.empty() && std::find(known.begin(), known.end(), kv_dtype) == known.end())
    invalid("kv_dtype",
            "unknown KV format '" + kv_dtype +
                "' (float32, float16, bfloat16, int8; empty: the compute dtype)");
  if (auto problem = backends::decode_graphs_problem(decode_graphs); !problem.empty())
    invalid("decode_graphs", problem);
  if (vocab_size < 2)
    invalid("vocab_size", "must be at least 2");
  if (context_length < 1)
    invalid("context_length", "must be at least 1");
  if (mock_cost_per_pass_us < 0 || mock_cost_per_token_us < 0)
    invalid("mock_cost_per_pass_us", "simulated costs must be non-negative");
  if (devices.empty() && workers == 0 && remote_workers.empty())
    invalid("workers",
            "0 local workers needs remote_workers (a front only), else at least 1");
  if (worker_passes_in_flight == 0)
    invalid("worker_passes_in_flight", "must be at least 1");
  for (const auto& address : remote_workers)
    if (auto problem = address_problem(address); !problem.empty())
      invalid("remote_workers", problem);
  if (worker_timeout_ms <= 0)
    invalid("worker_timeout_ms", "must be positive");
  if (!(scheduler_poll_sleep_us >= 0 && scheduler_poll_sleep_us <= 1e6))
    invalid("scheduler_poll_sleep_us", "must be in [0, 1000000]");
  if (tls_cert.empty() != tls_key.empty() || tls_cert.empty() != tls_ca.empty())
    invalid("tls_cert", "tls_cert, tls_key and tls_ca go together (all three, or none)");
  for (const auto& d : devices)
    if (d != "cpu" && d != "cuda" && d.rfind("cuda:", 0) != 0)
      invalid("devices", "unknown device '" + d + "' (cpu, cuda or cuda:N)");
  if (batch_timeout_ms < 0)
    invalid("batch_timeout_ms", "must be non-negative");
  if (!cache::parse_eviction_policy(eviction_policy))
    invalid("eviction_policy",
            "unknown policy '" + eviction_policy + "' (lru, lfu, fifo, priority)");
  if (!cache::parse_row_dtype(logprob_dtype))
    invalid("logprob_dtype",
            "unknown dtype '" + logprob_dtype + "' (float32, float16, bfloat16)");
  if (query_timeout_ms < 0)
    invalid("query_timeout_ms", "must be non-negative");
  if (pass_timeout_ms <= 0)
    invalid("pass_timeout_ms", "must be positive");
  std::set<std::string> adapter_names;
  for (const auto& entry : adapters) {
    const auto equals = entry.find('=');
    if (equals == std::string::npos || equals + 1 == entry.size())
      invalid("adapters", "'" + entry + "' is not name=PATH");
    const auto name = entry.substr(0, equals);
    if (auto problem = messages::adapter_name_problem(name); !problem.empty())
      invalid("adapters", "'" + entry + "': " + problem);
    if (!adapter_names.insert(name).second)
      invalid("adapters", "the name '" + name + "' is given twice");
  }
}

std::vector<std::pair<std::string, std::string>> engine_config::adapter_list() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : adapters) {
    const auto equals = entry.find('=');
    out.emplace_back(entry.substr(0, equals), entry.substr(equals + 1));
  }
  return out;
}

std::string engine_config::to_json() const {
  json out = json::object();
  for (const auto& s : settings())
    out[s.key] = s.read(*this);
  return out.dump();
}

std::vector<std::pair<std::string, std::string>> engine_config::describe() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : settings())
    out.emplace_back(s.key, s.description);
  return out;
}

std::uint32_t engine_config::batch_size_in_effect() const {
  if (batch_size != 0)
    return batch_size;
  const auto on_devices = device_list();
  const bool cuda = !on_devices.empty() &&
                    std::all_of(on_devices.begin(), on_devices.end(),
                                [](const auto& d) { return d.rfind("cuda", 0) == 0; });
  return cuda ? 256 : 64;
}

std::vector<std::string> engine_config::device_list() const {
  if (!devices.empty())
    return devices;
  if (workers == 0)
    return {}; // a front only
  if (backend == "torch" && !backend_factory)
    if (const int gpus = backends::cuda_device_count(); gpus > 0) {
      std::vector<std::string> out;
      for (int i = 0; i < gpus; ++i)
        out.push_back("cuda:" + std::to_string(i));
      return out;
    }
  return std::vector<std::string>(workers, "cpu");
}

} // namespace canopy
