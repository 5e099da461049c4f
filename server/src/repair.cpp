// SPDX-License-Identifier: Apache-2.0
#include "repair.hpp"

#include "data_files.hpp"

namespace baton::server {

repair_report repair_data_dir(const std::filesystem::path& dir) {
  auto fs = make_posix_storage(dir);
  return repair_data_dir(*fs);
}

repair_report repair_data_dir(storage& fs) {
  using namespace data_files;
  fs.take(/*create=*/false);
  fs.remove(snapshot_tmp_name);

  repair_report report;
  lock_table table;
  const time_point now{};
  std::uint64_t entries = 0, records = 0;
  std::uint64_t from = load_snapshot(fs, table, now, entries);  // a damaged snapshot is not repaired here
  auto logs = list_logs(fs);
  check_log_sequence(fs, from, logs, nullptr);

  // Replay every valid record, resynchronising after each damaged stretch (on any valid record, so that the
  // intact records of a damaged batch are kept too). Grants are logged in token order, so the tokens a
  // lost stretch held lie above every token before it; each lost grant took at least min_record_bytes.
  std::uint64_t lost_grants_bound = 0;
  std::vector<std::string> damaged_names;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    const auto& name = logs[i].second;
    std::string data = read_all(fs, name);
    std::string_view in(data);
    const auto scan = replay_valid_prefix(in, table, now, records);
    std::size_t offset = scan.valid;
    bool last = i + 1 == logs.size();
    if (offset == data.size()) continue;
    // A torn tail (as journal::open reads it): the next start cuts it, nothing acknowledged was there.
    if (last && !next_acknowledged(in, offset + 1, scan.framed)) continue;
    auto next = next_acknowledged(in, offset + 1, false);
    repair_report::damage d{fs.path() / name, offset, 0, 0};
    while (offset < data.size()) {
      std::size_t resume = next ? *next : data.size();
      d.lost_bytes += resume - offset;
      std::uint64_t before = records;
      offset = resume + replay_valid_prefix(in.substr(resume), table, now, records).valid;
      d.records_after += records - before;
      if (offset < data.size()) next = next_acknowledged(in, offset + 1, false);
    }
    lost_grants_bound += grants_bound(d.lost_bytes);
    report.damaged.push_back(d);
    damaged_names.push_back(name);
  }
  report.last_token_seen = table.last_token();
  report.restored_leases = table.size();
  if (report.damaged.empty()) {
    report.token_floor = table.last_token();
    return report;
  }
  report.token_floor = report.last_token_seen + lost_grants_bound;
  table.observe_token(report.token_floor);

  // Install a snapshot of everything recovered as a new generation with an empty log. The damaged logs are
  // first kept under another name (a hard link, so a crash before the snapshot's rename leaves the
  // directory as it was); the rename then makes every older log obsolete.
  report.generation = (logs.empty() ? from : logs.back().first) + 1;
  write_durably(fs, snapshot_tmp_name, encode_snapshot(report.generation, table));
  write_durably(fs, wal_name(report.generation), {});
  for (const auto& name : damaged_names) {
    const std::string kept = name + ".damaged";
    fs.remove(kept);
    if (int err = fs.link(name, kept))
      fail("link " + (fs.path() / name).string() + " to " + (fs.path() / kept).string(), err);
  }
  if (int err = fs.sync_dir()) fail("fsync directory " + fs.path().string(), err);
  rename_durably(fs, snapshot_tmp_name, snapshot_name);
  for (const auto& [g, name] : logs)
    fs.remove(name);
  if (int err = fs.sync_dir()) fail("fsync directory " + fs.path().string(), err);
  return report;
}

}  // namespace baton::server
