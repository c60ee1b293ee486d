// test_pki(): CA, server, client and deliberately bad certificates, made with the OpenSSL 3
// C API (no openssl program), in a directory removed at exit.
#include "test_pki.hpp"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace dlock::test {
namespace {

namespace fs = std::filesystem;

struct Free {
  void operator()(EVP_PKEY* p) const noexcept { EVP_PKEY_free(p); }
  void operator()(X509* p) const noexcept { X509_free(p); }
  void operator()(X509_STORE* p) const noexcept { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const noexcept { X509_STORE_CTX_free(p); }
  void operator()(BIGNUM* p) const noexcept { BN_free(p); }
  void operator()(X509_EXTENSION* p) const noexcept { X509_EXTENSION_free(p); }
  void operator()(FILE* p) const noexcept { ::fclose(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Free>;
using CertPtr = std::unique_ptr<X509, Free>;

constexpr long kHour = 3600;
constexpr long kDay = 24 * kHour;
constexpr const char* kServerNames = "IP:127.0.0.1,DNS:localhost";

// OpenSSL's error queue (emptied) in the message, so a failure says what OpenSSL disliked.
[[noreturn]] void throw_openssl(const std::string& what) {
  std::string details;
  for (unsigned long code = ERR_get_error(); code != 0; code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    details += details.empty() ? text : std::string("; ") + text;
  }
  throw std::runtime_error(
      fmt::format("test PKI: {} failed: {}", what, details.empty() ? "no OpenSSL error" : details));
}

KeyPtr new_key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) throw_openssl("EVP_EC_gen(P-256)");
  return key;
}

// What one certificate says; validity in seconds from now.
struct CertSpec {
  std::string common_name;
  bool ca = false;
  std::string subject_alt_names;   // e.g. "IP:127.0.0.1,DNS:localhost"; empty: none
  std::string extended_key_usage;  // e.g. "serverAuth,clientAuth"; empty: none
  long not_before = -kDay;
  long not_after = 10 * kDay;
};

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    throw_openssl(fmt::format("extension {} = {}", OBJ_nid2sn(nid), value));
  }
}

void set_identity(X509* cert, const CertSpec& spec) {
  std::unique_ptr<BIGNUM, Free> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) == nullptr) {
    throw_openssl("serial number");
  }
  X509_NAME* name = X509_get_subject_name(cert);
  const auto* cn = reinterpret_cast<const unsigned char*>(spec.common_name.c_str());
  const auto* org = reinterpret_cast<const unsigned char*>("dlock tests");
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, org, -1, -1, 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, cn, -1, -1, 0) != 1) {
    throw_openssl("subject name");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert), spec.not_before) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert), spec.not_after) == nullptr) {
    throw_openssl("validity");
  }
}

// A certificate for `key` signed by `issuer`/`issuer_key`; both null: self-signed.
CertPtr make_cert(const CertSpec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key) {
  CertPtr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) throw_openssl("X509_new");
  set_identity(cert.get(), spec);
  if (X509_set_pubkey(cert.get(), key) != 1) throw_openssl("X509_set_pubkey");
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1) {
    throw_openssl("X509_set_issuer_name");
  }
  add_extension(cert.get(), signer, NID_basic_constraints,
                spec.ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  add_extension(cert.get(), signer, NID_key_usage,
                spec.ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
  add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) add_extension(cert.get(), signer, NID_authority_key_identifier, "keyid");
  if (!spec.subject_alt_names.empty()) {
    add_extension(cert.get(), signer, NID_subject_alt_name, spec.subject_alt_names);
  }
  if (!spec.extended_key_usage.empty()) {
    add_extension(cert.get(), signer, NID_ext_key_usage, spec.extended_key_usage);
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) <= 0) {
    throw_openssl("X509_sign " + spec.common_name);
  }
  return cert;
}

std::unique_ptr<FILE, Free> create_file(const std::string& path, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  FILE* file = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (file == nullptr) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(
        fmt::format("test PKI: cannot create {}: {}", path, std::strerror(error)));
  }
  return std::unique_ptr<FILE, Free>(file);
}

void write_cert(const std::string& path, X509* cert) {
  auto file = create_file(path, 0644);
  if (PEM_write_X509(file.get(), cert) != 1 || ::fflush(file.get()) != 0)
    throw_openssl("write " + path);
}

// PKCS#8 PEM, mode 0600; encrypted with AES-256-CBC when a password is given.
void write_key(const std::string& path, EVP_PKEY* key, const std::string& password = "") {
  auto file = create_file(path, 0600);
  const EVP_CIPHER* cipher = password.empty() ? nullptr : EVP_aes_256_cbc();
  auto* pass = reinterpret_cast<unsigned char*>(const_cast<char*>(password.c_str()));
  const int written =
      PEM_write_PrivateKey(file.get(), key, cipher, password.empty() ? nullptr : pass,
                           static_cast<int>(password.size()), nullptr, nullptr);
  if (written != 1 || ::fflush(file.get()) != 0) throw_openssl("write " + path);
}

// A leaf certificate signed by the given CA, written as NAME.crt and NAME.key.
void issue(const fs::path& dir, const std::string& name, const CertSpec& spec, X509* ca,
           EVP_PKEY* ca_key, std::string& cert_path, std::string& key_path) {
  const KeyPtr key = new_key();
  const CertPtr cert = make_cert(spec, key.get(), ca, ca_key);
  cert_path = (dir / (name + ".crt")).string();
  key_path = (dir / (name + ".key")).string();
  write_cert(cert_path, cert.get());
  write_key(key_path, key.get());
}

// The directory, for the atexit handler: a plain buffer, so no destructor runs before it.
char g_pki_dir[PATH_MAX];
pid_t g_pki_owner = -1;

void remove_pki_dir() {
  if (g_pki_dir[0] == '\0' || ::getpid() != g_pki_owner) return;  // not in a forked child
  const char* keep = ::getenv("DLOCK_TEST_KEEP_DIRS");
  if (keep != nullptr && *keep != '\0' && std::string_view(keep) != "0") return;
  std::error_code ignored;
  fs::remove_all(g_pki_dir, ignored);
}

std::string make_pki_dir() {
  const char* tmp = ::getenv("TMPDIR");
  const fs::path base = tmp != nullptr && *tmp != '\0' ? fs::path(tmp) : fs::path("/tmp");
  std::string pattern = (base / "dlock-pki-XXXXXX").string();
  if (pattern.size() >= sizeof g_pki_dir || ::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error(
        fmt::format("test PKI: mkdtemp {}: {}", pattern, std::strerror(errno)));
  }
  std::strcpy(g_pki_dir, pattern.c_str());
  g_pki_owner = ::getpid();
  std::atexit(remove_pki_dir);
  return pattern;
}

// A CA written to DIR/NAME.crt (its key stays in memory).
CertPtr make_ca(const fs::path& dir, const std::string& name, const std::string& common_name,
                KeyPtr& key, std::string& path) {
  key = new_key();
  CertSpec spec;
  spec.common_name = common_name;
  spec.ca = true;
  CertPtr cert = make_cert(spec, key.get(), nullptr, nullptr);
  path = (dir / (name + ".crt")).string();
  write_cert(path, cert.get());
  return cert;
}

TestPki generate() {
  TestPki pki;
  pki.dir = make_pki_dir();
  const fs::path dir = pki.dir;
  KeyPtr ca_key;
  KeyPtr other_key;
  const CertPtr ca = make_ca(dir, "ca", "dlock test CA", ca_key, pki.ca_file);
  const CertPtr other =
      make_ca(dir, "other-ca", "dlock other test CA", other_key, pki.other_ca_file);

  CertSpec server;
  server.common_name = "localhost";
  server.subject_alt_names = kServerNames;
  server.extended_key_usage = "serverAuth,clientAuth";
  issue(dir, "server", server, ca.get(), ca_key.get(), pki.server_cert, pki.server_key);
  CertSpec expired = server;
  expired.not_before = -2 * kHour;
  expired.not_after = -kHour;
  issue(dir, "expired", expired, ca.get(), ca_key.get(), pki.expired_cert, pki.expired_key);
  issue(dir, "stranger", server, other.get(), other_key.get(), pki.stranger_cert, pki.stranger_key);
  CertSpec wrong_name = server;
  wrong_name.common_name = "other.example";
  wrong_name.subject_alt_names = "DNS:other.example";
  issue(dir, "wrong-name", wrong_name, ca.get(), ca_key.get(), pki.wrong_name_cert,
        pki.wrong_name_key);

  CertSpec client;
  client.common_name = "dlock test client";
  client.extended_key_usage = "clientAuth";
  const KeyPtr client_key = new_key();
  const CertPtr client_cert = make_cert(client, client_key.get(), ca.get(), ca_key.get());
  pki.client_cert = (dir / "client.crt").string();
  pki.client_key = (dir / "client.key").string();
  pki.client_key_encrypted = (dir / "client-encrypted.key").string();
  write_cert(pki.client_cert, client_cert.get());
  write_key(pki.client_key, client_key.get());
  write_key(pki.client_key_encrypted, client_key.get(), pki.key_password);
  return pki;
}

CertPtr read_cert(const std::string& path) {
  std::unique_ptr<FILE, Free> file(::fopen(path.c_str(), "re"));
  if (!file)
    throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  CertPtr cert(PEM_read_X509(file.get(), nullptr, nullptr, nullptr));
  if (!cert) throw_openssl("read certificate " + path);
  return cert;
}

}  // namespace

const TestPki& test_pki() {
  static const TestPki pki = generate();
  return pki;
}

int verify_certificate(const std::string& cert_file, const std::string& ca_file,
                       const std::string& host) {
  const CertPtr cert = read_cert(cert_file);
  std::unique_ptr<X509_STORE, Free> store(X509_STORE_new());
  if (!store || X509_STORE_load_file(store.get(), ca_file.c_str()) != 1) {
    throw_openssl("load CA file " + ca_file);
  }
  std::unique_ptr<X509_STORE_CTX, Free> ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    throw_openssl("X509_STORE_CTX_init");
  }
  if (!host.empty()) {
    X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
    // An IP address is matched against IP SANs, anything else against DNS names.
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      ERR_clear_error();
      if (X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) != 1) throw_openssl("set host");
    }
  }
  const int verified = X509_verify_cert(ctx.get());
  const int error = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  return verified == 1 ? X509_V_OK : error;
}

std::vector<std::string> redis_cli_tls_arguments(ClientCert cert) {
  const TestPki& pki = test_pki();
  std::vector<std::string> args = {"--tls", "--cacert", pki.ca_file};
  if (cert == ClientCert::client) {
    args.insert(args.end(), {"--cert", pki.client_cert, "--key", pki.client_key});
  }
  return args;
}

CommandResult redis_cli_tls(int port, const std::vector<std::string>& args, ClientCert cert,
                            std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {redis_cli_program()};
  const auto tls = redis_cli_tls_arguments(cert);
  argv.insert(argv.end(), tls.begin(), tls.end());
  argv.insert(argv.end(), {"-h", "127.0.0.1", "-p", std::to_string(port)});
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, timeout);
}

}  // namespace dlock::test
