// SPDX-License-Identifier: Apache-2.0
#pragma once
// A journal storage (server/src/storage.hpp) that passes every call to another one: a test overrides the
// calls it watches or fails, the rest reach the real file system.

#include "storage.hpp"

#include <memory>

namespace baton::test {

class forwarding_storage : public server::storage {
 public:
  explicit forwarding_storage(std::unique_ptr<server::storage> inner) : inner_(std::move(inner)) {}

  const std::filesystem::path& path() const override { return inner_->path(); }
  void take(bool create) override { inner_->take(create); }
  int sync_parents() override { return inner_->sync_parents(); }
  int list(std::vector<std::string>& names) override { return inner_->list(names); }
  int read(const std::string& name, std::string& out) override { return inner_->read(name, out); }
  int open(const std::string& name, bool truncate) override { return inner_->open(name, truncate); }
  int write(int handle, std::string_view data) override { return inner_->write(handle, data); }
  int sync_data(int handle) override { return inner_->sync_data(handle); }
  int sync(int handle) override { return inner_->sync(handle); }
  void close(int handle) override { inner_->close(handle); }
  int truncate(const std::string& name, std::uint64_t size) override { return inner_->truncate(name, size); }
  int rename(const std::string& from, const std::string& to) override { return inner_->rename(from, to); }
  int link(const std::string& from, const std::string& to) override { return inner_->link(from, to); }
  int remove(const std::string& name) override { return inner_->remove(name); }
  int sync_dir() override { return inner_->sync_dir(); }

 private:
  std::unique_ptr<server::storage> inner_;
};

}  // namespace baton::test
