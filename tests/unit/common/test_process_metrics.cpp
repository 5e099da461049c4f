// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE process_metrics
#include <boost/test/unit_test.hpp>

// The /proc parsing and the text of the process and build series (common/process_metrics.cpp), on fixed text.

#include "baton/common/process_metrics.hpp"
#include "baton/common/prometheus_text.hpp"

#include <string>

using namespace baton;

namespace {

// A /proc/<pid>/stat line whose command name holds a space and a ')': utime 250, stime 50 ticks, started
// 12345 ticks after boot.
const std::string stat_line =
    "4242 (we ird) name) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 3 0 12345 123456789 2048 "
    "18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";

}  // namespace

BOOST_AUTO_TEST_CASE(stat_fields_are_counted_after_the_last_parenthesis) {
  BOOST_TEST(cpu_seconds_from_stat(stat_line, 100).value() == 3.0);
  BOOST_TEST(start_time_from_stat(stat_line, 100, 1'700'000'000).value() == 1'700'000'123.45);
  BOOST_TEST(!cpu_seconds_from_stat("4242 no parenthesis 1 2 3", 100).has_value());
  BOOST_TEST(!cpu_seconds_from_stat("4242 (cut) S 1 2", 100).has_value());
  BOOST_TEST(!start_time_from_stat(stat_line, 0, 1).has_value());
}

BOOST_AUTO_TEST_CASE(boot_time_and_resident_pages_are_read_from_their_files) {
  BOOST_TEST(boot_time_from_proc_stat("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n").value() ==
             1'700'000'000u);
  BOOST_TEST(!boot_time_from_proc_stat("cpu 1 2 3\n").has_value());
  BOOST_TEST(resident_bytes_from_statm("5000 300 100 20 0 400 0\n", 4096).value() == 300u * 4096u);
  BOOST_TEST(!resident_bytes_from_statm("garbage", 4096).has_value());
}

BOOST_AUTO_TEST_CASE(series_are_rendered_with_help_and_type_and_missing_ones_left_out) {
  process_sample s;
  s.cpu_seconds = 1.5;
  s.open_fds = 7;
  const auto text = render_process_metrics(s);
  BOOST_TEST(text ==
             "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
             "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n"
             "# HELP process_open_fds Number of open file descriptors.\n"
             "# TYPE process_open_fds gauge\nprocess_open_fds 7\n");
  BOOST_TEST(render_build_info("1.2.3", "ab\"c")
                 .ends_with("baton_build_info{version=\"1.2.3\",commit=\"ab\\\"c\"} 1\n"));
}

BOOST_AUTO_TEST_CASE(this_process_is_read_from_proc) {
  const auto s = read_process_sample();
  BOOST_TEST(s.resident_bytes.value_or(0) > 0u);
  BOOST_TEST(s.open_fds.value_or(0) >= 3u);
  BOOST_TEST(s.cpu_seconds.has_value());
  BOOST_TEST(s.start_time_seconds.has_value());
}

BOOST_AUTO_TEST_CASE(the_text_writer_writes_each_family_once_and_escapes_label_values) {
  std::string out;
  prometheus_text m(out);
  m.family("jobs_total", "Runs by job.\nSecond line \\ here.", "counter");
  m.sample("jobs_total", {{"job", "a\"b\\c\nd"}, {"outcome", "ok"}}, std::uint64_t{18446744073709551615ull});
  m.sample("jobs_total", {}, std::int64_t{-3});
  m.family("t", "Time.", "gauge");
  m.sample("t", {}, 1796159166.6);
  BOOST_TEST(out ==
             "# HELP jobs_total Runs by job.\\nSecond line \\\\ here.\n# TYPE jobs_total counter\n"
             "jobs_total{job=\"a\\\"b\\\\c\\nd\",outcome=\"ok\"} 18446744073709551615\n"
             "jobs_total -3\n"
             "# HELP t Time.\n# TYPE t gauge\nt 1796159166.6\n");
}
