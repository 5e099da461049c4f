// SPDX-License-Identifier: Apache-2.0
#include "test_pki.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace baton::test {

test_pki::test_pki() {
  make_ca("ca", "baton-test-ca");
  make_ca("other-ca", "baton-other-ca");
  make_leaf("server", "ca", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost");
  make_leaf("wrong-host", "ca", "wrong.example", "subjectAltName=DNS:wrong.example");
  make_leaf("client", "ca", "baton-client", "subjectAltName=DNS:baton-client");
  make_leaf("other-client", "other-ca", "baton-client", "subjectAltName=DNS:baton-client");
}

std::vector<std::string> test_pki::batond_args(bool mutual) const {
  std::vector<std::string> a{"--tls-cert", server_cert(), "--tls-key", server_key()};
  if (mutual) {
    a.push_back("--tls-client-ca");
    a.push_back(ca());
  }
  return a;
}

void test_pki::run(const std::string& command) const {
  const std::string log = file("openssl.log");
  if (std::system((command + " >>" + log + " 2>&1").c_str()) != 0)
    throw std::runtime_error("openssl failed (see " + log + "): " + command);
}

void test_pki::make_ca(const std::string& name, const std::string& cn) const {
  run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=" + cn +
      " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -keyout " +
      file(name + ".key") + " -out " + file(name + ".pem"));
}

void test_pki::make_leaf(const std::string& name, const std::string& ca, const std::string& cn,
                         const std::string& san, int days) const {
  const std::string ext = file(name + ".ext");
  std::ofstream(ext) << san << "\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                     << "extendedKeyUsage=serverAuth,clientAuth\n";
  run("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + cn +
      " -keyout " + file(name + ".key") + " -out " + file(name + ".csr"));
  run("openssl x509 -req -days " + std::to_string(days) + " -set_serial " +
      std::to_string(std::rand() % 1000000 + 2) + " -in " + file(name + ".csr") + " -CA " +
      file(ca + ".pem") + " -CAkey " + file(ca + ".key") + " -extfile " + ext + " -out " +
      file(name + ".pem"));
}

std::string test_pki::sha256_fingerprint(std::string_view der) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (::EVP_Digest(der.data(), der.size(), digest, &length, ::EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    if (i != 0) out += ':';
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xF];
  }
  return out;
}

std::string test_pki::sha256_fingerprint_of_file(const std::string& pem_file) {
  std::FILE* f = std::fopen(pem_file.c_str(), "r");
  if (!f) throw std::runtime_error("cannot open " + pem_file);
  X509* cert = ::PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (!cert) throw std::runtime_error("no PEM certificate in " + pem_file);
  unsigned char* der = nullptr;
  const int n = ::i2d_X509(cert, &der);
  ::X509_free(cert);
  if (n <= 0) throw std::runtime_error("cannot encode the certificate of " + pem_file);
  std::string out = sha256_fingerprint(std::string_view(reinterpret_cast<const char*>(der), n));
  ::OPENSSL_free(der);
  return out;
}

}  // namespace baton::test
