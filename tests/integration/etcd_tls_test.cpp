// The etcd backend over https:// against real etcd members with TLS on their client URLs
// (certificates made for the test run, tests/support/test_pki.hpp): locking, mutual TLS, the
// server clock (read over the project's own TLS stream) and dlockctl; and every way the TLS
// can fail (another CA, another name, an expired certificate, no client certificate, a plain
// member behind https://), each a clear error naming TLS within the timeouts, never a
// fall-back to plain text. Each cluster is started once, when a test first asks for it.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "dlock/admin.hpp"
#include "dlock/dlock.hpp"
#include "dlock/schedule.hpp"
#include "etcd_cluster.hpp"
#include "fixtures.hpp"
#include "test_pki.hpp"
#include "tls_fixtures.hpp"

namespace dlock::test {
namespace {

template <typename... Args>
void figure(fmt::format_string<Args...> text, Args&&... args) {
  fmt::print("[ measured ] {}\n", fmt::format(text, std::forward<Args>(args)...));
  std::fflush(stdout);
}

// A cluster started on first use and kept for the program.
EtcdCluster& started(std::unique_ptr<EtcdCluster>& slot, EtcdClusterOptions options) {
  if (!slot) {
    slot = std::make_unique<EtcdCluster>(std::move(options));
    const auto before = Clock::now();
    slot->start();
    figure("{} started in {} ms", slot->options().name, elapsed_ms(before));
  }
  return *slot;
}

EtcdClusterOptions tls_options(const char* name, int members) {
  EtcdClusterOptions options;
  options.name = name;
  options.members = members;
  options.tls.enabled = true;
  return options;
}

// Three members with test_pki()'s server certificate; clients need no certificate.
EtcdCluster& tls_cluster() {
  static std::unique_ptr<EtcdCluster> slot;
  return started(slot, tls_options("etcd-tls", 3));
}

// One member that asks every client for a certificate signed by the test CA.
EtcdCluster& mutual_cluster() {
  static std::unique_ptr<EtcdCluster> slot;
  EtcdClusterOptions options = tls_options("etcd-mtls", 1);
  options.tls.client_cert_auth = true;
  return started(slot, options);
}

// One member whose certificate expired an hour ago (the harness does not check it).
EtcdCluster& expired_cluster() {
  static std::unique_ptr<EtcdCluster> slot;
  EtcdClusterOptions options = tls_options("etcd-expired", 1);
  options.tls.cert_file = test_pki().expired_cert;
  options.tls.key_file = test_pki().expired_key;
  options.tls.client.verify = false;
  return started(slot, options);
}

// One member without TLS.
EtcdCluster& plain_cluster() {
  static std::unique_ptr<EtcdCluster> slot;
  EtcdClusterOptions options;
  options.name = "etcd-plain";
  options.members = 1;
  return started(slot, options);
}

// A backend on `etcd`'s members over TLS, trusting the test CA (and showing the client
// certificate with `client_cert`), with 1 s timeouts.
Config tls_config(const EtcdCluster& etcd, bool client_cert = false) {
  Config c;
  c.service = unique_service();
  BackendConfig b;
  b.name = "default";
  b.topology = Topology::kEtcd;
  for (int i = 0; i < etcd.members(); ++i) b.endpoints.push_back({"127.0.0.1", etcd.client_port(i)});
  b.connect_timeout = 1s;
  b.command_timeout = 1s;
  use_test_tls(b, client_cert);
  c.backends["default"] = b;
  return c;
}

BackendConfig& backend(Config& c) { return c.backends["default"]; }

// An acquire that fails: its lease and how long it took.
struct Refusal {
  Lease lease;
  long long ms = 0;
};
// A client's first acquire (its channels new) and second (they have failed before).
using Refusals = std::array<Refusal, 2>;

Refusals refusal(const Config& c, const char* what) {
  Client client(c);
  Refusals out;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto before = Clock::now();
    out[i].lease = client.acquire("job", settings(5s));
    out[i].ms = elapsed_ms(before);
    figure("{} (call {}): {} after {} ms: {}", what, i + 1, to_string(out[i].lease.status()),
           out[i].ms, out[i].lease.error());
  }
  return out;
}

// Each error names TLS and `reason`, comes within the command timeout (and a margin for the
// attempt in flight), and no lock was granted.
void expect_clear(const Refusals& refusals, const std::string& reason) {
  for (const Refusal& r : refusals) {
    EXPECT_EQ(r.lease.status(), AcquireStatus::kUnavailable) << r.lease.error();
    EXPECT_NE(r.lease.error().find("TLS: "), std::string::npos) << r.lease.error();
    EXPECT_NE(r.lease.error().find(reason), std::string::npos) << r.lease.error();
    EXPECT_LT(r.ms, 1000 + 500);
  }
}

// The connections the members of `etcd` refused, as they logged them ("rejected connection",
// with Go's TLS error). A plain-text request would be logged as "first record does not look
// like a TLS handshake".
std::string rejections(const EtcdCluster& etcd) {
  std::string out;
  for (int i = 0; i < etcd.members(); ++i) {
    std::ifstream in(etcd.log_file(i));
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"rejected connection\"") != std::string::npos) out += line + "\n";
    }
  }
  return out;
}

// A refused acquire on `etcd`, which saw TLS attempts only.
Refusals tls_refusal(const EtcdCluster& etcd, const Config& c, const char* what) {
  const std::size_t before = rejections(etcd).size();
  Refusals r = refusal(c, what);
  const std::string seen = rejections(etcd);
  EXPECT_GT(seen.size(), before) << "the members saw no attempt";
  EXPECT_EQ(seen.find("does not look like a TLS handshake"), std::string::npos) << seen;
  return r;
}

TEST(EtcdOverTls, LocksOverHttpsTrustingTheTestCa) {
  EtcdCluster& etcd = tls_cluster();
  Config c = tls_config(etcd);
  Client client(c);
  const auto before = Clock::now();
  Lease lease = client.acquire("order:1", settings(10s));
  ASSERT_TRUE(lease) << lease.error();
  figure("first acquire over https (handshake included) {} ms", elapsed_ms(before));
  const auto keys = etcd.client(0).range("/dlock/" + c.service + "/locks/");
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(static_cast<std::uint64_t>(keys[0].create_revision), lease.token());
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(etcd.client(0).range("/dlock/" + c.service + "/locks/").empty());
  const auto cycles = Clock::now();
  for (int i = 0; i < 50; ++i) {
    Lease again = client.acquire("order:1", settings(10s));
    ASSERT_TRUE(again) << again.error();
    ASSERT_EQ(again.release(), ReleaseStatus::kReleased);
  }
  figure("50 acquire/release cycles over https {} ms", elapsed_ms(cycles));
}

TEST(EtcdOverTls, AServerNameTheCertificateCarriesWorks) {
  Config c = tls_config(tls_cluster());
  backend(c).tls.server_name = "localhost";
  Lease lease = Client(c).acquire("job", settings(5s));
  EXPECT_TRUE(lease) << lease.error();
}

TEST(EtcdOverTls, AServerNameTheCertificateDoesNotCarryIsAClearError) {
  Config c = tls_config(tls_cluster());
  backend(c).tls.server_name = "other.example";
  expect_clear(tls_refusal(tls_cluster(), c, "server_name other.example"),
               "did not verify: hostname mismatch");
}

TEST(EtcdOverTls, ACaThatSignedNothingOfTheMembersIsAClearError) {
  Config c = tls_config(tls_cluster());
  backend(c).tls.ca_file = test_pki().other_ca_file;
  expect_clear(tls_refusal(tls_cluster(), c, "another CA"),
               "did not verify: unable to get local issuer certificate");
}

TEST(EtcdOverTls, AnExpiredMemberCertificateIsAClearError) {
  expect_clear(tls_refusal(expired_cluster(), tls_config(expired_cluster()), "expired certificate"),
               "did not verify: certificate has expired");
}

TEST(EtcdOverTls, MutualTlsWorksWithTheClientCertificate) {
  Lease lease = Client(tls_config(mutual_cluster(), true)).acquire("job", settings(5s));
  EXPECT_TRUE(lease) << lease.error();
}

TEST(EtcdOverTls, MutualTlsWithoutAClientCertificateIsAClearError) {
  LogCapture log;
  const Refusals r =
      tls_refusal(mutual_cluster(), tls_config(mutual_cluster(), false), "no client certificate");
  expect_clear(r, "TLS: 127.0.0.1:");
  for (const Refusal& each : r) {
    EXPECT_TRUE(names_missing_client_certificate(each.lease.error())) << each.lease.error();
  }
  EXPECT_NE(rejections(mutual_cluster()).find("client didn't provide a certificate"),
            std::string::npos);
  const std::string logged = log.text() + r[0].lease.error() + r[1].lease.error();
  EXPECT_EQ(logged.find("PRIVATE KEY"), std::string::npos) << logged;
}

TEST(EtcdOverTls, APlainMemberBehindHttpsIsAClearError) {
  expect_clear(refusal(tls_config(plain_cluster()), "plain member behind https://"),
               "TLS: handshake with 127.0.0.1:");
}

TEST(EtcdOverTls, TheServerClockIsReadOverTls) {
  for (EtcdCluster* etcd : {&tls_cluster(), &mutual_cluster()}) {
    Client client(tls_config(*etcd, true));
    const auto before = Clock::now();
    const std::int64_t server = server_time_ms(client);
    figure("{}: server_time_ms over TLS {} ms", etcd->options().name, elapsed_ms(before));
    const std::int64_t here = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
    EXPECT_LT(std::llabs(server - here), 2000) << server << " vs " << here;
    const Slot slot = nearest_slot(client, 1s);
    EXPECT_LT(std::llabs(slot.starts_at_ms - here), 2000);
  }
}

TEST(EtcdOverTls, TheServerClockOverTlsFailsClearly) {
  Config c = tls_config(tls_cluster());
  backend(c).tls.ca_file = test_pki().other_ca_file;
  Client client(c);
  const auto before = Clock::now();
  try {
    (void)server_time_ms(client);
    FAIL() << "the clock was read from a member whose certificate does not verify";
  } catch (const BackendUnavailable& e) {
    figure("server_time_ms, another CA: {} ms: {}", elapsed_ms(before), e.what());
    EXPECT_NE(std::string(e.what()).find("TLS"), std::string::npos) << e.what();
  }
}

// The YAML of a backend on `etcd` over https://, trusting the test CA (and with the client
// certificate when `client_cert`).
std::string yaml_of(const EtcdCluster& etcd, const std::string& service, bool client_cert,
                    const std::string& ca_file = test_pki().ca_file) {
  std::string endpoints;
  for (const std::string& url : etcd.endpoints()) endpoints += (endpoints.empty() ? "" : ", ") + url;
  std::string text = fmt::format(
      "service: {}\nbackends:\n  default:\n    topology: etcd\n    endpoints: [{}]\n"
      "    command_timeout: 1s\n    tls:\n      ca_file: {}\n",
      service, endpoints, ca_file);
  if (client_cert) {
    text += fmt::format("      cert_file: {}\n      key_file: {}\n", test_pki().client_cert,
                        test_pki().client_key);
  }
  return text;
}

CommandResult ctl(const YamlFile& file, std::vector<std::string> args) {
  args.insert(args.begin(), {DLOCK_CTL, "--config", file.path()});
  return run_command(args, 15s);
}

TEST(EtcdOverTls, DlockctlListsOverTls) {
  for (EtcdCluster* etcd : {&tls_cluster(), &mutual_cluster()}) {
    const std::string service = unique_service();
    YamlFile file(yaml_of(*etcd, service, etcd == &mutual_cluster()));
    Client client(load_config(file.path()));
    Lease held = client.acquire("order:7", settings(10s));
    ASSERT_TRUE(held) << held.error();
    EXPECT_EQ(ctl(file, {"check-config"}).status, 0);
    const auto before = Clock::now();
    const CommandResult list = ctl(file, {"list", "order:*"});
    figure("{}: dlockctl list over TLS {} ms", etcd->options().name, elapsed_ms(before));
    EXPECT_EQ(list.status, 0) << list.output;
    EXPECT_NE(list.output.find("order:7"), std::string::npos) << list.output;
  }
}

TEST(EtcdOverTls, DlockctlNamesTheTlsProblem) {
  YamlFile file(yaml_of(tls_cluster(), unique_service(), false, test_pki().other_ca_file));
  const auto before = Clock::now();
  const CommandResult list = ctl(file, {"list"});
  figure("dlockctl list, another CA: exit {} after {} ms: {}", list.status, elapsed_ms(before),
         list.output);
  EXPECT_NE(list.status, 0);
  EXPECT_NE(list.output.find("TLS: the certificate of 127.0.0.1:"), std::string::npos)
      << list.output;
  EXPECT_NE(list.output.find("unable to get local issuer certificate"), std::string::npos)
      << list.output;
}

}  // namespace
}  // namespace dlock::test
