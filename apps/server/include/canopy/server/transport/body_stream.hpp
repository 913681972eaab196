#pragma once
// The body of a streamed response (server-sent events), which the handler produces
// piece by piece after the response's head has gone out. The handler pushes pieces
// and ends the stream once; the transport takes what has come whenever it is woken,
// and sends it as it comes (HTTP/1.1: chunked; HTTP/1.0: unframed, closing at the
// end). Pieces wait here while the client is slow to read: the handler reserves the
// bytes of its whole answer beforehand (http_response::reserved), which bounds them.
// Thread contract: push, end, on_ready and take from any thread; `wake` runs on the
// thread that pushed or ended (or the one calling on_ready), never under the lock.

#include <functional>
#include <mutex>
#include <string>

namespace canopy::server {

class body_stream {
public:
  /// Appends a piece (the handler's side). After end(), ignored.
  void push(std::string piece);
  /// The body ends after the pieces pushed (the handler's side; later calls do nothing).
  void end();

  /// What take() would return, as the transport sees it.
  struct taken {
    std::string bytes; // pushed since the last take
    bool ended = false;
  };
  /// The transport's side: `wake` runs after every push and end from now on, and at
  /// once if something already waits. It must not call back into this stream's
  /// push or end.
  void on_ready(std::function<void()> wake);
  /// The transport's side: everything pushed since the last take.
  taken take();

private:
  std::mutex mutex_;
  std::string waiting_;        // guarded by mutex_
  bool ended_ = false;         // guarded by mutex_
  std::function<void()> wake_; // guarded by mutex_ (copied out to run)
};

} // namespace canopy::server
