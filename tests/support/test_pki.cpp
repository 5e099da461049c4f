#include "test_pki.hpp"

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
                         const std::string& san) const {
  const std::string ext = file(name + ".ext");
  std::ofstream(ext) << san << "\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                     << "extendedKeyUsage=serverAuth,clientAuth\n";
  run("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + cn +
      " -keyout " + file(name + ".key") + " -out " + file(name + ".csr"));
  run("openssl x509 -req -days 2 -set_serial " + std::to_string(std::rand() % 1000000 + 2) + " -in " +
      file(name + ".csr") + " -CA " + file(ca + ".pem") + " -CAkey " + file(ca + ".key") + " -extfile " +
      ext + " -out " + file(name + ".pem"));
}

}  // namespace baton::test
