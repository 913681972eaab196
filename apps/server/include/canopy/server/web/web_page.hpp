#pragma once
// canopy serve's page: answers GET (and HEAD) of "/" and "/web/..." from the embedded
// assets and hands every other request to the API. The page's files hold no data, so
// they are served without a token (is_page_path); what the page shows comes from the
// API, which asks for one.
// Thread contract: as request_handler's: handle and cancel on I/O threads, never
// blocking; the assets are immutable.

#include <canopy/server/transport/http_message.hpp>

namespace canopy::server {

class web_page final : public request_handler {
public:
  explicit web_page(request_handler& api) : api_(api) {}
  void handle(request_id id, http_request request, respond_fn respond) override;
  void cancel(request_id id) override { api_.cancel(id); }

private:
  request_handler& api_;
};

} // namespace canopy::server
