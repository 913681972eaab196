#pragma once
// A plain blocking HTTP client over a loopback socket for the transport's tests: it
// sends raw bytes (so a test can send half a header, or a header and no body) and
// reads responses with a time limit, so a broken server fails a test instead of
// hanging it.
// Thread contract: one thread per client.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace canopy::server::testing {

using namespace std::chrono_literals;

struct test_response {
  int status = 0;
  std::map<std::string, std::string> headers; // names lower-cased
  std::string body;

  /// The header's value, "" when absent.
  std::string header(const std::string& lower_case_name) const;
};

class test_client {
public:
  /// Connects to 127.0.0.1:port; throws std::runtime_error when it cannot.
  explicit test_client(std::uint16_t port);
  ~test_client();
  test_client(const test_client&) = delete;
  test_client& operator=(const test_client&) = delete;

  /// Sends all of `bytes`; false when the connection is gone.
  bool send(std::string_view bytes);
  /// The next response; nullopt when none came whole within `timeout` (bytes of a
  /// partial one are kept for the next call) or the server closed first.
  std::optional<test_response> read_response(std::chrono::milliseconds timeout = 5s);
  /// True when the server closed the connection (end of stream or reset) within
  /// `timeout` without sending anything more.
  bool closed_within(std::chrono::milliseconds timeout);
  /// Closes this end now.
  void close();

private:
  // Waits up to `timeout` for bytes and appends them: >0 bytes read, 0 end of stream
  // or reset, -1 timeout.
  long receive(std::chrono::milliseconds timeout);

  int fd_ = -1;
  std::string unread_;
};

/// A request with Host and (with a body) Content-Length; `headers` are extra lines,
/// each ending in "\r\n".
std::string make_request(std::string_view method, std::string_view target,
                         std::string_view body = "", std::string_view headers = "");

} // namespace canopy::server::testing
