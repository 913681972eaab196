// The page in front of the API (web_page.hpp): its files from the binary, with the
// headers that keep it to itself; every file the page loads or imports is embedded;
// other paths and cancellations reach the API untouched.

#include "scripted_handler.hpp"

#include <canopy/server/web/web_assets.hpp>
#include <canopy/server/web/web_page.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <set>
#include <string>

namespace canopy::server {
namespace {

using testing::scripted_handler;

struct answered {
  http_response response;
  bool called = false;
};

answered ask(web_page& page, const std::string& method, const std::string& target) {
  answered out;
  http_request request;
  request.method = method;
  request.target = target;
  page.handle(7, std::move(request), [&](http_response r) {
    out.response = std::move(r);
    out.called = true;
  });
  return out;
}

std::string header(const http_response& r, const std::string& name) {
  for (const auto& [key, value] : r.headers)
    if (key == name)
      return value;
  return "";
}

TEST(web_page, serves_its_files_from_the_binary_kept_to_themselves) {
  scripted_handler api;
  web_page page(api);
  const auto index = ask(page, "GET", "/?x=1");
  ASSERT_TRUE(index.called);
  EXPECT_EQ(index.response.status, 200);
  EXPECT_EQ(index.response.content_type, "text/html; charset=utf-8");
  EXPECT_NE(index.response.body.find("<title>Canopy</title>"), std::string::npos);
  EXPECT_EQ(
      header(index.response, "Content-Security-Policy").rfind("default-src 'self'", 0),
      0u);
  EXPECT_EQ(header(index.response, "X-Content-Type-Options"), "nosniff");
  const auto script = ask(page, "GET", "/web/page.js");
  EXPECT_EQ(script.response.content_type, "text/javascript; charset=utf-8");
  EXPECT_FALSE(script.response.body.empty());
  const auto head = ask(page, "HEAD", "/web/page.js");
  EXPECT_EQ(head.response.status, 200);
  EXPECT_TRUE(head.response.body.empty());
  EXPECT_TRUE(api.calls(0, std::chrono::milliseconds(0)).empty());
}

TEST(web_page, refuses_other_methods_and_unknown_files_by_name) {
  scripted_handler api;
  web_page page(api);
  const auto posted = ask(page, "POST", "/");
  EXPECT_EQ(posted.response.status, 405);
  EXPECT_EQ(header(posted.response, "Allow"), "GET, HEAD");
  const auto missing = ask(page, "GET", "/web/missing.js");
  EXPECT_EQ(missing.response.status, 404);
  const auto error = nlohmann::json::parse(missing.response.body).at("error");
  EXPECT_EQ(error.at("code"), "not_found");
  EXPECT_NE(error.at("message").get<std::string>().find("/web/missing.js"),
            std::string::npos);
}

TEST(web_page, every_file_the_page_loads_or_imports_is_embedded) {
  std::set<std::string> embedded;
  for (const auto& asset : web_assets()) {
    EXPECT_FALSE(asset.body.empty()) << asset.path;
    EXPECT_TRUE(embedded.insert(std::string(asset.path)).second) << asset.path;
  }
  // <script src>, <link href> and ES module imports: all the page's own requests for
  // files (its data comes from the API).
  const std::regex reference(R"((?:src|href)="(/web/[^"]+)\"|from "\./([^"]+)\")");
  std::size_t references = 0;
  for (const auto& asset : web_assets()) {
    const std::string body(asset.body);
    for (std::sregex_iterator m(body.begin(), body.end(), reference), end; m != end;
         ++m) {
      const auto path = (*m)[1].matched ? (*m)[1].str() : "/web/" + (*m)[2].str();
      EXPECT_EQ(embedded.count(path), 1u) << asset.path << " asks for " << path;
      ++references;
    }
  }
  EXPECT_GE(references, 12u) << "4 in the page, the rest the modules' imports";
}

TEST(web_page, hands_every_other_request_and_cancellation_to_the_api) {
  scripted_handler api;
  web_page page(api);
  for (const char* target : {"/v1/model", "/webx", "/web", "/healthz"})
    EXPECT_EQ(nlohmann::json::parse(ask(page, "GET", target).response.body).at("target"),
              target);
  page.cancel(42);
  EXPECT_EQ(api.cancelled(1), std::vector<request_id>{42});
  EXPECT_EQ(api.calls(4).size(), 4u);
}

} // namespace
} // namespace canopy::server
