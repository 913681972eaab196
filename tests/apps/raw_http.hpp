#pragma once
// A deliberately plain HTTP/1.1 client over a blocking loopback socket, so tests can
// send exactly the bytes they mean (broken JSON, slow or oversized headers, bodies
// never sent) and read exactly what the server answers.
// Thread contract: one connection per thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace canopy::testing {

struct http_reply {
  int status = 0;
  std::map<std::string, std::string> headers; // names lower-cased
  std::string body;
};

class raw_connection {
public:
  explicit raw_connection(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("cannot connect to port " + std::to_string(port));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~raw_connection() { ::close(fd_); }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  void send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      auto n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0)
        throw std::runtime_error("send failed");
      sent += static_cast<std::size_t>(n);
    }
  }

  /// Reads one response (Content-Length framed); nullopt when the server closed the
  /// connection or nothing came within `patience`.
  std::optional<http_reply> read_reply(std::chrono::milliseconds patience = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    std::size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline))
        return std::nullopt;
    http_reply reply;
    const std::string head = buffer_.substr(0, header_end);
    reply.status = std::stoi(head.substr(head.find(' ') + 1, 3));
    std::size_t line = head.find("\r\n");
    while (line != std::string::npos) {
      auto next = head.find("\r\n", line + 2);
      auto text = head.substr(line + 2, next == std::string::npos ? std::string::npos : next - line - 2);
      auto colon = text.find(':');
      if (colon != std::string::npos) {
        std::string name = text.substr(0, colon);
        for (auto& c : name)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto value = text.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        reply.headers[name] = value;
      }
      line = next;
    }
    std::size_t length = 0;
    if (auto it = reply.headers.find("content-length"); it != reply.headers.end())
      length = std::stoul(it->second);
    while (buffer_.size() < header_end + 4 + length)
      if (!fill(deadline))
        return std::nullopt;
    reply.body = buffer_.substr(header_end + 4, length);
    buffer_.erase(0, header_end + 4 + length);
    return reply;
  }

  /// True when the server closed the connection (EOF) within `patience`.
  bool closed_by_server(std::chrono::milliseconds patience) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0)
        continue;
      char c[512];
      auto n = ::recv(fd_, c, sizeof c, 0);
      if (n <= 0)
        return true;
      buffer_.append(c, static_cast<std::size_t>(n));
    }
    return false;
  }

private:
  bool fill(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      return false;
    char chunk[65536];
    auto n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0)
      return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

/// A complete request with a Content-Length body.
inline std::string http_post(const std::string& target, const std::string& body,
                             const std::string& extra_headers = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline std::string http_get(const std::string& target, const std::string& extra_headers = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers + "\r\n";
}

/// One request on a fresh connection.
inline http_reply exchange(std::uint16_t port, const std::string& request) {
  raw_connection c(port);
  c.send(request);
  auto reply = c.read_reply();
  if (!reply)
    throw std::runtime_error("no reply to: " + request.substr(0, 200));
  return *reply;
}

} // namespace canopy::testing
