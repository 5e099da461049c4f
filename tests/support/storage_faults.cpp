// SPDX-License-Identifier: Apache-2.0
#include "storage_faults.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#ifndef BATON_LIB_DIR
#error "BATON_LIB_DIR must name the directory holding the built shared libraries"
#endif

namespace baton::test {

std::string lib_path(const std::string& name) {
  return std::string(BATON_LIB_DIR) + "/" + name;
}

storage_faults::storage_faults(std::filesystem::path data_dir, bool record_syncs)
    : data_dir_(std::move(data_dir)), record_syncs_(record_syncs) {
  std::filesystem::create_directories(data_dir_);  // the library resolves the directory when it loads
  if (record_syncs_) std::filesystem::create_directories(control_dir_.path() / "record");
  set("none");
}

namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

void storage_faults::power_cut_image(const std::filesystem::path& image,
                                     const sector_survives& survives) const {
  namespace fs = std::filesystem;
  if (!record_syncs_) throw std::logic_error("power_cut_image needs a storage_faults that records syncs");
  const auto record = control_dir_.path() / "record";
  fs::remove_all(image);
  fs::create_directories(image);
  std::istringstream listing(read_all(record / "dir.list"));
  std::string line;
  while (std::getline(listing, line)) {
    const auto space = line.find(' ');
    if (space == std::string::npos) throw std::runtime_error("bad line in the sync record: " + line);
    const std::string ino = line.substr(0, space), name = line.substr(space + 1);
    const auto synced_path = record / ("ino-" + ino);
    std::string content = fs::exists(synced_path) ? read_all(synced_path) : std::string();
    // The unsynced extension of the same file, if it is still there under that name.
    struct stat st;
    const auto live = data_dir_ / name;
    if (survives && ::stat(live.c_str(), &st) == 0 && std::to_string(st.st_ino) == ino) {
      const std::string now = read_all(live);
      if (now.size() > content.size() && now.compare(0, content.size(), content) == 0) {
        constexpr std::size_t sector = 512;
        const std::size_t base = content.size(), extra = now.size() - base;
        const std::size_t count = (extra + sector - 1) / sector;
        std::size_t keep_to = base;
        std::string tail(extra, '\0');
        for (std::size_t i = 0; i < count; ++i) {
          if (!survives(i, count)) continue;
          const std::size_t from = i * sector, n = std::min(sector, extra - from);
          tail.replace(from, n, now, base + from, n);
          keep_to = base + from + n;
        }
        content += tail.substr(0, keep_to - base);
      }
    }
    std::ofstream out(image / name, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out.flush()) throw std::runtime_error("cannot write " + (image / name).string());
  }
}

void storage_faults::set(const std::string& mode) {
  // Written aside and renamed over: the library sees either the old mode or the new one, never half.
  auto control = control_dir_.path() / "control";
  auto next = control_dir_.path() / "control.next";
  {
    std::ofstream out(next, std::ios::trunc);
    out << mode << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + next.string());
  }
  std::filesystem::rename(next, control);
}

std::vector<std::string> storage_faults::environment() const {
  std::string asan = "verify_asan_link_order=0";
  if (const char* inherited = std::getenv("ASAN_OPTIONS"); inherited && *inherited)
    asan = std::string(inherited) + ":" + asan;
  std::vector<std::string> env{
      "LD_PRELOAD=" + lib_path("libbaton-faultfs.so"), "BATON_FAULTFS_DIR=" + data_dir_.string(),
      "BATON_FAULTFS_CONTROL=" + (control_dir_.path() / "control").string(), "ASAN_OPTIONS=" + asan};
  if (record_syncs_) env.push_back("BATON_FAULTFS_RECORD=" + (control_dir_.path() / "record").string());
  return env;
}

}  // namespace baton::test
