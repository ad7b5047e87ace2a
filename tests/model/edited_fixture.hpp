// A temporary copy of an HF fixture directory whose config.json a test
// edits: how the config readers' spellings and refusals are checked without
// a fixture per variant. Shared by the encoder tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "model/model.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe::test {

class EditedFixture {
 public:
  EditedFixture(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    namespace fs = std::filesystem;
    dir_ = fs::temp_directory_path() / ("troupe_edited_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::copy(hf_test::fixture_dir(name), dir_, fs::copy_options::recursive);
    std::ifstream in(dir_ / "config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    edit(config);
    std::ofstream(dir_ / "config.json") << config.dump(1);
  }
  ~EditedFixture() { std::filesystem::remove_all(dir_); }
  EditedFixture(const EditedFixture&) = delete;
  EditedFixture& operator=(const EditedFixture&) = delete;
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

// What loading the fixture edited by `edit` throws: Error(unsupported)'s
// message ("loaded" when it loads, and a failure for another error code).
inline std::string refusal(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const EditedFixture f(name, edit);
  try {
    Model::load(f.dir());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
    return e.what();
  }
  return "loaded";
}

}  // namespace troupe::test
