// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE auth
#include <boost/test/unit_test.hpp>

#include "auth.hpp"

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace baton::server;
using namespace baton::server::auth;
using kind = lock_target::kind;

namespace {

// sha256("secret"), as `printf %s TOKEN | sha256sum` prints them.
const std::string secret_hash = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b";

std::string hex(const digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : d) {
    s.push_back(digits[c >> 4]);
    s.push_back(digits[c & 15]);
  }
  return s;
}

std::string line_for(std::string_view token, std::string_view rest) {
  return "sha256:" + hex(sha256(token)) + " " + std::string(rest) + "\n";
}

std::string parse_error(std::string_view text) {
  try {
    parse_tokens(text, "tokens");
  } catch (const tokens_file_error& e) {
    return e.what();
  }
  return "(accepted)";
}

lock_target target(kind k, std::string key = {}) {
  return lock_target{k, std::move(key), {}, {}};
}

int status_of(const decision& d) {
  return std::holds_alternative<api_error>(d) ? std::get<api_error>(d).status : 200;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sha256_matches_the_standard_digest) {
  BOOST_TEST(hex(sha256("secret")) == secret_hash);
  BOOST_TEST(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

BOOST_AUTO_TEST_CASE(constant_time_equal_compares_every_byte) {
  const unsigned char a[] = {1, 2, 3, 4, 5, 6, 7, 8};
  unsigned char b[] = {1, 2, 3, 4, 5, 6, 7, 8};
  BOOST_TEST(constant_time_equal(a, b, sizeof a));
  for (std::size_t i = 0; i < sizeof b; ++i) {
    b[i] ^= 0x80;  // a difference in any position, first or last, is seen
    BOOST_TEST(!constant_time_equal(a, b, sizeof a), "difference at byte " << i);
    b[i] ^= 0x80;
  }
  BOOST_TEST(constant_time_equal(a, b, 0));
}

BOOST_AUTO_TEST_CASE(a_valid_file_with_comments_blank_lines_and_crlf_parses) {
  std::string text =
      "# batond clients\n\n   # indented comment\n"
      "sha256:" +
      secret_hash + " ci-runner rw:jobs/ ro:status/\r\n" + line_for("monitor", "prometheus") +
      line_for("admin", "ops@example:1\tro:*\trw:*") + "sha256:" + hex(sha256("rotated")) +
      " ci-runner rw:jobs/";
  auto t = parse_tokens(text, "tokens");
  BOOST_REQUIRE_EQUAL(t.clients.size(), 4u);
  BOOST_TEST(hex(t.clients[0].token_hash) == secret_hash);
  BOOST_TEST(t.clients[0].name == "ci-runner");
  BOOST_REQUIRE_EQUAL(t.clients[0].grants.size(), 2u);
  BOOST_TEST((t.clients[0].grants[0] == grant{"jobs/", access::write}));
  BOOST_TEST((t.clients[0].grants[1] == grant{"status/", access::read}));
  BOOST_TEST(t.clients[1].name == "prometheus");
  BOOST_TEST(t.clients[1].grants.empty());
  BOOST_TEST(t.clients[2].name == "ops@example:1");
  BOOST_TEST((t.clients[2].grants[1] == grant{"", access::write}));  // `*`: every key
  BOOST_TEST(t.clients[3].name == "ci-runner");  // a second token of one client (rotation)
  BOOST_TEST(parse_tokens("", "tokens").clients.empty());
  BOOST_TEST(parse_tokens("# nobody\n", "tokens").clients.empty());
}

BOOST_AUTO_TEST_CASE(upper_case_hex_is_accepted) {
  std::string upper = secret_hash;
  for (auto& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto t = parse_tokens("sha256:" + upper + " a", "f");
  BOOST_TEST(hex(t.clients[0].token_hash) == secret_hash);
}

BOOST_AUTO_TEST_CASE(every_kind_of_bad_line_is_refused_with_its_line_number) {
  const std::string h = "sha256:" + secret_hash;
  struct row {
    std::string text;
    std::string error;
  };
  const std::string shape =
      "expected \"sha256:<64 hex digits> <name> [rw:<prefix>|ro:<prefix>|admin:<prefix>|max_locks=<N>]...\"";
  const std::string bad_hash =
      "token hash must be \"sha256:\" followed by 64 hex digits (SHA-256 of the token)";
  const row rows[] = {
      {h, "tokens:1: " + shape},
      {"# ok\n" + h + "\n", "tokens:2: " + shape},
      {secret_hash + " name", "tokens:1: " + bad_hash},
      {"md5:" + secret_hash + " name", "tokens:1: " + bad_hash},
      {"sha256:" + secret_hash.substr(1) + " name", "tokens:1: " + bad_hash},
      {"sha256:" + secret_hash + "0 name", "tokens:1: " + bad_hash},
      {"sha256:" + secret_hash.substr(1) + "g name", "tokens:1: " + bad_hash},
      {h + " bad/name",
       "tokens:1: client name \"bad/name\" must be 1 to 64 characters of A-Z a-z 0-9 . _ - @ :"},
      {h + " " + std::string(65, 'n'), "tokens:1: client name \"" + std::string(65, 'n') +
                                           "\" must be 1 to 64 characters of A-Z a-z 0-9 . _ - @ :"},
      {h + " name jobs/",
       "tokens:1: permission \"jobs/\" must be rw:<prefix>, ro:<prefix>, admin:<prefix> or max_locks=<N>"},
      {h + " name wo:jobs/",
       "tokens:1: permission \"wo:jobs/\" must be rw:<prefix>, ro:<prefix>, admin:<prefix> or max_locks=<N>"},
      {h + " name rw:", "tokens:1: permission \"rw:\" has no prefix (write * for every key)"},
      {h + " name ro:" + std::string(513, 'k'), "tokens:1: prefix is longer than a key can be (512 bytes)"},
      {h + " a\n\n" + h + " b", "tokens:3: the same token hash is already on line 1"},
      {h + " name rw:a\x01", "tokens:1: control characters are not allowed (only spaces and tabs)"},
  };
  for (const auto& r : rows)
    BOOST_TEST(parse_error(r.text) == r.error, "input: " << r.text);
}

BOOST_AUTO_TEST_CASE(load_tokens_names_the_file_in_errors) {
  auto dir = std::filesystem::temp_directory_path() / ("baton-auth-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "tokens").string();
  { std::ofstream(path) << line_for("a", "alpha rw:*") << "nonsense\n"; }
  try {
    load_tokens(path);
    BOOST_FAIL("accepted a bad file");
  } catch (const tokens_file_error& e) {
    BOOST_TEST(std::string(e.what()) == path + ":2: " +
                                            "expected \"sha256:<64 hex digits> <name> "
                                            "[rw:<prefix>|ro:<prefix>|admin:<prefix>|max_locks=<N>]...\"");
  }
  BOOST_CHECK_THROW(load_tokens((dir / "missing").string()), tokens_file_error);

  // A reload that fails keeps the table in force; a good one replaces it.
  { std::ofstream(path) << line_for("a", "alpha rw:*"); }
  token_store store(path);
  auto first = store.current();
  BOOST_TEST(find_client(*first, "a") != nullptr);
  { std::ofstream(path) << "garbage\n"; }
  auto err = store.reload();
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST(*err == path +
                         ":1: expected \"sha256:<64 hex digits> <name> "
                         "[rw:<prefix>|ro:<prefix>|admin:<prefix>|max_locks=<N>]...\"");
  BOOST_TEST(store.current() == first);
  { std::ofstream(path) << line_for("b", "beta rw:*"); }
  BOOST_TEST(!store.reload().has_value());
  BOOST_TEST(find_client(*store.current(), "a") == nullptr);
  BOOST_TEST(find_client(*store.current(), "b")->name == "beta");
  BOOST_TEST(find_client(*first, "a")->name == "alpha");  // a request holding the old table keeps a valid one
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(find_client_matches_only_the_exact_token_in_any_position) {
  auto t = parse_tokens(line_for("t0", "zero") + line_for("t1", "one") + line_for("t2", "two"), "f");
  BOOST_TEST(find_client(t, "t0")->name == "zero");
  BOOST_TEST(find_client(t, "t1")->name == "one");
  BOOST_TEST(find_client(t, "t2")->name == "two");
  BOOST_TEST(find_client(t, "t3") == nullptr);
  BOOST_TEST(find_client(t, "t") == nullptr);
  BOOST_TEST(find_client(t, "t00") == nullptr);
  BOOST_TEST(find_client(t, "") == nullptr);
  BOOST_TEST(find_client(token_table{}, "t0") == nullptr);
}

BOOST_AUTO_TEST_CASE(permits_follows_prefixes_and_levels) {
  client_entry c{{}, "c", {{"jobs/", access::write}, {"status/", access::read}}, std::nullopt};
  BOOST_TEST(permits(c, "jobs/a", access::write));
  BOOST_TEST(permits(c, "jobs/a", access::read));
  BOOST_TEST(permits(c, "jobs/", access::write));
  BOOST_TEST(!permits(c, "jobs", access::write));
  BOOST_TEST(!permits(c, "job/a", access::read));
  BOOST_TEST(permits(c, "status/x", access::read));
  BOOST_TEST(!permits(c, "status/x", access::write));
  BOOST_TEST(!permits(c, "other", access::read));
  client_entry all{{}, "all", {{"", access::read}}, std::nullopt};
  BOOST_TEST(permits(all, "anything", access::read));
  BOOST_TEST(!permits(all, "anything", access::write));
  BOOST_TEST(!permits(client_entry{{}, "none", {}, std::nullopt}, "x", access::read));
}

BOOST_AUTO_TEST_CASE(bearer_header_parsing) {
  BOOST_TEST(bearer_token("Bearer abc").value() == "abc");
  BOOST_TEST(bearer_token("bearer abc").value() == "abc");
  BOOST_TEST(bearer_token("BEARER abc  ").value() == "abc");
  BOOST_TEST(!bearer_token(""));
  BOOST_TEST(!bearer_token("Bearer "));
  BOOST_TEST(!bearer_token("Bearer"));
  BOOST_TEST(!bearer_token("Basic YWxhZGRpbjpvcGVuc2VzYW1l"));
  BOOST_TEST(!bearer_token("Bearer a b"));
  BOOST_TEST(!bearer_token("abc"));
}

BOOST_AUTO_TEST_CASE(authorize_answers_each_route_by_the_matrix) {
  auto t = parse_tokens(
      line_for("writer", "w rw:jobs/") + line_for("reader", "r ro:jobs/") + line_for("monitor", "m"), "f");
  const kind writes[] = {kind::acquire, kind::renew, kind::release};
  for (kind k : writes) {
    BOOST_TEST(status_of(authorize(t, "", target(k, "jobs/a"))) == 401);
    BOOST_TEST(status_of(authorize(t, "Bearer wrong", target(k, "jobs/a"))) == 401);
    BOOST_TEST(status_of(authorize(t, "Bearer writer", target(k, "other/a"))) == 403);
    BOOST_TEST(status_of(authorize(t, "Bearer reader", target(k, "jobs/a"))) == 403);
    BOOST_TEST(std::get<std::string>(authorize(t, "Bearer writer", target(k, "jobs/a"))) == "w");
  }
  BOOST_TEST(status_of(authorize(t, "", target(kind::get, "jobs/a"))) == 401);
  BOOST_TEST(status_of(authorize(t, "Bearer wrong", target(kind::get, "jobs/a"))) == 401);
  BOOST_TEST(status_of(authorize(t, "Bearer writer", target(kind::get, "other"))) == 403);
  BOOST_TEST(status_of(authorize(t, "Bearer monitor", target(kind::get, "jobs/a"))) == 403);
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer reader", target(kind::get, "jobs/a"))) == "r");
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer writer", target(kind::get, "jobs/a"))) == "w");
  BOOST_TEST(status_of(authorize(t, "", target(kind::metrics))) == 401);
  BOOST_TEST(status_of(authorize(t, "Bearer wrong", target(kind::metrics))) == 401);
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer monitor", target(kind::metrics))) == "m");
  BOOST_TEST(std::get<std::string>(authorize(t, "", target(kind::healthz))).empty());
  // The answers say what is wrong without echoing the token.
  auto e = std::get<api_error>(authorize(t, "Bearer reader", target(kind::acquire, "jobs/a")));
  BOOST_TEST(e.code == "forbidden");
  BOOST_TEST(e.message == "client \"r\" may only read this key");
  e = std::get<api_error>(authorize(t, "Bearer wrong", target(kind::acquire, "jobs/a")));
  BOOST_TEST(e.code == "unauthorized");
  BOOST_TEST(e.message.find("wrong") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_locks_sets_a_clients_quota_and_the_smallest_of_its_lines_applies) {
  const std::string h1 = "sha256:" + std::string(64, '1'), h2 = "sha256:" + std::string(64, '2'),
                    h3 = "sha256:" + std::string(64, '3');
  auto t = parse_tokens(
      h1 + " jobs max_locks=10 rw:jobs/\n" + h2 + " jobs rw:jobs/ max_locks=3\n" + h3 + " free rw:*\n", "f");
  BOOST_TEST(t.clients[0].grants.size() == 1u);
  BOOST_TEST(*t.clients[0].max_locks == 10u);
  BOOST_TEST(lock_quota(t, "jobs").value() == 3u);
  BOOST_TEST(!lock_quota(t, "free").has_value());
  BOOST_TEST(!lock_quota(t, "nobody").has_value());
  for (std::string bad : {"max_locks=", "max_locks=-1", "max_locks=1x", "max_locks=99999999999999999999999"})
    BOOST_CHECK_THROW(parse_tokens(h1 + " jobs " + bad, "f"), tokens_file_error);
  BOOST_CHECK_THROW(parse_tokens(h1 + " jobs max_locks=1 max_locks=2", "f"), tokens_file_error);
}

// An admin grant (docs/security.md): what rw: allows, and a break; files without it grant no break.
BOOST_AUTO_TEST_CASE(only_an_admin_grant_breaks_and_a_listing_needs_read_access_to_its_prefix) {
  auto t = parse_tokens(line_for("ops", "o admin:jobs/") + line_for("writer", "w rw:jobs/") +
                            line_for("reader", "r ro:jobs/") + line_for("all", "a ro:*"),
                        "f");
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer ops", target(kind::break_lease, "jobs/a"))) == "o");
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer ops", target(kind::acquire, "jobs/a"))) == "o");
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer ops", target(kind::get, "jobs/a"))) == "o");
  BOOST_TEST(status_of(authorize(t, "Bearer ops", target(kind::break_lease, "other"))) == 403);
  for (const char* who : {"Bearer writer", "Bearer reader", "Bearer all"}) {
    auto e = std::get<api_error>(authorize(t, who, target(kind::break_lease, "jobs/a")));
    BOOST_TEST(e.status == 403, who);
    BOOST_TEST(e.code == "admin_required", who);
  }
  BOOST_TEST(status_of(authorize(t, "", target(kind::break_lease, "jobs/a"))) == 401);
  // A listing's key is its prefix: a grant must cover all of it.
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer reader", target(kind::list, "jobs/"))) == "r");
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer reader", target(kind::list, "jobs/x"))) == "r");
  BOOST_TEST(status_of(authorize(t, "Bearer reader", target(kind::list, "job"))) == 403);
  BOOST_TEST(status_of(authorize(t, "Bearer reader", target(kind::list, ""))) == 403);
  BOOST_TEST(std::get<std::string>(authorize(t, "Bearer all", target(kind::list, ""))) == "a");
  BOOST_TEST(parse_error(line_for("x", "x admin:")) != "(accepted)");
}
