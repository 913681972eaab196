#include <canopy/actors/worker_pool.hpp>

#include <algorithm>

namespace canopy::actors {

namespace {

std::string describe(const messages::worker_description& w) {
  return "worker " + w.node + " (" + w.device + ")";
}

} // namespace

std::string admission_problem(const backends::model_info& served,
                              const messages::worker_description& worker) {
  const auto& m = worker.model;
  auto differs = [&](const char* what, const std::string& theirs,
                     const std::string& ours) {
    return describe(worker) + " serves " + what + " " + theirs + " (" +
           backends::public_name(m) + ") but this engine serves " + ours + " (" +
           backends::public_name(served) + ")";
  };
  if (!served.architecture.empty() && m.architecture != served.architecture)
    return differs("architecture", m.architecture, served.architecture);
  if (m.vocab_size != served.vocab_size)
    return differs("vocabulary", std::to_string(m.vocab_size),
                   std::to_string(served.vocab_size));
  if (m.context_length != served.context_length)
    return differs("context", std::to_string(m.context_length),
                   std::to_string(served.context_length));
  if (m.kv_window != served.kv_window)
    return differs("sliding window", std::to_string(m.kv_window),
                   std::to_string(served.kv_window));
  if (!served.dtype.empty() && m.dtype != served.dtype)
    return differs("dtype", m.dtype, served.dtype);
  if (!served.weight_dtype.empty() && m.weight_dtype != served.weight_dtype)
    return differs("weight format", m.weight_dtype, served.weight_dtype);
  // A lossy KV format changes answers, and workers' answers share one cache.
  if (!served.kv_dtype.empty() && m.kv_dtype != served.kv_dtype)
    return differs("KV format", m.kv_dtype, served.kv_dtype);
  if (!served.fingerprint.empty() && m.fingerprint != served.fingerprint)
    return differs("model fingerprint", m.fingerprint, served.fingerprint);
  return {};
}

worker_pool::worker_pool(backends::model_info served, std::uint32_t passes_in_flight)
    : served_(std::move(served)), passes_in_flight_(std::max(1u, passes_in_flight)) {}

std::variant<cache::worker_id, std::string>
worker_pool::admit(messages::worker_actor handle,
                   messages::worker_description description) {
  if (auto problem = admission_problem(served_, description); !problem.empty())
    return problem;
  cache::worker_id id = description.slot;
  const bool returning = id < slots_.size() && slots_[id].state == worker_status::lost;
  if (!returning) {
    if (slots_.size() >= engine_metrics::max_workers)
      return describe(description) + ": this engine holds " +
             std::to_string(engine_metrics::max_workers) + " workers at most";
    id = static_cast<cache::worker_id>(slots_.size());
    slots_.emplace_back();
  }
  if (served_.fingerprint.empty())
    served_.fingerprint = description.model.fingerprint;
  auto& slot = slots_[id];
  description.slot = id;
  slot = worker_slot{
      std::move(handle), std::move(description), worker_status::active, {}, 0};
  return id;
}

std::optional<cache::worker_id> worker_pool::find(const caf::actor_addr& address) const {
  for (cache::worker_id w = 0; w < slots_.size(); ++w)
    if (slots_[w].state != worker_status::lost && slots_[w].handle.address() == address)
      return w;
  return std::nullopt;
}

std::vector<cache::worker_id> worker_pool::ready() const {
  std::vector<cache::worker_id> out;
  for (cache::worker_id w = 0; w < slots_.size(); ++w)
    if (slots_[w].state == worker_status::active &&
        slots_[w].batches.size() < passes_in_flight_)
      out.push_back(w);
  return out;
}

std::vector<cache::worker_id> worker_pool::active() const {
  std::vector<cache::worker_id> out;
  for (cache::worker_id w = 0; w < slots_.size(); ++w)
    if (slots_[w].state == worker_status::active)
      out.push_back(w);
  return out;
}

std::vector<cache::worker_id> worker_pool::alive() const {
  std::vector<cache::worker_id> out;
  for (cache::worker_id w = 0; w < slots_.size(); ++w)
    if (slots_[w].state != worker_status::lost)
      out.push_back(w);
  return out;
}

bool worker_pool::any_alive() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const worker_slot& s) { return s.state != worker_status::lost; });
}

std::vector<std::uint64_t> worker_pool::loads() const {
  std::vector<std::uint64_t> out;
  for (const auto& s : slots_)
    out.push_back(s.load);
  return out;
}

} // namespace canopy::actors
