#pragma once
// A backend for tests: wraps the mock, records every pass it is asked to run, and
// fails on demand, so tests can assert how many passes and tokens the engine asked for.
// Thread contract: the probe's counters are atomics, readable from the test thread
// while the worker runs passes.

#include <canopy/backends/backend.hpp>
#include <canopy/backends/mock_backend.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::testing {

struct probe {
  std::atomic<int> passes{0};
  std::atomic<int> items{0};
  std::atomic<std::uint64_t> tokens{0};
  std::atomic<bool> fail{false};            // the next passes throw while set
  std::atomic<std::size_t> kv_entries{0};   // KV the backends hold after the last call
  std::atomic<int> adapters{0};             // adapters the backends hold
  std::atomic<bool> refuse_adapters{false}; // loading an adapter throws while set
  std::mutex mutex;
  std::vector<backends::pass_request> requests; // every pass, in order
};

class probe_backend : public backends::backend_i {
public:
  probe_backend(const backends::mock_options& options, std::shared_ptr<probe> p)
      : mock_(backends::make_mock_backend(options)), probe_(std::move(p)) {}
  const backends::model_info& info() const override { return mock_->info(); }
  backends::pass_result run(const backends::pass_request& request) override {
    {
      std::lock_guard<std::mutex> guard{probe_->mutex};
      probe_->requests.push_back(request);
    }
    ++probe_->passes;
    probe_->items += static_cast<int>(request.items.size());
    if (probe_->fail)
      throw std::runtime_error("injected failure");
    auto result = mock_->run(request);
    probe_->tokens += result.tokens_computed;
    probe_->kv_entries = mock_->kv_entries();
    return result;
  }
  void release_kv(const std::vector<backends::kv_handle>& handles) override {
    mock_->release_kv(handles);
    probe_->kv_entries = mock_->kv_entries();
  }
  std::size_t kv_entries() const override { return mock_->kv_entries(); }
  void add_adapter(const std::string& name,
                   const backends::lora_adapter_files& files) override {
    if (probe_->refuse_adapters)
      throw std::invalid_argument("injected refusal");
    mock_->add_adapter(name, files);
    ++probe_->adapters;
  }
  bool remove_adapter(const std::string& name) override {
    const bool removed = mock_->remove_adapter(name);
    probe_->adapters -= removed ? 1 : 0;
    return removed;
  }

private:
  std::unique_ptr<backends::backend_i> mock_;
  std::shared_ptr<probe> probe_;
};

} // namespace canopy::testing
