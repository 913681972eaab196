// Every message type that may cross a process boundary, round-tripped through CAF's
// binary serializer with every field set to something other than its default, and
// compared field by field: a field missing from an inspect() would come back default
// and fail here. The list is checked against what add_message_types registers, so a
// new type cannot be registered without a round trip. Rows travel in their storage
// dtype: float16 rows take half the bytes of float32 ones.

#include <canopy/messages/actor_interfaces.hpp>
#include <canopy/messages/errors.hpp>
#include <canopy/messages/node_messages.hpp>
#include <canopy/messages/registration.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace canopy;
using namespace canopy::messages;

struct system_fixture : ::testing::Test {
  static caf::actor_system_config& prepare(caf::actor_system_config& c) {
    add_message_types(c);
    return c;
  }
  caf::actor_system_config config;
  caf::actor_system sys{prepare(config)};

  template <class T> T round_trip(const T& x) {
    std::vector<char> buffer;
    caf::binary_serializer sink{sys, buffer};
    auto copy = x;
    if (auto e = sink(copy))
      ADD_FAILURE() << "serializing: " << sys.render(e);
    T out{};
    caf::binary_deserializer source{sys, buffer};
    if (auto e = source(out))
      ADD_FAILURE() << "deserializing: " << sys.render(e);
    last_bytes = buffer.size();
    return out;
  }
  std::size_t last_bytes = 0;
  std::set<std::string> checked;

  /// Round-trips `x`, compares with `same`, and records `name` as checked.
  template <class T, class Same>
  void check(const std::string& name, const T& x, Same same) {
    checked.insert(name);
    const T back = round_trip(x);
    EXPECT_TRUE(same(x, back)) << name << " changed in a round trip";
  }

  worker_actor some_worker() {
    return sys.spawn([](worker_actor::pointer) -> worker_actor::behavior_type {
      return {[](run_atom, const backends::pass_request&, cache::row_dtype) {
                return computed_pass{};
              },
              [](free_kv_atom, const std::vector<cache::kv_handle>&) {},
              [](demote_kv_atom, const std::vector<cache::kv_handle>&) {},
              [](info_atom) { return backends::model_info{}; },
              [](adapter_atom, const std::string&, const backends::lora_adapter_files&) {
                return true;
              },
              [](adapter_atom, const std::string&) {}};
    });
  }
  node_device_actor some_device() {
    return sys.spawn([](node_device_actor::pointer) -> node_device_actor::behavior_type {
      return {[](run_atom, std::uint64_t, const backends::pass_request&,
                 cache::row_dtype) { return computed_pass{}; },
              [](free_kv_atom, std::uint64_t, const std::vector<cache::kv_handle>&) {},
              [](demote_kv_atom, std::uint64_t, const std::vector<cache::kv_handle>&) {},
              [](session_atom, std::uint64_t, std::uint64_t, bool) {
                return std::uint64_t{0};
              },
              [](drain_atom, std::uint64_t) {},
              [](adapter_atom, std::uint64_t, const std::string&,
                 const backends::lora_adapter_files&) { return true; },
              [](adapter_atom, std::uint64_t, const std::string&) {}};
    });
  }
  worker_link_actor some_link() {
    return sys.spawn([](worker_link_actor::pointer) -> worker_link_actor::behavior_type {
      return {[](drain_atom) {}, [](leave_atom) { return true; },
              [](connect_atom, std::uint64_t) {}, [](ping_atom, std::uint64_t) {},
              [](wait_atom) { return true; }};
    });
  }
};

shared_logprobs row_of(std::vector<float> values, cache::row_dtype dtype) {
  return {cache::logprob_row::encode(values.data(), values.size(), dtype)};
}

bool same_row(const shared_logprobs& a, const shared_logprobs& b) {
  if (!a.row || !b.row)
    return !a.row && !b.row;
  return a.row->dtype() == b.row->dtype() && a.row->vocab() == b.row->vocab() &&
         std::equal(a.row->raw(), a.row->raw() + a.row->bytes(), b.row->raw());
}

bool same_rows(const std::vector<shared_logprobs>& a,
               const std::vector<shared_logprobs>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_row);
}

backends::model_info a_model() {
  return {"llama x.bin",
          "llama",
          512,
          256,
          16,
          "bfloat16",
          "int8",
          "0123456789abcdef0123456789abcdef",
          1280,
          4096,
          8192,
          "int4",
          74000000,
          70000000,
          "avx512_vnni"};
}

bool same_model(const backends::model_info& a, const backends::model_info& b) {
  return a.name == b.name && a.architecture == b.architecture &&
         a.vocab_size == b.vocab_size && a.context_length == b.context_length &&
         a.kv_window == b.kv_window && a.dtype == b.dtype && a.kv_dtype == b.kv_dtype &&
         a.fingerprint == b.fingerprint && a.kv_bytes_per_token == b.kv_bytes_per_token &&
         a.kv_keep_bytes == b.kv_keep_bytes &&
         a.kv_host_keep_bytes == b.kv_host_keep_bytes &&
         a.weight_dtype == b.weight_dtype && a.weight_bytes == b.weight_bytes &&
         a.step_weight_bytes == b.step_weight_bytes &&
         a.weight_kernels == b.weight_kernels;
}

backends::backend_spec a_spec() {
  backends::backend_spec s;
  s.kind = "torch";
  s.device = "cuda:1";
  s.model = "/models/x";
  s.mock.vocab_size = 77;
  s.mock.context_length = 88;
  s.mock.kv_bytes_per_token = 99;
  s.mock.kv_window = 17;
  s.mock.seed = 123;
  s.mock.cost_per_pass = std::chrono::microseconds(5);
  s.mock.cost_per_token = std::chrono::microseconds(7);
  s.torch.dtype = "float16";
  s.torch.kv_dtype = "int8";
  s.torch.kv_residual_tokens = 48;
  s.torch.kv_host_budget_bytes = 1u << 20;
  s.torch.kv_host_dtype = "int8";
  s.torch.kv_budget_bytes = 4242;
  s.torch.threads = 3;
  s.torch.max_context_length = 4000;
  s.torch.direct_forward = false;
  s.torch.decode_graphs = "eager";
  s.torch.adapter_budget_bytes = 4343;
  return s;
}

bool same_torch(const backends::torch_options& a, const backends::torch_options& b) {
  return a.dtype == b.dtype && a.kv_dtype == b.kv_dtype &&
         a.kv_residual_tokens == b.kv_residual_tokens &&
         a.kv_host_budget_bytes == b.kv_host_budget_bytes &&
         a.kv_host_dtype == b.kv_host_dtype && a.kv_budget_bytes == b.kv_budget_bytes &&
         a.threads == b.threads && a.max_context_length == b.max_context_length &&
         a.adapter_budget_bytes == b.adapter_budget_bytes &&
         a.direct_forward == b.direct_forward && a.decode_graphs == b.decode_graphs;
}

bool same_spec(const backends::backend_spec& a, const backends::backend_spec& b) {
  return a.kind == b.kind && a.device == b.device && a.model == b.model &&
         a.mock.vocab_size == b.mock.vocab_size &&
         a.mock.context_length == b.mock.context_length &&
         a.mock.kv_bytes_per_token == b.mock.kv_bytes_per_token &&
         a.mock.kv_window == b.mock.kv_window && a.mock.seed == b.mock.seed &&
         a.mock.cost_per_pass == b.mock.cost_per_pass &&
         a.mock.cost_per_token == b.mock.cost_per_token && same_torch(a.torch, b.torch);
}

backends::pass_item an_item() {
  backends::pass_item i;
  i.prefix = 41;
  i.prefix_length = 6;
  i.tokens = {3, 1, 4};
  i.rows = {0, 2};
  i.keep_kv = false;
  i.adapter = "tuned#3";
  return i;
}

bool same_item(const backends::pass_item& a, const backends::pass_item& b) {
  return a.prefix == b.prefix && a.prefix_length == b.prefix_length &&
         a.tokens == b.tokens && a.rows == b.rows && a.keep_kv == b.keep_kv &&
         a.adapter == b.adapter;
}

bool same_pass(const backends::pass_request& a, const backends::pass_request& b) {
  return a.items.size() == b.items.size() &&
         std::equal(a.items.begin(), a.items.end(), b.items.begin(), same_item);
}

computed_pass a_computed_pass(cache::row_dtype dtype, std::size_t vocab = 4) {
  computed_pass p;
  p.dtype = dtype;
  p.vocab = vocab;
  p.tokens_computed = 3;
  p.matmul_flops = 1234;
  p.compute_ns = 5678;
  computed_item item;
  item.kv = {7, 8, cache::no_kv};
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t v = 0; v < vocab; ++v)
      item.values.push_back(-0.5f * static_cast<float>(r * vocab + v + 1));
  p.items = {item};
  return p;
}

worker_description a_description() {
  return {a_model(), 999, "10.0.0.7:7101", "cuda:0", 5};
}

bool same_description(const worker_description& a, const worker_description& b) {
  return same_model(a.model, b.model) && a.kv_budget_bytes == b.kv_budget_bytes &&
         a.node == b.node && a.device == b.device && a.slot == b.slot;
}

TEST_F(system_fixture, every_registered_type_survives_a_round_trip) {
  const auto same_query = [](const query& a, const query& b) {
    return a.tokens == b.tokens && a.priority == b.priority &&
           a.require_kv == b.require_kv && a.timeout == b.timeout &&
           a.partition == b.partition && a.adapter == b.adapter;
  };
  const query q{{1, 2, 3}, 7, true, std::chrono::milliseconds(9), "3\nsalt", "tuned"};
  check("canopy::query", q, same_query);
  const auto row = row_of({-1.0f, -2.5f, -0.125f}, cache::row_dtype::float16);
  check("canopy::shared_logprobs", row, same_row);
  check("canopy::shared_logprobs_list",
        std::vector<shared_logprobs>{row, row_of({-3.0f}, cache::row_dtype::float32)},
        same_rows);
  check("canopy::answer_batch", answer_batch{{4, 5}, {row, row}},
        [](const answer_batch& a, const answer_batch& b) {
          return a.tickets == b.tickets && same_rows(a.rows, b.rows);
        });
  check("canopy::pass_item", an_item(), same_item);
  check("canopy::pass_request", backends::pass_request{{an_item(), an_item()}},
        same_pass);
  check("canopy::model_info", a_model(), same_model);
  check("canopy::mock_options", a_spec().mock, [](const auto& a, const auto& b) {
    backends::backend_spec x, y;
    x.mock = a;
    y.mock = b;
    return same_spec(x, y);
  });
  check("canopy::torch_options", a_spec().torch, same_torch);
  check("canopy::backend_spec", a_spec(), same_spec);
  check("canopy::row_dtype", cache::row_dtype::bfloat16, std::equal_to<>{});
  check("canopy::computed_item", computed_item{{5, 6}, {}, {row}},
        [](const computed_item& a, const computed_item& b) {
          return a.kv == b.kv && same_rows(a.rows, b.rows) && b.values.empty();
        });
  // A computed pass leaves its node as rows in its dtype, made of its values.
  check("canopy::computed_pass", a_computed_pass(cache::row_dtype::float16),
        [](const computed_pass& a, const computed_pass& b) {
          auto sent = a;
          const auto rows = take_rows(sent.items[0], sent);
          return b.dtype == a.dtype && b.vocab == a.vocab &&
                 b.tokens_computed == a.tokens_computed &&
                 b.matmul_flops == a.matmul_flops && b.compute_ns == a.compute_ns &&
                 b.items.size() == 1 && b.items[0].kv == a.items[0].kv &&
                 b.items[0].values.empty() && same_rows(b.items[0].rows, rows);
        });
  check("canopy::worker_description", a_description(), same_description);
  const auto worker = some_worker();
  const auto device = some_device();
  const auto link = some_link();
  check("canopy::worker_actor", worker, std::equal_to<>{});
  check("canopy::worker_link_actor", link, std::equal_to<>{});
  check("canopy::node_device_actor", device, std::equal_to<>{});
  check("canopy::node_hello", node_hello{3, {1, 2, 3}, link},
        [](const node_hello& a, const node_hello& b) {
          return a.protocol == b.protocol && a.nonce == b.nonce && a.link == b.link;
        });
  check("canopy::node_challenge", node_challenge{4, {9, 8}, {7, 6, 5}},
        [](const node_challenge& a, const node_challenge& b) {
          return a.protocol == b.protocol && a.nonce == b.nonce && a.proof == b.proof;
        });
  const device_announcement announced{device, "cuda:3", a_model(), 31337, a_spec()};
  auto same_announced = [](const device_announcement& a, const device_announcement& b) {
    return a.handle == b.handle && a.device == b.device && same_model(a.model, b.model) &&
           a.kv_budget_bytes == b.kv_budget_bytes && same_spec(a.spec, b.spec);
  };
  check("canopy::device_announcement", announced, same_announced);
  check("canopy::node_announcement", node_announcement{77, {announced, announced}},
        [&](const node_announcement& a, const node_announcement& b) {
          return a.session == b.session && a.devices.size() == b.devices.size() &&
                 std::equal(a.devices.begin(), a.devices.end(), b.devices.begin(),
                            same_announced);
        });
  check("canopy::bytes", std::vector<std::uint8_t>{0, 255, 17}, std::equal_to<>{});
  check("canopy::strings", std::vector<std::string>{"a", "", "b"}, std::equal_to<>{});
  check("canopy::lora_adapter_files",
        backends::lora_adapter_files{"/adapters/x", "{\"r\": 4}",
                                     std::string("\0\x01w", 3)},
        [](const auto& a, const auto& b) {
          return a.source == b.source && a.config_json == b.config_json &&
                 a.weights == b.weights;
        });
  check("canopy::kv_prefix", cache::kv_prefix{5, 55}, [](const auto& a, const auto& b) {
    return a.length == b.length && a.handle == b.handle;
  });
  check("canopy::prepare_request", prepare_request{{3, 4}, {true, false}},
        [](const auto& a, const auto& b) {
          return a.leaves == b.leaves && a.require_kv == b.require_kv;
        });
  auto same_prepared = [](const prepared_entry& a, const prepared_entry& b) {
    return same_row(a.hit, b.hit) && a.pins == b.pins && a.kv.size() == b.kv.size() &&
           std::equal(a.kv.begin(), a.kv.end(), b.kv.begin(),
                      [](const auto& x, const auto& y) {
                        return x.length == y.length && x.handle == y.handle;
                      });
  };
  const prepared_entry entry{row, {{2, 22}, {0, 0}}, {5, 9}};
  check("canopy::prepared_entry", entry, same_prepared);
  check("canopy::prepared_batch",
        prepared_batch{{entry, prepared_entry{{}, {{1, 11}}, {}}}},
        [&](const auto& a, const auto& b) {
          return a.entries.size() == b.entries.size() &&
                 std::equal(a.entries.begin(), a.entries.end(), b.entries.begin(),
                            same_prepared);
        });
  check("canopy::store_item", store_item{12},
        [](const auto& a, const auto& b) { return a.leaf == b.leaf; });
  store_request store{3,
                      {store_item{9}},
                      backends::pass_request{{an_item()}},
                      a_computed_pass(cache::row_dtype::float32)};
  check("canopy::store_request", store,
        [](const store_request& a, const store_request& b) {
          return a.worker == b.worker && a.items.size() == 1 && b.items.at(0).leaf == 9 &&
                 same_pass(a.pass, b.pass) && b.result.items.at(0).rows.size() == 2;
        });
  check("canopy::kv_handles", std::vector<cache::kv_handle>{1, 2, 3}, std::equal_to<>{});
  check("canopy::node_ids", std::vector<cache::node_id>{4, 5}, std::equal_to<>{});
  check("canopy::token_seq", cache::token_seq{6, 7}, std::equal_to<>{});
  cache::trie_view view;
  view.truncated = true;
  view.nodes.push_back({0, 0, -1, 0, {}, 3, 0, 2});
  view.nodes.push_back({42, 1, 0, 2048, {{1, true, 4096}, {0, false, 8192}}, 7, 1, 0});
  check("canopy::trie_view", view,
        [](const cache::trie_view& a, const cache::trie_view& b) {
          auto same_node = [](const cache::trie_view_node& x,
                              const cache::trie_view_node& y) {
            return x.token == y.token && x.depth == y.depth && x.parent == y.parent &&
                   x.row_bytes == y.row_bytes && x.hits == y.hits && x.locks == y.locks &&
                   x.children == y.children && x.kv.size() == y.kv.size() &&
                   std::equal(x.kv.begin(), x.kv.end(), y.kv.begin(),
                              [](auto& k, auto& l) {
                                return k.worker == l.worker && k.on_host == l.on_host &&
                                       k.bytes == l.bytes;
                              });
          };
          return a.truncated == b.truncated && a.nodes.size() == b.nodes.size() &&
                 std::equal(a.nodes.begin(), a.nodes.end(), b.nodes.begin(), same_node);
        });
  check("canopy::trie_view_limits", cache::trie_view_limits{3, 9, 100},
        [](const auto& a, const auto& b) {
          return a.depth == b.depth && a.max_children == b.max_children &&
                 a.max_nodes == b.max_nodes;
        });
  check("canopy::queries", std::vector<query>{q, query{{4}}},
        [&](const std::vector<query>& a, const std::vector<query>& b) {
          return a.size() == b.size() &&
                 std::equal(a.begin(), a.end(), b.begin(), same_query);
        });

  std::set<std::string> registered;
  for (const auto& [name, factory] : config.value_factories_by_name)
    if (name.rfind("canopy::", 0) == 0)
      registered.insert(name);
  EXPECT_EQ(registered, checked)
      << "a registered type has no round trip here, or the other way";
  for (const auto& handle :
       {caf::actor_cast<caf::actor>(worker), caf::actor_cast<caf::actor>(device),
        caf::actor_cast<caf::actor>(link)})
    caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
}

TEST_F(system_fixture, canopy_errors_keep_their_code_and_message) {
  const auto e = make_error(errc::worker_lost, "node 10.0.0.2:7101 stopped answering");
  const auto back = round_trip(e);
  EXPECT_EQ(code_of(back), errc::worker_lost);
  EXPECT_EQ(message_of(back), "node 10.0.0.2:7101 stopped answering");
}

TEST_F(system_fixture, float16_rows_cross_at_half_the_bytes_of_float32) {
  constexpr std::size_t vocab = 4096;
  round_trip(a_computed_pass(cache::row_dtype::float32, vocab));
  const auto full = last_bytes;
  round_trip(a_computed_pass(cache::row_dtype::float16, vocab));
  const auto half = last_bytes;
  std::cout << "[wire] a pass of 2 rows of " << vocab << ": " << full
            << " bytes as float32, " << half << " as float16\n";
  EXPECT_GE(full, 2 * vocab * 4);
  EXPECT_LE(half, full / 2 + 256) << "the rows dominate; each value is two bytes";
}

} // namespace
