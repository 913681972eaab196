// llama.cpp's side of `scripts/peers/bench_llama_cpp.py`: the benchmark's workloads
// through llama.h (F32 weights and KV, flash attention off), each answering what
// Canopy answers, the next-token log-probs of every query.
//
//   llama_cpp_peer rows MODEL.gguf --tokens 1,2,3         f32 rows after every prefix
//   llama_cpp_peer decode MODEL.gguf [--steps N] ...      greedy single stream
//   llama_cpp_peer smc MODEL.gguf [--particles P --steps N] ...
//   llama_cpp_peer score MODEL.gguf [--sequences S --length L] ...
// Common: --threads T (default 1), --prompt-length L (16), --seed S (1).
// The timed workloads print one JSON line: queries, tokens computed, seconds.
//
// smc: a shared prompt decoded once and copied to every particle (llama_memory_seq_cp
// shares its cells), then one batched decode of one token per particle per step;
// particles sample from the model, weigh by the model sharpened to temperature 0.8,
// and are resampled (multinomial; sequences copied through scratch ids) when the
// effective sample size falls under half, as `canopy bench --workload smc` does.
// score: all sequences in one llama_decode with logits at every position.
// Built by build-llama-cpp.sh; a benchmark harness, not part of Canopy.
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct options {
  std::string mode, model;
  std::vector<llama_token> tokens;
  int threads = 1, steps = 64, particles = 64, prompt_length = 16, sequences = 32,
      length = 64;
  unsigned long long seed = 1;
};

options parse(int argc, char** argv) {
  if (argc < 3)
    throw std::invalid_argument(
        "usage: llama_cpp_peer rows|decode|smc|score MODEL.gguf [flags]");
  options o;
  o.mode = argv[1];
  o.model = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokens") {
      std::stringstream in(value);
      for (std::string id; std::getline(in, id, ',');)
        o.tokens.push_back(std::stoi(id));
    } else if (flag == "--threads")
      o.threads = std::stoi(value);
    else if (flag == "--steps")
      o.steps = std::stoi(value);
    else if (flag == "--particles")
      o.particles = std::stoi(value);
    else if (flag == "--prompt-length")
      o.prompt_length = std::stoi(value);
    else if (flag == "--sequences")
      o.sequences = std::stoi(value);
    else if (flag == "--length")
      o.length = std::stoi(value);
    else if (flag == "--seed")
      o.seed = std::stoull(value);
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  return o;
}

class peer {
public:
  peer(const options& o, int n_ctx, int n_batch, int n_seq) {
    llama_backend_init();
    llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
    model_ = llama_model_load_from_file(o.model.c_str(), llama_model_default_params());
    if (!model_)
      throw std::runtime_error("cannot load " + o.model);
    auto cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(n_ctx);
    cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n_batch);
    cp.n_seq_max = static_cast<uint32_t>(n_seq);
    // It reserves an output per sequence at start, more than a batch when the smc
    // workload's scratch sequences double them.
    cp.n_outputs_max = static_cast<uint32_t>(std::max(n_batch, n_seq));
    cp.n_threads = cp.n_threads_batch = o.threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    // One KV buffer for every sequence, as the smc workload's copies share cells (by
    // default each sequence gets n_ctx / n_seq_max cells of its own).
    cp.kv_unified = true;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.no_perf = true;
    ctx_ = llama_init_from_model(model_, cp);
    if (!ctx_)
      throw std::runtime_error("cannot make a llama.cpp context");
    vocab_ = llama_vocab_n_tokens(llama_model_get_vocab(model_));
    batch_ = llama_batch_init(n_batch, 0, 1);
  }
  ~peer() {
    llama_batch_free(batch_);
    llama_free(ctx_);
    llama_model_free(model_);
  }
  int vocab() const { return vocab_; }
  llama_context* ctx() { return ctx_; }

  void clear() { batch_.n_tokens = 0; }
  void add(llama_token token, llama_pos pos, llama_seq_id seq, bool logits) {
    const auto i = batch_.n_tokens++;
    batch_.token[i] = token;
    batch_.pos[i] = pos;
    batch_.n_seq_id[i] = 1;
    batch_.seq_id[i][0] = seq;
    batch_.logits[i] = logits;
  }
  void decode() {
    if (llama_decode(ctx_, batch_) != 0)
      throw std::runtime_error("llama_decode failed");
  }
  /// The log-probs of batch entry i (log-softmax of its logits, sums in double).
  const std::vector<float>& logprobs(int i) {
    const float* logits = llama_get_logits_ith(ctx_, i);
    row_.assign(logits, logits + vocab_);
    const float top = *std::max_element(row_.begin(), row_.end());
    double total = 0;
    for (float v : row_)
      total += std::exp(v - top);
    const auto shift = static_cast<float>(top + std::log(total));
    for (auto& v : row_)
      v -= shift;
    return row_;
  }

private:
  llama_model* model_ = nullptr;
  llama_context* ctx_ = nullptr;
  llama_batch batch_{};
  int vocab_ = 0;
  std::vector<float> row_;
};

std::vector<llama_token> random_tokens(int n, int vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  std::vector<llama_token> out(static_cast<std::size_t>(n));
  for (auto& t : out)
    t = pick(rng);
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void report(const char* workload, long queries, long tokens, double seconds) {
  std::printf("{\"workload\": \"%s\", \"queries\": %ld, \"tokens_computed\": %ld, "
              "\"seconds\": %.6f, \"queries_per_s\": %.3f}\n",
              workload, queries, tokens, seconds, queries / seconds);
}

void rows(const options& o) {
  const int n = static_cast<int>(o.tokens.size());
  peer p(o, std::max(n, 16), std::max(n, 16), 1);
  for (int i = 0; i < n; ++i)
    p.add(o.tokens[static_cast<std::size_t>(i)], i, 0, true);
  p.decode();
  for (int i = 0; i < n; ++i) {
    const auto& row = p.logprobs(i);
    std::fwrite(row.data(), sizeof(float), row.size(), stdout);
  }
}

void decode(const options& o) {
  peer p(o, o.prompt_length + o.steps + 1, std::max(o.prompt_length, 1), 1);
  std::mt19937_64 rng(o.seed);
  auto prompt = random_tokens(o.prompt_length, p.vocab(), rng);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.prompt_length; ++i)
    p.add(prompt[static_cast<std::size_t>(i)], i, 0, i + 1 == o.prompt_length);
  for (int step = 0; step < o.steps; ++step) {
    p.decode();
    const auto& row = p.logprobs(step == 0 ? o.prompt_length - 1 : 0);
    const auto next =
        static_cast<llama_token>(std::max_element(row.begin(), row.end()) - row.begin());
    p.clear();
    p.add(next, o.prompt_length + step, 0, true);
  }
  report("decode", o.steps, o.prompt_length + o.steps - 1, seconds_since(start));
}

void smc(const options& o) {
  const int n = o.particles;
  // Cells: the prompt once plus one per particle and step; scratch ids n..2n-1.
  peer p(o, o.prompt_length + n * o.steps + 16, std::max(o.prompt_length, n), 2 * n);
  std::mt19937_64 rng(o.seed);
  const auto prompt = random_tokens(o.prompt_length, p.vocab(), rng);
  std::vector<std::mt19937_64> streams;
  for (int i = 0; i < n; ++i)
    streams.emplace_back(o.seed * 1000003 + static_cast<unsigned long long>(i));
  std::vector<double> log_w(static_cast<std::size_t>(n), 0.0);
  std::vector<llama_token> next(static_cast<std::size_t>(n));
  long tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.prompt_length; ++i)
    p.add(prompt[static_cast<std::size_t>(i)], i, 0, i + 1 == o.prompt_length);
  p.decode();
  tokens += o.prompt_length;
  for (int s = 1; s < n; ++s)
    llama_memory_seq_cp(llama_get_memory(p.ctx()), 0, s, -1, -1);
  const double scale = 1.0 / 0.8;
  for (int step = 0; step < o.steps; ++step) {
    for (int i = 0; i < n; ++i) {
      const auto& row = p.logprobs(step == 0 ? o.prompt_length - 1 : i);
      std::vector<double> probs(row.begin(), row.end());
      for (auto& v : probs)
        v = std::exp(v);
      std::discrete_distribution<int> draw(probs.begin(), probs.end());
      const int token = draw(streams[static_cast<std::size_t>(i)]);
      double top = -INFINITY, total = 0;
      for (float v : row)
        top = std::max(top, v * scale);
      for (float v : row)
        total += std::exp(v * scale - top);
      log_w[static_cast<std::size_t>(i)] +=
          row[static_cast<std::size_t>(token)] * (scale - 1) - (top + std::log(total));
      next[static_cast<std::size_t>(i)] = token;
    }
    // Effective sample size; multinomial resampling under half.
    const double top = *std::max_element(log_w.begin(), log_w.end());
    std::vector<double> w;
    double sum = 0, squares = 0;
    for (double lw : log_w) {
      w.push_back(std::exp(lw - top));
      sum += w.back();
      squares += w.back() * w.back();
    }
    if (sum * sum / squares < n / 2.0) {
      std::discrete_distribution<int> pick(w.begin(), w.end());
      std::vector<int> from(static_cast<std::size_t>(n));
      for (auto& f : from)
        f = pick(rng);
      for (int i = 0; i < n; ++i)
        llama_memory_seq_cp(llama_get_memory(p.ctx()), from[static_cast<std::size_t>(i)],
                            n + i, -1, -1);
      std::vector<llama_token> moved(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        llama_memory_seq_rm(llama_get_memory(p.ctx()), i, -1, -1);
        llama_memory_seq_cp(llama_get_memory(p.ctx()), n + i, i, -1, -1);
        llama_memory_seq_rm(llama_get_memory(p.ctx()), n + i, -1, -1);
        moved[static_cast<std::size_t>(i)] =
            next[static_cast<std::size_t>(from[static_cast<std::size_t>(i)])];
      }
      next = moved;
      std::fill(log_w.begin(), log_w.end(), 0.0);
    }
    p.clear();
    for (int i = 0; i < n; ++i)
      p.add(next[static_cast<std::size_t>(i)], o.prompt_length + step, i, true);
    p.decode();
    tokens += n;
  }
  report("smc", static_cast<long>(n) * o.steps, tokens, seconds_since(start));
}

void score(const options& o) {
  const int total = o.sequences * o.length;
  peer p(o, total + 16, total, o.sequences);
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<llama_token>> sequences;
  for (int s = 0; s < o.sequences; ++s)
    sequences.push_back(random_tokens(o.length, p.vocab(), rng));
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < o.sequences; ++s)
    for (int i = 0; i < o.length; ++i)
      p.add(sequences[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)], i, s,
            true);
  p.decode();
  double checksum = 0;
  for (int i = 0; i < total; ++i)
    checksum += p.logprobs(i)[0];
  report("score", total, total, seconds_since(start));
  if (!std::isfinite(checksum))
    throw std::runtime_error("non-finite log-probs");
}

} // namespace

int main(int argc, char** argv) {
  try {
    const auto o = parse(argc, argv);
    if (o.mode == "rows")
      rows(o);
    else if (o.mode == "decode")
      decode(o);
    else if (o.mode == "smc")
      smc(o);
    else if (o.mode == "score")
      score(o);
    else
      throw std::invalid_argument("unknown mode " + o.mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_cpp_peer: %s\n", e.what());
    return 1;
  }
}
