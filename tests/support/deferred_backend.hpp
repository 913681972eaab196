#pragma once
// A backend for tests of workers that pipeline passes: the mock's passes, computed at
// start but ready only on the `ready_after`-th look (as if a device computed them on
// its own), with a log of starts and finishes, so that a test sees whether a worker
// starts the pass behind one before it finishes it. Passes may be made to fail at
// start (refused) or while finishing.
// Thread contract: one thread at a time, as backend_i; the deterministic scheduler runs
// the worker on the test's thread, so the test reads the log between runs.

#include <canopy/backends/backend.hpp>
#include <canopy/backends/mock_backend.hpp>

#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace canopy::testing {

struct deferred_script {
  int ready_after = 3;          // looks (ready()) before a started pass is ready
  std::set<int> refused;        // passes (by start order, from 0) start refuses
  std::set<int> failing;        // passes whose finish throws
  std::vector<std::string> log; // "start N", "finish N", in order
  std::size_t kv_entries = 0;   // KV the backend holds after its last call
};

class deferred_backend : public backends::backend_i {
public:
  deferred_backend(const backends::mock_options& options,
                   std::shared_ptr<deferred_script> script)
      : mock_(backends::make_mock_backend(options)), script_(std::move(script)) {}
  const backends::model_info& info() const override { return mock_->info(); }
  backends::pass_result run(const backends::pass_request& request) override {
    return start(request)->finish();
  }
  std::unique_ptr<backends::started_pass>
  start(const backends::pass_request& request) override {
    const int id = started_++;
    script_->log.push_back("start " + std::to_string(id));
    if (script_->refused.count(id) != 0)
      throw std::invalid_argument("pass " + std::to_string(id) + " refused");
    auto result = mock_->run(request);
    script_->kv_entries = mock_->kv_entries();
    return std::make_unique<pass>(id, std::move(result), script_);
  }
  void release_kv(const std::vector<backends::kv_handle>& handles) override {
    mock_->release_kv(handles);
    script_->kv_entries = mock_->kv_entries();
  }
  std::size_t kv_entries() const override { return mock_->kv_entries(); }

private:
  class pass final : public backends::started_pass {
  public:
    pass(int id, backends::pass_result result, std::shared_ptr<deferred_script> script)
        : id_(id), result_(std::move(result)), script_(std::move(script)) {}
    bool ready() const override { return ++looks_ >= script_->ready_after; }
    backends::pass_result finish() override {
      script_->log.push_back("finish " + std::to_string(id_));
      if (script_->failing.count(id_) != 0)
        throw std::runtime_error("pass " + std::to_string(id_) + " failed on the device");
      return std::move(result_);
    }

  private:
    int id_;
    backends::pass_result result_;
    std::shared_ptr<deferred_script> script_;
    mutable int looks_ = 0;
  };

  std::unique_ptr<backends::backend_i> mock_;
  std::shared_ptr<deferred_script> script_;
  int started_ = 0;
};

} // namespace canopy::testing
