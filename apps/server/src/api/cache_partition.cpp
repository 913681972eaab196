#include <canopy/server/api/cache_partition.hpp>

namespace canopy::server {

std::string cache_partition(std::string_view tenant, std::string_view salt) {
  if (tenant.empty() && salt.empty())
    return {};
  std::string partition(tenant);
  partition.push_back('\n');
  partition.append(salt);
  return partition;
}

std::string tenant_partitions(std::string_view tenant) {
  return tenant.empty() ? std::string() : cache_partition(tenant, {});
}

} // namespace canopy::server
