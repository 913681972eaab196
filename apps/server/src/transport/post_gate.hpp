#pragma once
// Lets `respond` callbacks, which may run on any thread at any time (even after the
// http_server is gone), reach a connection only while its io_context exists. A
// callback does its whole hand-off (locking the connection, posting to its strand)
// inside run_if_open; the server closes the gate before destroying the io_context, so
// no post can race with that destruction.
// Thread contract: any thread.

#include <mutex>
#include <shared_mutex>

namespace canopy::server {

class post_gate {
public:
  /// Runs `hand_off` now if the gate is open, else not at all. Callers on many
  /// threads proceed in parallel.
  template <class F> void run_if_open(F&& hand_off) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (open_)
      hand_off();
  }

  /// Waits for hand-offs in progress; none runs afterwards.
  void close() {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    open_ = false;
  }

private:
  std::shared_mutex mutex_;
  bool open_ = true; // guarded by mutex_
};

} // namespace canopy::server
