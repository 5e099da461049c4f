// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a throwaway PKI made with the `openssl` command at test time (no key is ever committed):
// a CA, a server certificate for 127.0.0.1 and localhost, a server certificate for another host name, a
// client certificate from the same CA, and a second CA with a client certificate of its own.

#include "batond_fixture.hpp"

#include <string>
#include <string_view>

namespace baton::test {

class test_pki {
 public:
  /// Generates everything (EC P-256 keys, valid for two days); throws when `openssl` fails.
  test_pki();

  std::string ca() const { return file("ca.pem"); }
  std::string server_cert() const { return file("server.pem"); }
  std::string server_key() const { return file("server.key"); }
  /// Issued by ca() for "wrong.example" only.
  std::string wrong_host_cert() const { return file("wrong-host.pem"); }
  std::string wrong_host_key() const { return file("wrong-host.key"); }
  std::string client_cert() const { return file("client.pem"); }
  std::string client_key() const { return file("client.key"); }
  /// A CA that nothing here trusts, and a client certificate it issued.
  std::string other_ca() const { return file("other-ca.pem"); }
  std::string other_client_cert() const { return file("other-client.pem"); }
  std::string other_client_key() const { return file("other-client.key"); }

  /// batond's arguments for TLS with the server certificate (and mutual TLS against ca() when asked).
  std::vector<std::string> batond_args(bool mutual = false) const;

  std::string file(const std::string& name) const { return (dir_.path() / name).string(); }
  /// Issues NAME.pem and NAME.key from the CA `ca` ("ca" or "other-ca") for the subject CN=`cn`, with the
  /// extension line `san` (e.g. "subjectAltName=IP:::1"), for a test that needs a certificate of its own.
  /// Valid from now for `days`; a negative number makes one that has already expired.
  void make_leaf(const std::string& name, const std::string& ca, const std::string& cn,
                 const std::string& san, int days = 2) const;

  /// SHA-256 of a DER certificate, as `openssl x509 -noout -fingerprint -sha256` prints it ("AB:01:...").
  static std::string sha256_fingerprint(std::string_view der);
  /// The same, of the first certificate of the PEM file `pem_file`; throws when there is none.
  static std::string sha256_fingerprint_of_file(const std::string& pem_file);

  /// One PKI per test program, made on first use.
  static const test_pki& shared() {
    static const test_pki instance;
    return instance;
  }

 private:
  void run(const std::string& command) const;
  void make_ca(const std::string& name, const std::string& cn) const;
  temp_dir dir_;
};

}  // namespace baton::test
