#include <canopy/server/api/gateway_actor.hpp>

#include "api/row_reader.hpp"

#include <canopy/messages/errors.hpp>
#include <canopy/sampling.hpp>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <unordered_map>
#include <unordered_set>

namespace canopy::server {

namespace {

using namespace messages;
using steady = std::chrono::steady_clock;

enum class job_kind { logprobs, next_byte, sample, cache_kv };

/// A job in flight, with the ids of its queries sent and not answered.
struct open_job {
  job_kind kind = job_kind::logprobs;
  gateway_done done;
  steady::time_point started;
  std::unordered_set<std::uint64_t> outstanding;
  std::vector<scored_sequence> answers;                          // logprobs
  std::shared_ptr<const std::vector<next_byte_item>> byte_items; // next_byte
  std::vector<backends::next_byte_distribution> distributions; // next_byte: [byte_items]
  backends::byte_reduce reduce = backends::byte_reduce::sum;   // next_byte
  // logprobs: the next row to ask for (sequence, row in it); next_byte: the next item.
  // At most rows_in_flight_per_job are asked at once (Note [rows in flight])
  std::uint32_t next_sequence = 0;
  std::uint32_t next_row = 0;
  bool all_positions = false;
  std::int32_t priority = 0;
  caf::timespan timeout{0};
  query_scope scope;                                  // every query's
  std::optional<sampling_run> run;                    // sample
  std::optional<std::size_t> top_logprobs;            // sample: score with this many
  std::function<bool(const sampled_token&)> on_token; // sample
};

/// A query of `job`, in the job's scope.
query scoped(const open_job& job, cache::token_seq tokens, std::int32_t priority,
             bool require_kv, caf::timespan timeout) {
  query q{std::move(tokens), priority, require_kv, timeout, job.scope.partition};
  q.adapter = job.scope.adapter;
  return q;
}

/// Where a query's answer goes: its job, and the sequence (or prompt) and row in it.
struct query_slot {
  request_id request = 0;
  std::uint32_t sequence = 0;
  std::uint32_t row = 0;
};

struct gateway_state {
  // Declared, so that the state is no aggregate: under C++20 an aggregate whose first
  // member is an actor handle counts as constructible from CAF's self pointer, and CAF
  // 0.17 then tries to build the state from it.
  gateway_state() = default;

  engine_actor engine;
  std::unordered_map<request_id, open_job> jobs;
  std::unordered_map<std::uint64_t, query_slot> queries; // by query id
  std::uint64_t next_query = 1;

  static inline const char* name = "canopy.gateway";
};

using gateway_pointer = gateway_actor::stateful_pointer<gateway_state>;

api_error to_api_error(const caf::error& e) {
  auto code = code_of(e);
  if (code == errc::none)
    return from_engine_error(errc::backend_failure, caf::to_string(e));
  return from_engine_error(code, message_of(e));
}

/// A new query id whose answer goes to (sequence, row) of the request's job.
std::uint64_t new_query_id(gateway_pointer self, request_id request, open_job& job,
                           std::uint32_t sequence, std::uint32_t row) {
  auto& st = self->state;
  auto id = st.next_query++;
  st.queries.emplace(id, query_slot{request, sequence, row});
  job.outstanding.insert(id);
  return id;
}

void send_query(gateway_pointer self, request_id request, open_job& job, query q,
                std::uint32_t sequence, std::uint32_t row) {
  const auto id = new_query_id(self, request, job, sequence, row);
  self->send(self->state.engine, logprobs_atom::value, std::move(q), id,
             caf::actor_cast<answer_sink>(self));
}

/// Withdraws a job's unanswered queries from the engine.
void cancel_queries(gateway_pointer self, const open_job& job) {
  auto& st = self->state;
  std::vector<std::uint64_t> ids(job.outstanding.begin(), job.outstanding.end());
  for (auto id : ids)
    st.queries.erase(id);
  if (!ids.empty())
    self->send(st.engine, cancel_atom::value, caf::actor_cast<answer_sink>(self),
               std::move(ids));
}

void finish(gateway_pointer self, request_id request, gateway_reply reply) {
  auto& st = self->state;
  auto it = st.jobs.find(request);
  if (it == st.jobs.end())
    return;
  auto job = std::move(it->second);
  st.jobs.erase(it);
  if (reply.error)
    cancel_queries(self, job);
  reply.engine_ms =
      std::chrono::duration<double, std::milli>(steady::now() - job.started).count();
  job.done(std::move(reply));
}

void fail(gateway_pointer self, request_id request, api_error error) {
  gateway_reply reply;
  reply.error = std::move(error);
  finish(self, request, std::move(reply));
}

open_job& open(gateway_pointer self, request_id request, job_kind kind,
               gateway_done done) {
  open_job job;
  job.kind = kind;
  job.done = std::move(done);
  job.started = steady::now();
  return self->state.jobs.insert_or_assign(request, std::move(job)).first->second;
}

// Note [rows in flight]: every query carries its whole token sequence, so the rows of an
// all_positions sequence of L tokens asked at once would hold L^2/2 tokens in queries
// (32 MiB for 4,096 tokens), none of it in the answer's byte reservation. A job asks
// for rows_in_flight_per_job at most and the next as each comes back: the queries
// it holds are bounded by that many sequences, which the reservation counts
// (api_router::reserve_bytes). The rows still merge into shared passes.

/// Asks for the job's next rows, up to rows_in_flight_per_job in flight.
void ask_more_rows(gateway_pointer self, request_id request, open_job& job) {
  while (job.outstanding.size() < rows_in_flight_per_job &&
         job.next_sequence < job.answers.size()) {
    const auto s = job.next_sequence;
    const auto r = job.next_row;
    const auto& tokens = job.answers[s].tokens;
    const auto end = job.all_positions ? tokens.begin() + r + 1 : tokens.end();
    send_query(self, request, job,
               scoped(job, {tokens.begin(), end}, job.priority, false, job.timeout), s,
               r);
    if (++job.next_row == job.answers[s].rows.size()) {
      ++job.next_sequence;
      job.next_row = 0;
    }
  }
}

void start_logprobs(gateway_pointer self, request_id request, logprobs_job& in) {
  auto& job = open(self, request, job_kind::logprobs, std::move(in.done));
  for (std::size_t s = 0; s < in.sequences.size(); ++s)
    if (in.sequences[s].empty())
      return fail(
          self, request,
          {400, "empty_sequence", "sequence " + std::to_string(s) + " has no tokens"});
  job.all_positions = in.all_positions;
  job.priority = in.priority;
  job.timeout = std::chrono::duration_cast<caf::timespan>(
      std::chrono::duration<double, std::milli>(in.deadline_ms));
  job.scope = std::move(in.scope);
  job.answers.resize(in.sequences.size());
  for (std::size_t s = 0; s < in.sequences.size(); ++s) {
    job.answers[s].rows.resize(in.all_positions ? in.sequences[s].size() : 1);
    job.answers[s].tokens = std::move(in.sequences[s]);
  }
  ask_more_rows(self, request, job);
}

/// Asks for the job's next distributions, up to rows_in_flight_per_job in flight.
void ask_more_bytes(gateway_pointer self, request_id request, open_job& job) {
  while (job.outstanding.size() < rows_in_flight_per_job &&
         job.next_sequence < job.byte_items->size()) {
    const auto i = job.next_sequence++;
    const auto& item = (*job.byte_items)[i];
    const auto id = new_query_id(self, request, job, i, 0);
    self->send(self->state.engine, next_byte_atom::value,
               next_byte_query{scoped(job, item.tokens, job.priority, false, job.timeout),
                               item.prefix, job.reduce},
               id, caf::actor_cast<next_byte_sink>(self));
  }
}

void start_next_byte(gateway_pointer self, request_id request, next_byte_job& in) {
  auto& job = open(self, request, job_kind::next_byte, std::move(in.done));
  job.priority = in.priority;
  job.timeout = std::chrono::duration_cast<caf::timespan>(
      std::chrono::duration<double, std::milli>(in.deadline_ms));
  job.scope = std::move(in.scope);
  job.reduce = in.reduce;
  job.byte_items = std::move(in.items);
  job.distributions.resize(job.byte_items->size());
  ask_more_bytes(self, request, job);
}

/// Sends the sampling run's next step, or finishes the job when every prompt is done.
void step_sampling(gateway_pointer self, request_id request, open_job& job) {
  auto next = job.run->next_queries();
  if (next.empty()) {
    gateway_reply reply;
    reply.generated = job.run->generated();
    for (std::size_t i = 0; i < reply.generated.size(); ++i)
      reply.stopped.push_back(job.run->stopped(i));
    return finish(self, request, std::move(reply));
  }
  for (auto& [prompt, context] : next)
    send_query(self, request, job, scoped(job, std::move(context), 0, false, {}),
               static_cast<std::uint32_t>(prompt), 0);
}

void start_sample(gateway_pointer self, request_id request, sample_job& in) {
  auto& job = open(self, request, job_kind::sample, std::move(in.done));
  job.top_logprobs = in.top_logprobs;
  job.on_token = std::move(in.on_token);
  job.scope = std::move(in.scope);
  job.run.emplace(std::move(in.prompts), in.max_tokens, std::move(in.eos_token_ids),
                  in.temperature, in.seed, in.top_p);
  step_sampling(self, request, job);
}

/// The job an answered query belongs to, with the query's slot (the query leaves it);
/// nullptr when the job failed or was cancelled meanwhile.
open_job* take_answered(gateway_pointer self, std::uint64_t query_id, query_slot& slot) {
  auto& st = self->state;
  auto slot_it = st.queries.find(query_id);
  if (slot_it == st.queries.end())
    return nullptr;
  slot = slot_it->second;
  st.queries.erase(slot_it);
  auto it = st.jobs.find(slot.request);
  if (it == st.jobs.end())
    return nullptr;
  it->second.outstanding.erase(query_id);
  return &it->second;
}

void on_distribution(gateway_pointer self, std::uint64_t query_id,
                     const backends::next_byte_distribution& answer) {
  query_slot slot;
  auto* job = take_answered(self, query_id, slot);
  if (job == nullptr)
    return;
  job->distributions[slot.sequence] = answer;
  ask_more_bytes(self, slot.request, *job);
  if (job->outstanding.empty()) {
    gateway_reply reply;
    reply.distributions = std::move(job->distributions);
    finish(self, slot.request, std::move(reply));
  }
}

void on_row(gateway_pointer self, std::uint64_t query_id, const shared_logprobs& answer) {
  query_slot slot;
  auto* found = take_answered(self, query_id, slot);
  if (found == nullptr)
    return;
  auto& job = *found;
  switch (job.kind) {
  case job_kind::logprobs:
    job.answers[slot.sequence].rows[slot.row] = answer.row;
    ask_more_rows(self, slot.request, job);
    if (job.outstanding.empty()) {
      gateway_reply reply;
      reply.answers = std::move(job.answers);
      finish(self, slot.request, std::move(reply));
    }
    break;
  case job_kind::sample: {
    const auto& row = *answer.row;
    const auto i = slot.sequence;
    row_reader dense(std::nullopt);
    job.run->advance(i, dense.read(row).values, row.vocab());
    if (job.on_token) {
      sampled_token token;
      token.prompt = i;
      token.id = job.run->generated()[i].back();
      std::optional<token_score> score;
      if (job.top_logprobs)
        token.score = &score.emplace(score_token(row, token.id, *job.top_logprobs));
      token.last = job.run->finished(i);
      token.stopped = job.run->stopped(i);
      bool stop = false;
      try {
        stop = job.on_token(token);
      } catch (const std::exception& e) { // out of memory: the gateway must not die of it
        return fail(self, slot.request, {500, "internal_error", e.what()});
      }
      if (stop)
        job.run->stop(i);
    }
    if (job.outstanding.empty())
      step_sampling(self, slot.request, job);
    break;
  }
  case job_kind::cache_kv:
    finish(self, slot.request, gateway_reply{});
    break;
  case job_kind::next_byte: // answered by on_distribution
    break;
  }
}

void on_error(gateway_pointer self, std::uint64_t query_id, const caf::error& e) {
  auto& st = self->state;
  auto slot_it = st.queries.find(query_id);
  if (slot_it == st.queries.end())
    return;
  auto request = slot_it->second.request;
  st.queries.erase(slot_it);
  fail(self, request, to_api_error(e));
}

/// Every open job ends with `error` (the engine or the gateway is going away).
void fail_all(gateway_pointer self, const api_error& error) {
  std::vector<request_id> open_requests;
  for (const auto& [request, job] : self->state.jobs)
    open_requests.push_back(request);
  for (auto request : open_requests)
    fail(self, request, error);
}

gateway_actor::behavior_type gateway(gateway_pointer self, engine_actor engine) {
  self->state.engine = std::move(engine);
  self->monitor(self->state.engine);
  self->set_down_handler([=](caf::down_msg&) {
    fail_all(self, from_engine_error(errc::shutting_down, "the engine stopped"));
  });
  self->set_exit_handler([=](caf::exit_msg& msg) {
    fail_all(self, from_engine_error(errc::shutting_down, "the server is stopping"));
    self->quit(msg.reason);
  });
  return {
      [=](answer_atom, std::uint64_t id, const shared_logprobs& row) {
        on_row(self, id, row);
      },
      [=](answer_atom, std::uint64_t id, const caf::error& e) { on_error(self, id, e); },
      [=](answer_atom, std::uint64_t id, const backends::next_byte_distribution& answer) {
        on_distribution(self, id, answer);
      },
      [=](answer_atom, const answer_batch& batch) {
        for (std::size_t i = 0; i < batch.tickets.size(); ++i)
          on_row(self, batch.tickets[i], batch.rows[i]);
      },
      [=](logprobs_atom, request_id request, logprobs_job& job) {
        start_logprobs(self, request, job);
      },
      [=](next_byte_atom, request_id request, next_byte_job& job) {
        start_next_byte(self, request, job);
      },
      [=](sample_atom, request_id request, sample_job& job) {
        start_sample(self, request, job);
      },
      [=](cache_kv_atom, request_id request, cache_kv_job& in) {
        auto& job = open(self, request, job_kind::cache_kv, std::move(in.done));
        job.scope = std::move(in.scope);
        send_query(self, request, job,
                   scoped(job, std::move(in.prompt), 0, true, caf::timespan{0}), 0, 0);
      },
      [=](clear_atom, clear_job& job) {
        auto done = std::move(job.done);
        auto reply_with = [done](std::optional<api_error> error) {
          gateway_reply reply;
          reply.error = std::move(error);
          done(std::move(reply));
        };
        auto answered = [reply_with](bool) { reply_with(std::nullopt); };
        auto failed = [reply_with](caf::error& e) { reply_with(to_api_error(e)); };
        if (job.kv_only)
          self->request(self->state.engine, caf::infinite, clear_kv_atom::value,
                        std::move(job.partitions))
              .then(answered, failed);
        else
          self->request(self->state.engine, caf::infinite, clear_atom::value,
                        std::move(job.partitions))
              .then(answered, failed);
      },
      [=](view_atom, view_job& job) {
        messages::query q;
        q.tokens = std::move(job.prefix);
        q.partition = std::move(job.scope.partition);
        q.adapter = std::move(job.scope.adapter);
        auto done = std::move(job.done);
        self->request(self->state.engine, caf::infinite, view_atom::value, std::move(q),
                      job.limits)
            .then(
                [done](cache::trie_view& view) {
                  gateway_reply reply;
                  reply.view = std::move(view);
                  done(std::move(reply));
                },
                [done](caf::error& e) {
                  gateway_reply reply;
                  reply.error = to_api_error(e);
                  done(std::move(reply));
                });
      },
      [=](cancel_atom, request_id request) {
        auto& st = self->state;
        auto it = st.jobs.find(request);
        if (it == st.jobs.end())
          return;
        cancel_queries(self, it->second);
        st.jobs.erase(it);
      },
  };
}

} // namespace

gateway_actor spawn_gateway(caf::actor_system& system, engine_actor engine) {
  return system.spawn(gateway, std::move(engine));
}

} // namespace canopy::server
