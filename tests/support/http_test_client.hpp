#pragma once
// A deliberately plain HTTP/1.1 client over a blocking loopback socket, for the tests
// of canopy serve and of its transport: it sends exactly the bytes a test means (half
// a header, a header and no body, broken JSON) and reads exactly what the server
// answers, framed by Content-Length or chunked. Every read has a time limit, so a broken
// server fails a test instead of hanging it; a response this client cannot frame throws.
// Thread contract: one thread per client.

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace canopy::testing {

struct test_response {
  int status = 0;
  std::map<std::string, std::string> headers; // names lower-cased
  std::string body;

  /// The header's value, "" when absent.
  std::string header(const std::string& lower_case_name) const {
    auto found = headers.find(lower_case_name);
    return found == headers.end() ? std::string() : found->second;
  }
};

class test_client {
public:
  /// Connects to 127.0.0.1:port; throws std::runtime_error when it cannot.
  explicit test_client(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 ||
        ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      close();
      throw std::runtime_error("cannot connect to port " + std::to_string(port));
    }
    // Each send leaves at once, so a test's partial request is on the wire as sent.
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~test_client() { close(); }
  test_client(const test_client&) = delete;
  test_client& operator=(const test_client&) = delete;

  /// Sends all of `bytes`; false when the connection is gone.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      auto sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR)
        continue;
      if (sent <= 0)
        return false;
      bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return true;
  }

  /// The next response; nullopt when none came whole within `timeout` (bytes of a
  /// partial one are kept for the next call) or the server closed first.
  std::optional<test_response>
  read_response(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto response = take_response())
        return response;
      if (ended_)
        return std::nullopt;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0 || receive(left) < 0)
        return std::nullopt;
    }
  }

  /// The bytes received and not yet returned as a response, after waiting up to
  /// `timeout` for more (a streamed answer's pieces as they arrive).
  std::string unread_within(std::chrono::milliseconds timeout) {
    receive(timeout);
    return unread_;
  }

  /// True when the server closed the connection (end of stream or reset) within
  /// `timeout` without sending anything more.
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto before = unread_.size();
    return receive(timeout) == 0 && unread_.size() == before;
  }

  /// True once bytes wait to be read within `timeout` (none are read).
  bool readable_within(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0;
  }

  /// Closes this end now.
  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

  /// Leaves abortively: the server sees a reset, not an end of stream (a client killed
  /// with unread bytes, or one that gives up).
  void reset() {
    linger abort{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    close();
  }

  /// Half-closes: says it sends nothing more, and still reads.
  void shutdown_send() { ::shutdown(fd_, SHUT_WR); }

private:
  // Waits up to `timeout` for bytes and appends them: >0 bytes read, 0 end of stream
  // or reset, -1 timeout.
  long receive(std::chrono::milliseconds timeout) {
    pollfd waiting{fd_, POLLIN, 0};
    int ready;
    while ((ready = ::poll(&waiting, 1, static_cast<int>(timeout.count()))) < 0 &&
           errno == EINTR) {
    }
    if (ready == 0)
      return -1;
    char chunk[65536];
    auto got = ready < 0 ? -1 : ::recv(fd_, chunk, sizeof chunk, 0);
    if (got <= 0) {
      ended_ = true;
      return 0;
    }
    unread_.append(chunk, static_cast<std::size_t>(got));
    return got;
  }

  [[noreturn]] static void malformed(const std::string& what) {
    throw std::runtime_error("the server sent a malformed response: " + what);
  }

  // The response at the front of the unread bytes, removed from them; nullopt while
  // it is incomplete.
  std::optional<test_response> take_response() {
    const auto head_end = unread_.find("\r\n\r\n");
    if (head_end == std::string::npos)
      return std::nullopt;
    const std::string head = unread_.substr(0, head_end);
    const auto status_end = std::min(head.find("\r\n"), head.size());
    const std::string status_line = head.substr(0, status_end);
    const auto digits = [](const std::string& s) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
        return std::isdigit(c) != 0;
      });
    };
    if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12 ||
        status_line[8] != ' ' || !digits(status_line.substr(9, 3)))
      malformed("status line \"" + status_line + "\"");
    test_response response;
    response.status = std::stoi(status_line.substr(9, 3));
    for (auto at = status_end + 2; at < head.size();) {
      const auto end = std::min(head.find("\r\n", at), head.size());
      const std::string line = head.substr(at, end - at);
      const auto colon = line.find(':');
      if (colon == 0 || colon == std::string::npos)
        malformed("header line \"" + line + "\"");
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      const auto first = line.find_first_not_of(" \t", colon + 1);
      const auto last = line.find_last_not_of(" \t");
      response.headers[name] =
          first == std::string::npos ? "" : line.substr(first, last + 1 - first);
      at = end + 2;
    }
    // Bodies are framed by Content-Length, or chunked (a streamed answer), or (HTTP/1.0
    // streamed) end with the connection. 1xx, 204 and 304 have none.
    std::string body;
    std::size_t consumed = head_end + 4;
    if (response.status / 100 != 1 && response.status != 204 && response.status != 304) {
      const std::string coding = response.header("transfer-encoding");
      const std::string declared = response.header("content-length");
      if (coding == "chunked") {
        if (!declared.empty())
          malformed("both Content-Length and Transfer-Encoding");
        if (!take_chunks(consumed, body))
          return std::nullopt;
      } else if (!coding.empty()) {
        malformed("Transfer-Encoding \"" + coding + "\"");
      } else if (declared.empty() && status_line.rfind("HTTP/1.0", 0) == 0) {
        if (!ended_)
          return std::nullopt;
        body = unread_.substr(consumed);
        consumed = unread_.size();
      } else {
        if (!digits(declared))
          malformed("Content-Length \"" + declared + "\"");
        const auto length = std::stoul(declared);
        if (unread_.size() < consumed + length)
          return std::nullopt;
        body = unread_.substr(consumed, length);
        consumed += length;
      }
    }
    response.body = std::move(body);
    unread_.erase(0, consumed);
    return response;
  }

  // Decodes the chunked body starting at unread_[at]: true with `body` and `at` past
  // its end once the last chunk has come, false while it is incomplete.
  bool take_chunks(std::size_t& at, std::string& body) const {
    std::size_t next = at;
    std::string decoded;
    for (;;) {
      const auto line_end = unread_.find("\r\n", next);
      if (line_end == std::string::npos)
        return false;
      const std::string size_line = unread_.substr(next, line_end - next);
      if (size_line.empty() ||
          !std::all_of(size_line.begin(), size_line.end(),
                       [](unsigned char c) { return std::isxdigit(c); }))
        malformed("chunk size \"" + size_line + "\"");
      const auto size = std::stoul(size_line, nullptr, 16);
      const auto data = line_end + 2;
      if (unread_.size() < data + size + 2)
        return false;
      if (unread_.compare(data + size, 2, "\r\n") != 0)
        malformed("a chunk not ended by CRLF");
      decoded.append(unread_, data, size);
      next = data + size + 2;
      if (size == 0) {
        at = next;
        body = std::move(decoded);
        return true;
      }
    }
  }

  int fd_ = -1;
  std::string unread_; // received, not yet returned as a response
  bool ended_ = false; // the server closed its side
};

/// A request with Host and (with a body, or for POST) Content-Length; `headers` are
/// extra lines, each ending in "\r\n".
inline std::string make_request(std::string_view method, std::string_view target,
                                std::string_view body = "",
                                std::string_view headers = "") {
  std::string request;
  request.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  request.append("Host: 127.0.0.1\r\n").append(headers);
  if (!body.empty() || method == "POST")
    request.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  request.append("\r\n").append(body);
  return request;
}

/// Sends `request` on a fresh connection and returns the response; throws when none
/// comes within read_response's time limit.
inline test_response exchange(std::uint16_t port, const std::string& request) {
  test_client client(port);
  auto response = client.send(request) ? client.read_response() : std::nullopt;
  if (!response)
    throw std::runtime_error("no response to: " + request.substr(0, 200));
  return *response;
}

} // namespace canopy::testing
