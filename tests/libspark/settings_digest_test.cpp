// The settings every rank must share (comm/settings_digest.hpp): which knob rows make the
// record, its encoding in the bootstrap's entry-list format, and the verdict's one line.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "comm/settings_digest.hpp"
#include "spark/config/config.hpp"
#include "spark/error.hpp"

namespace spark {
namespace {

using settings_digest::Settings;

Settings record(const std::map<std::string, std::string>& env) {
  return settings_digest::of(CommOptions::from_config(config::Config::from_map(env)));
}

std::string value_in(const Settings& s, const std::string& name) {
  for (const auto& [n, v] : s)
    if (n == name) return v;
  return "(absent)";
}

TEST(SettingsDigest, RecordIsTheVersionThenTheJobWideRows) {
  const Settings s = record({});
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.front().first, settings_digest::kVersion);
  EXPECT_FALSE(s.front().second.empty());
  // Exactly the rows marked KnobScope::job, in table order, with their effective values.
  std::vector<std::string> names;
  for (const auto& knob : config::knobs())
    if (knob.scope == config::KnobScope::job) names.emplace_back(knob.name);
  ASSERT_EQ(s.size(), names.size() + 1);
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(s[i + 1].first, names[i]);
  for (const char* must : {"SPARK_TRANSPORT", "SPARK_TCP_LANES", "SPARKNET_ROCE_TIMEOUT_MS",
                           "SPARK_BARRIER_TIMEOUT_MS", "SPARK_JOB_ID"})
    EXPECT_NE(value_in(s, must), "(absent)") << must;
  // Per-rank knobs stay out: addresses, devices, logging differ legitimately.
  for (const char* rank_own : {"SPARK_TCP_ADDR", "SPARK_IB_HCA", "SPARK_LOG", "SPARK_LANES"})
    EXPECT_EQ(value_in(s, rank_own), "(absent)") << rank_own;
  EXPECT_EQ(value_in(s, "SPARK_TCP_LANES"), "2");  // the default
  EXPECT_EQ(value_in(s, "SPARK_JOB_ID"), "");      // unset
  EXPECT_EQ(value_in(record({{"SPARKNET_ROCE_TIMEOUT_MS", "010000"}}), "SPARKNET_ROCE_TIMEOUT_MS"),
            "10000");  // numbers compare by value
}

TEST(SettingsDigest, EncodeDecodeRoundTrip) {
  const Settings s = record({{"SPARK_TCP_LANES", "4"}, {"SPARK_JOB_ID", "j1"}});
  EXPECT_EQ(settings_digest::decode(3, settings_digest::encode(3, s)), s);
  const std::vector<std::byte> junk(3, std::byte{7});
  try {
    (void)settings_digest::decode(2, junk);
    FAIL() << "decoded junk";
  } catch (const BootstrapError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2's settings record"), std::string::npos)
        << e.what();
  }
}

// Found by fuzz.settings_digest: decode ignored the frame's length field, the rank in each
// entry and bytes after the last entry, so a damaged record could pass for another one.
TEST(SettingsDigest, DecodeRefusesWhatEncodeDoesNotWrite) {
  const Settings s = record({{"SPARK_TCP_LANES", "4"}});
  const auto good = settings_digest::encode(1, s);
  auto says = [](int rank, const std::vector<std::byte>& bytes) -> std::string {
    try {
      (void)settings_digest::decode(rank, bytes);
    } catch (const BootstrapError& e) {
      return e.what();
    }
    return "decoded";
  };
  auto longer = good;
  longer.push_back(std::byte{0});
  EXPECT_NE(says(1, longer).find("its length field says"), std::string::npos) << says(1, longer);
  const auto body = static_cast<std::uint32_t>(longer.size() - 4);  // the length field agrees
  for (int i = 0; i < 4; ++i) longer[i] = static_cast<std::byte>(body >> (8 * i));
  EXPECT_NE(says(1, longer).find("bytes after the last entry"), std::string::npos)
      << says(1, longer);
  EXPECT_NE(says(2, good).find("entry 0 names rank 1"), std::string::npos) << says(2, good);
  EXPECT_NE(says(2, good).find("rank 2's settings record"), std::string::npos) << says(2, good);
  EXPECT_EQ(says(1, good), "decoded");
}

TEST(SettingsDigest, SameEverywhereHasNoVerdict) {
  const std::vector<Settings> all(3, record({{"SPARK_TCP_LANES", "4"}}));
  EXPECT_EQ(settings_digest::verdict(all), std::nullopt);
}

TEST(SettingsDigest, OneRankDiffersNamesKnobValuesAndRanks) {
  std::vector<Settings> all(3, record({}));
  all[1] = record({{"SPARK_TCP_LANES", "4"}});
  EXPECT_EQ(settings_digest::verdict(all),
            "settings differ between ranks: SPARK_TCP_LANES=4 on rank 1, 2 on ranks 0,2 (give "
            "every rank the same value, e.g. with -x SPARK_TCP_LANES=4)");
}

TEST(SettingsDigest, SeveralSettingsInOneLine) {
  std::vector<Settings> all(2, record({{"SPARK_TRANSPORT", "tcp"}}));
  all[0] = record({{"SPARK_BARRIER_TIMEOUT_MS", "5000"}});
  EXPECT_EQ(settings_digest::verdict(all),
            "settings differ between ranks: SPARK_BARRIER_TIMEOUT_MS=5000 on rank 0, 600000 on "
            "rank 1; SPARK_TRANSPORT=auto on rank 0, tcp on rank 1 (give every rank the same "
            "values, e.g. with -x SPARK_BARRIER_TIMEOUT_MS=5000 -x SPARK_TRANSPORT=tcp)");
}

TEST(SettingsDigest, UnsetValuesAndRankRanges) {
  std::vector<Settings> all(8, record({{"SPARK_JOB_ID", "job7"}}));
  all[4] = record({});
  all[6] = record({});
  EXPECT_EQ(settings_digest::verdict(all),
            "settings differ between ranks: SPARK_JOB_ID=(unset) on ranks 4,6, job7 on ranks "
            "0-3,5,7 (give every rank the same value, e.g. with -x SPARK_JOB_ID=job7)");
}

TEST(SettingsDigest, AcrossHostsTheLineNamesThem) {
  std::vector<Settings> all(4, record({}));
  all[2] = record({{"SPARK_TCP_LANES", "4"}});
  const std::vector<std::string> nodes{"a", "a", "b", "c"};
  EXPECT_EQ(settings_digest::verdict(all, nodes),
            "settings differ between ranks: SPARK_TCP_LANES=4 on rank 2 (host b), 2 on ranks "
            "0,1,3 (hosts a,c) (give every rank the same value, e.g. with -x SPARK_TCP_LANES=4)");
  // One host: no host names (they would all be the same).
  const std::vector<std::string> one(4, "a");
  EXPECT_EQ(settings_digest::verdict(all, one)->find("(host"), std::string::npos);
}

TEST(SettingsDigest, LibraryVersionDiffers) {
  std::vector<Settings> all(3, record({}));
  all[2].front().second = "0.0.9";
  const auto mine = record({}).front().second;
  EXPECT_EQ(settings_digest::verdict(all),
            "settings differ between ranks: libspark version 0.0.9 "
            "on rank 2, " +
                mine +
                " on ranks 0,1 (run the same libspark build on "
                "every host)");
  // A row only one version has is reported with the version, not suggested as a value.
  all[2].emplace_back("SPARK_NEW_ROW", "1");
  const auto line = settings_digest::verdict(all).value_or("");
  EXPECT_NE(line.find("SPARK_NEW_ROW=1 on rank 2, (not a setting there) on ranks 0,1"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("-x SPARK_NEW_ROW=1"), std::string::npos) << line;
}

}  // namespace
}  // namespace spark
