// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_renew_batch
#include <boost/test/unit_test.hpp>

// backend::renew_batch on the etcd backend (docs/protocol.md, "renew batch"): the keys read in txns of at
// most 128 reads, each lease kept alive on its own; every entry answered as renew() answers it.

#include "coro.hpp"
#include "etcd_cluster.hpp"

#include "baton/backend.hpp"
#include "baton/error.hpp"

#include <string>
#include <vector>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

BOOST_AUTO_TEST_CASE(a_batch_across_two_txns_is_answered_entry_by_entry_as_renews_are) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client_config config;
  config.server_url = etcd.url();
  config.identity = "etcd-batch";
  auto b = make_backend(ioc.get_executor(), config);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    std::vector<renew_entry> entries;
    // 130 held leases: more than one txn's reads.
    for (int i = 0; i < 130; ++i) {
      const std::string key = "held-" + std::to_string(i);
      auto a = co_await b->acquire(key, "me", 30000ms, {}, 5000ms);
      BOOST_REQUIRE(!a.ec);
      entries.push_back({key, "me", a.token, 30000ms});
    }
    auto theirs = co_await b->acquire("theirs", "someone-else", 30000ms, {}, 5000ms);
    BOOST_REQUIRE(!theirs.ec);
    auto old = co_await b->acquire("mine-again", "me", 30000ms, {}, 5000ms);
    auto current = co_await b->acquire("mine-again", "me", 30000ms, {}, 5000ms);
    BOOST_REQUIRE(!current.ec);
    entries.push_back({"theirs", "me", theirs.token, 30000ms});
    entries.push_back({"mine-again", "me", old.token, 30000ms});
    entries.push_back({"free", "me", current.token, 30000ms});
    entries.push_back({"mine-again", "me", current.token, 30000ms});

    auto out = co_await b->renew_batch(entries, 30000ms);
    BOOST_REQUIRE(out.size() == entries.size());
    for (std::size_t i = 0; i < 130; ++i)
      BOOST_TEST(!out[i].ec, i << ": " << out[i].ec.message() << " " << out[i].diagnostic);
    const std::vector<std::string> reasons{"owner_mismatch", "token_mismatch", "not_held"};
    for (std::size_t i = 0; i < reasons.size(); ++i) {
      const auto& r = out[130 + i];
      BOOST_TEST((r.ec == error::lease_lost), i);
      BOOST_TEST(r.lost_reason == reasons[i]);
      const auto& e = entries[130 + i];
      auto single = co_await b->renew(e.key, e.owner, e.token, e.ttl, 5000ms);
      BOOST_TEST(single.lost_reason == r.lost_reason);
    }
    BOOST_TEST(!out.back().ec, out.back().diagnostic);  // the current token beside the old one
    // The other owner's lease was not touched.
    auto still = co_await b->get("theirs", std::nullopt, 5000ms);
    BOOST_REQUIRE(still.holder.has_value());
    BOOST_TEST(still.holder->owner == "someone-else");
  }());
}
