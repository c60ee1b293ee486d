// The `tls:` block of a Redis or etcd backend: the certificate files, the server name and
// verification.
// The files are only checked to be readable here; dlock::init reads the certificates.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "loader.hpp"

namespace dlock::internal::loading {

void Loader::tls_settings(const Entry& item, Server server, TlsConfig& tls) const {
  if (item.value.IsScalar()) {
    // `tls: true` reads as if it switched TLS on; the scheme does that.
    fail(item.value_mark(), item.path,
         fmt::format("expected a map of TLS settings, got a single value ({} turn TLS on)",
                     tls_addresses(server)));
  }
  const std::vector<Entry> items =
      entries(item.value, item.value_mark(), item.path, "TLS settings");
  const std::size_t errors_before = errors_.size();
  for (const Entry& setting : items) {
    keep_going([&] {
      const std::string_view key = setting.key;
      if (key == "ca_file") {
        tls.ca_file = tls_file(setting);
      } else if (key == "cert_file") {
        tls.cert_file = tls_file(setting);
      } else if (key == "key_file") {
        tls.key_file = tls_file(setting);
      } else if (key == "server_name") {
        tls.server_name = non_empty(setting, "a host name");
      } else if (key == "verify") {
        tls.verify = boolean(setting);
        if (!tls.verify && server == Server::kEtcd) {
          // The backend always verifies (runtime/src/etcd); refused here, where the error can
          // point at the line.
          fail(setting.value_mark(), setting.path,
               "an etcd backend always verifies the members' certificates; for a test CA, name "
               "it in ca_file");
        }
        if (!tls.verify) {
          warn(setting.value_mark(), setting.path,
               "certificate verification is off: any server can pose as this one; for tests "
               "only");
        }
      } else {
        unknown_key(setting, kTlsKeys);
      }
    });
  }
  // Checks across keys would misread a value that was refused.
  if (errors_.size() != errors_before) return;
  const Entry* cert = find_entry(items, "cert_file");
  const Entry* key = find_entry(items, "key_file");
  if (cert != nullptr && key == nullptr) {
    fail(cert->key_mark, cert->path, "a client certificate needs its key; set 'key_file' too");
  }
  if (key != nullptr && cert == nullptr) {
    fail(key->key_mark, key->path, "a key needs its client certificate; set 'cert_file' too");
  }
}

std::string Loader::tls_file(const Entry& item) const {
  std::filesystem::path path(non_empty(item, "a file path"));
  if (path.is_relative() && !base_dir_.empty()) {
    path = (std::filesystem::path(base_dir_) / path).lexically_normal();
  }
  const std::string text = path.string();
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    fail(item.value_mark(), item.path,
         fmt::format("cannot read '{}': it is a directory", printable(text)));
  }
  std::FILE* file = std::fopen(text.c_str(), "rb");
  if (file == nullptr) {
    const std::error_code error(errno, std::generic_category());
    fail(item.value_mark(), item.path,
         fmt::format("cannot read '{}': {}", printable(text), error.message()));
  }
  std::fclose(file);
  return text;
}

bool Loader::boolean(const Entry& item) const {
  const std::string text = scalar(item, "true or false");
  // YAML 1.2 spellings only: a YAML 1.1 `no` or `off` is refused rather than guessed at.
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  fail(item.value_mark(), item.path,
       fmt::format("expected true or false, got '{}'", printable(text)));
}

void Loader::check_tls(const std::vector<Entry>& items, const TopologySpec& spec,
                       const BackendConfig& backend) const {
  const Entry* tls = find_entry(items, "tls");
  if (tls == nullptr || backend.tls.enabled) return;
  fail(tls->key_mark, tls->path,
       fmt::format("tls applies to {}, and this backend's are not; write them as "
                   "{}host:port, or remove 'tls'",
                   tls_addresses(spec.server), tls_scheme(spec.server)));
}

}  // namespace dlock::internal::loading
