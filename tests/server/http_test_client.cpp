#include "http_test_client.hpp"

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <stdexcept>

namespace canopy::server::testing {

namespace http = boost::beast::http;

std::string test_response::header(const std::string& lower_case_name) const {
  auto found = headers.find(lower_case_name);
  return found == headers.end() ? std::string() : found->second;
}

test_client::test_client(std::uint16_t port) {
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
}

test_client::~test_client() {
  close();
}

void test_client::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

bool test_client::send(std::string_view bytes) {
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

long test_client::receive(std::chrono::milliseconds timeout) {
  pollfd waiting{fd_, POLLIN, 0};
  int ready = ::poll(&waiting, 1, static_cast<int>(timeout.count()));
  if (ready == 0)
    return -1;
  char chunk[16384];
  auto got = ready < 0 ? -1 : ::recv(fd_, chunk, sizeof chunk, 0);
  if (got <= 0)
    return 0;
  unread_.append(chunk, static_cast<std::size_t>(got));
  return got;
}

std::optional<test_response>
test_client::read_response(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Parse what has arrived from scratch: responses here are small.
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    boost::beast::error_code ec;
    std::size_t used = 0;
    while (used < unread_.size() && !parser.is_done() && !ec)
      used += parser.put(
          boost::asio::buffer(unread_.data() + used, unread_.size() - used), ec);
    if (parser.is_done()) {
      unread_.erase(0, used);
      test_response response;
      response.status = static_cast<int>(parser.get().result_int());
      for (const auto& field : parser.get()) {
        std::string name(field.name_string());
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
          return static_cast<char>(std::tolower(c));
        });
        response.headers[name] = std::string(field.value());
      }
      response.body = std::move(parser.get().body());
      return response;
    }
    if (ec && ec != http::error::need_more)
      throw std::runtime_error("the server sent a malformed response: " + ec.message());
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0 || receive(left) <= 0)
      return std::nullopt;
  }
}

bool test_client::closed_within(std::chrono::milliseconds timeout) {
  auto before = unread_.size();
  return receive(timeout) == 0 && unread_.size() == before;
}

std::string make_request(std::string_view method, std::string_view target,
                         std::string_view body, std::string_view headers) {
  std::string request;
  request.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  request.append("Host: 127.0.0.1\r\n").append(headers);
  if (!body.empty() || method == "POST")
    request.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  request.append("\r\n").append(body);
  return request;
}

} // namespace canopy::server::testing
