#include "bytes.hpp"

#include <openssl/evp.h>

#include <algorithm>

namespace dlock::internal {

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string unhex(std::string_view text) {
  const auto digit = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string out;
  out.reserve(text.size() / 2);
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<char>(digit(text[i]) * 16 + digit(text[i + 1])));
  }
  return out;
}

std::string key_digest(std::string_view key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // Fetched once: EVP_sha256() alone makes OpenSSL 3 look the algorithm up on every call.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  const EVP_MD* md = sha256 != nullptr ? sha256 : EVP_sha256();
  if (EVP_Digest(key.data(), key.size(), digest, &size, md, nullptr) != 1) size = 0;
  return hex(std::string_view(reinterpret_cast<const char*>(digest), std::min(size, 16U)));
}

}  // namespace dlock::internal
