// The knob table and strict parsing: every refusal is checked with its exact message.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "spark/config/config.hpp"
#include "spark/error.hpp"

namespace {

using spark::ConfigError;
using spark::config::Config;

std::string refusal_of(const std::map<std::string, std::string>& values) {
  try {
    (void)Config::from_map(values);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Config, DefaultsMatchTheContract) {
  const Config cfg = Config::from_map({});
  EXPECT_EQ(cfg.timeout_ms(), 10000u);
  EXPECT_EQ(spark::CommOptions::from_config(cfg).barrier_timeout_ms, 600000u);
  EXPECT_EQ(cfg.join_timeout_ms(), 60000u);
  EXPECT_EQ(cfg.transport(), "auto");
  EXPECT_EQ(cfg.bootstrap(), spark::config::BootstrapKind::auto_select);
  EXPECT_EQ(cfg.log_level(), spark::config::LogLevel::warn);
  EXPECT_FALSE(cfg.integer("SPARK_RANK").has_value());
  EXPECT_FALSE(spark::CommOptions::from_config(cfg).ib_gid_index.has_value());
  EXPECT_FALSE(cfg.pmix_present());
  EXPECT_TRUE(spark::CommOptions::from_config(cfg).report_failures);
  EXPECT_FALSE(spark::CommOptions::from_config(Config::from_map({{"SPARK_ON_FAILURE", "raise"}}))
                   .report_failures);
  EXPECT_EQ(cfg.source("SPARKNET_ROCE_TIMEOUT_MS"), spark::config::Source::default_value);
  // The default constructor is the same snapshot.
  EXPECT_EQ(Config().timeout_ms(), 10000u);
}

TEST(Config, ReadsValidValues) {
  const Config cfg = Config::from_map({{"SPARKNET_ROCE_TIMEOUT_MS", "300"},
                                       {"SPARK_BARRIER_TIMEOUT_MS", "86400000"},
                                       {"SPARK_TRANSPORT", "shm"},
                                       {"SPARK_TCP_LANES", "4"},
                                       {"SPARK_RANK", "2"},
                                       {"SPARK_SIZE", "3"},
                                       {"SPARK_RENDEZVOUS", "node1:29500"},
                                       {"SPARK_IB_GID_INDEX", "0"},
                                       {"SPARK_LOG", "info:bootstrap,tcp"},
                                       {"SPARK_TCP_ADDR", "10.0.0.1"},
                                       {"PMIX_NAMESPACE", "job.1"}});
  EXPECT_EQ(cfg.timeout_ms(), 300u);
  const auto opt = spark::CommOptions::from_config(cfg);
  EXPECT_EQ(opt.barrier_timeout_ms, 86400000u);
  EXPECT_EQ(cfg.transport(), "shm");
  EXPECT_EQ(opt.tcp_lanes, 4);
  EXPECT_EQ(cfg.integer("SPARK_RANK"), 2);
  EXPECT_EQ(cfg.integer("SPARK_SIZE"), 3);
  EXPECT_EQ(cfg.value("SPARK_RENDEZVOUS"), "node1:29500");
  EXPECT_EQ(opt.ib_gid_index, 0);
  EXPECT_EQ(cfg.log_level(), spark::config::LogLevel::info);
  EXPECT_EQ(cfg.log_subsystems(), (std::vector<std::string>{"bootstrap", "tcp"}));
  EXPECT_EQ(opt.tcp_addr, "10.0.0.1");
  EXPECT_TRUE(cfg.pmix_present());
  EXPECT_EQ(cfg.source("SPARKNET_ROCE_TIMEOUT_MS"), spark::config::Source::map);
}

TEST(Config, TimeoutRefusalsNameVariableValueAndRange) {
  const std::string tail = "; valid: milliseconds in 1..3600000, default 10000";
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", ""}}),
            "SPARKNET_ROCE_TIMEOUT_MS=\"\" is refused: empty value (unset the variable to use "
            "the default)" +
                tail);
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "0"}}),
            "SPARKNET_ROCE_TIMEOUT_MS=\"0\" is refused: out of range" + tail);
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "-5"}}),
            "SPARKNET_ROCE_TIMEOUT_MS=\"-5\" is refused: out of range" + tail);
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "abc"}}),
            "SPARKNET_ROCE_TIMEOUT_MS=\"abc\" is refused: not a decimal integer" + tail);
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "12x"}}),
            "SPARKNET_ROCE_TIMEOUT_MS=\"12x\" is refused: not a decimal integer" + tail);
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", " 100"}}),
            "SPARKNET_ROCE_TIMEOUT_MS=\" 100\" is refused: not a decimal integer" + tail);
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "3600001"}}),
            "SPARKNET_ROCE_TIMEOUT_MS=\"3600001\" is refused: out of range" + tail);
  EXPECT_EQ(
      refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "99999999999999999999999999"}}),
      "SPARKNET_ROCE_TIMEOUT_MS=\"99999999999999999999999999\" is refused: out of range" + tail);
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "-"}}),
            "SPARKNET_ROCE_TIMEOUT_MS=\"-\" is refused: not a decimal integer" + tail);
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "1"}}), "(accepted)");
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_TIMEOUT_MS", "3600000"}}), "(accepted)");
}

TEST(Config, PortRangeIsOnePortOrFirstToLast) {
  const std::string tail = "; valid: FIRST-LAST or one PORT, ports in 1..65535 (e.g. 50000-50063)";
  auto ports = [](const std::string& v) {
    return spark::CommOptions::from_config(Config::from_map({{"SPARK_TCP_PORT_RANGE", v}}))
        .tcp_ports;
  };
  EXPECT_EQ(ports("50000-50015"), std::make_pair(50000, 50015));
  EXPECT_EQ(ports("50000"), std::make_pair(50000, 50000));
  EXPECT_EQ(spark::CommOptions::from_config(Config::from_map({})).tcp_ports,
            std::make_pair(0, 0));  // unset: ephemeral ports
  EXPECT_EQ(
      refusal_of({{"SPARK_TCP_PORT_RANGE", "50010-50000"}}),
      "SPARK_TCP_PORT_RANGE=\"50010-50000\" is refused: the first port is above the last" + tail);
  for (const char* bad : {"0", "65536", "5000-", "-5000", "a-b", "50000-50010-50020", "1,2"})
    EXPECT_EQ(refusal_of({{"SPARK_TCP_PORT_RANGE", bad}}),
              "SPARK_TCP_PORT_RANGE=\"" + std::string(bad) +
                  "\" is refused: not a port or a range of ports" + tail);
  EXPECT_NE(refusal_of({{"SPARK_TCP_PORT_RANGE", ""}}).find("empty value"), std::string::npos);
}

TEST(Config, RemovedVariablesAreRefusedEvenWhenEmpty) {
  const std::string spin =
      "SPARKNET_ROCE_SPIN_LIMIT is set (\"{}\") but is no longer supported: it counted polls and "
      "was replaced by SPARKNET_ROCE_TIMEOUT_MS, in milliseconds (default 10000). Do not copy "
      "the old value over: unset SPARKNET_ROCE_SPIN_LIMIT and, if the default does not fit, set "
      "SPARKNET_ROCE_TIMEOUT_MS to a number of milliseconds";
  auto with = [&](const std::string& v) {
    std::string s = spin;
    s.replace(s.find("{}"), 2, v);
    return s;
  };
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_SPIN_LIMIT", "1000000"}}), with("1000000"));
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_SPIN_LIMIT", ""}}), with(""));
  // Refused first, even next to another bad value, and even with a valid timeout set.
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_SPIN_LIMIT", "5"}, {"SPARKNET_ROCE_TIMEOUT_MS", "x"}}),
            with("5"));
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_KERNELS", "1"}}),
            "SPARKNET_ROCE_KERNELS is set (\"1\") but this option was removed and has no "
            "replacement: unset SPARKNET_ROCE_KERNELS");
  EXPECT_EQ(refusal_of({{"SPARKNET_ROCE_KERNELS", ""}}),
            "SPARKNET_ROCE_KERNELS is set (\"\") but this option was removed and has no "
            "replacement: unset SPARKNET_ROCE_KERNELS");
}

// Each communicator knob's row fills its CommOptions member (per rank: no environment read).
TEST(Config, KnobRowsFillCommOptions) {
  const auto o =
      spark::CommOptions::from_config(Config::from_map({{"SPARK_LANES", "rxe0,rxe1"},
                                                        {"SPARK_IB_HCA", "rxe1"},
                                                        {"SPARK_IB_GID_INDEX", "3"},
                                                        {"SPARK_SPIN_US", "7"},
                                                        {"SPARK_DATA_NET", "10.1.0.0/16"},
                                                        {"SPARK_TRANSPORT", "roce"}}));
  EXPECT_EQ(o.rdma_lanes, "rxe0,rxe1");
  EXPECT_EQ(o.ib_hca, "rxe1");
  EXPECT_EQ(o.ib_gid_index, 3);
  EXPECT_EQ(o.spin_us, 7u);
  EXPECT_FALSE(o.spin_auto);
  EXPECT_EQ(o.data_net, "10.1.0.0/16");
  EXPECT_EQ(o.transport, "roce");
  EXPECT_TRUE(spark::CommOptions::from_config(Config::from_map({})).spin_auto);
}

// The tool paths sparkrun reads, the scripts' variables and the test hooks are table rows, so
// neither a launch nor --print-config calls them typos; the scripts' values are not checked.
TEST(Config, ToolPathsScriptsAndHooksAreKnobs) {
  const auto cfg = Config::from_map({{"SPARK_DOCTOR_PROBE", "/opt/p"},
                                     {"SPARK_FABRIC_DISCOVER", "/opt/d"},
                                     {"SPARK_BUILD_DIR", ""},
                                     {"SPARK_TEST_ROCE", "1"},
                                     {"SPARK_GPU_MIB", "lots"},
                                     {"SPARK_DOCTOR_TEST_STOP_RANK", "1"}});
  EXPECT_TRUE(cfg.unknown_variables().empty());
  EXPECT_EQ(cfg.value("SPARK_DOCTOR_PROBE"), "/opt/p");
  EXPECT_EQ(cfg.value("SPARK_GPU_MIB"), "lots");
  EXPECT_EQ(spark::config::find_knob("SPARK_FABRIC_DISCOVER")->origin,
            spark::config::KnobOrigin::tool);
}

TEST(NearestName, EditDistanceCountsSwapsAsOneEdit) {
  using spark::config::edit_distance;
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "ABC"), 3u);
  EXPECT_EQ(edit_distance("ABC", ""), 3u);
  EXPECT_EQ(edit_distance("TRANSPORT", "TRANSPORT"), 0u);
  EXPECT_EQ(edit_distance("TRASNPORT", "TRANSPORT"), 1u);   // adjacent swap
  EXPECT_EQ(edit_distance("TRANSPRT", "TRANSPORT"), 1u);    // deletion
  EXPECT_EQ(edit_distance("TRANSPOORT", "TRANSPORT"), 1u);  // insertion
  EXPECT_EQ(edit_distance("TRANSPIRT", "TRANSPORT"), 1u);   // substitution
  EXPECT_EQ(edit_distance("ROCE_TIMEOUT", "ROCE_TIMEOUT_MS"), 3u);
  EXPECT_EQ(edit_distance("CA", "ABC"), 3u);  // optimal string alignment, not full DL (2)
}

TEST(NearestName, SuggestsTheKnobATypoMeant) {
  const auto nearest = [](std::string_view name) {
    const auto* knob = spark::config::nearest_knob(name);
    return knob ? std::string(knob->name) : std::string("(none)");
  };
  EXPECT_EQ(nearest("SPARK_TRASNPORT"), "SPARK_TRANSPORT");
  EXPECT_EQ(nearest("SPARK_TRANSPRT"), "SPARK_TRANSPORT");
  EXPECT_EQ(nearest("SPARKNET_ROCE_TIMEOUT"), "SPARKNET_ROCE_TIMEOUT_MS");
  EXPECT_EQ(nearest("SPARK_TCP_LANE"), "SPARK_TCP_LANES");
  EXPECT_EQ(nearest("SPARK_BARRIER_TIMEOUT"), "SPARK_BARRIER_TIMEOUT_MS");
  // SPARK_ and SPARKNET_ are interchangeable, and the case does not matter.
  EXPECT_EQ(nearest("SPARK_ROCE_TIMEOUT_MS"), "SPARKNET_ROCE_TIMEOUT_MS");
  EXPECT_EQ(nearest("SPARKNET_TRANSPORT"), "SPARK_TRANSPORT");
  EXPECT_EQ(nearest("SPARK_NET_ROCE_TIMEOUT_MS"), "SPARKNET_ROCE_TIMEOUT_MS");
  EXPECT_EQ(nearest("SPARK_transport"), "SPARK_TRANSPORT");
  EXPECT_EQ(nearest("SPARK_DOCTOR_PROBES"), "SPARK_DOCTOR_PROBE");
  // Far from every name: no guess; a removed variable is never suggested.
  EXPECT_EQ(nearest("SPARK_PROFILE_DIR"), "(none)");
  EXPECT_EQ(nearest("SPARK_WORKERS"), "(none)");
  EXPECT_EQ(nearest("SPARKNET_ROCE_SPIN_LIMT"), "(none)");
  // Short names allow one edit only.
  EXPECT_EQ(nearest("SPARK_LGO"), "SPARK_LOG");
  EXPECT_EQ(nearest("SPARK_LX"), "(none)");
}

// Apache Spark's variables are another program's: not typos, and no "did you mean".
TEST(NearestName, ApacheSparksNamesAreNotTypos) {
  const Config cfg = Config::from_map({{"SPARK_HOME", "/opt/spark"},
                                       {"SPARK_MASTER_HOST", "n1"},
                                       {"SPARK_LOCAL_IP", "10.0.0.1"},
                                       {"SPARK_LOCAL_RNAK", "1"}});
  EXPECT_EQ(cfg.unknown_variables(), (std::vector<std::string>{"SPARK_LOCAL_RNAK"}));
  EXPECT_TRUE(spark::config::is_other_programs_name("SPARK_WORKER_MEMORY"));
  EXPECT_FALSE(spark::config::is_other_programs_name("SPARK_LOG_LEVEL"));  // ours, mistyped
}

TEST(NearestName, OneWordingForTheWarning) {
  EXPECT_EQ(spark::config::unknown_name_warning("SPARK_TRASNPORT"),
            "SPARK_TRASNPORT is not a sparkrun setting (did you mean SPARK_TRANSPORT?)");
  EXPECT_EQ(spark::config::unknown_name_warning("SPARK_PROFILE_DIR"),
            "SPARK_PROFILE_DIR is not a sparkrun setting; it is ignored (sparkrun --print-config "
            "lists them)");
}

TEST(Config, OtherKnobRefusals) {
  EXPECT_EQ(refusal_of({{"SPARK_IB_GID_INDEX", ""}}),
            "SPARK_IB_GID_INDEX=\"\" is refused: empty value (unset the variable instead); "
            "valid: an integer in 0..255");
  EXPECT_EQ(refusal_of({{"SPARK_IB_GID_INDEX", "256"}}),
            "SPARK_IB_GID_INDEX=\"256\" is refused: out of range; valid: an integer in 0..255");
  EXPECT_EQ(refusal_of({{"SPARK_TRANSPORT", "udp"}}),
            "SPARK_TRANSPORT=\"udp\" is refused: not one of the accepted values; valid: "
            "auto|tcp|shm|roce, default auto");
  EXPECT_EQ(refusal_of({{"SPARK_TRANSPORT", "TCP"}}),
            "SPARK_TRANSPORT=\"TCP\" is refused: not one of the accepted values; valid: "
            "auto|tcp|shm|roce, default auto");
  EXPECT_EQ(
      refusal_of({{"SPARK_TCP_LANES", "0"}}),
      "SPARK_TCP_LANES=\"0\" is refused: out of range; valid: an integer in 1..16, default 2");
  EXPECT_EQ(refusal_of({{"SPARK_BARRIER_TIMEOUT_MS", "0"}}),
            "SPARK_BARRIER_TIMEOUT_MS=\"0\" is refused: out of range; valid: milliseconds in "
            "1..86400000, default 600000");
  EXPECT_EQ(refusal_of({{"SPARK_JOIN_TIMEOUT_MS", "1s"}}),
            "SPARK_JOIN_TIMEOUT_MS=\"1s\" is refused: not a decimal integer; valid: milliseconds "
            "in 1..3600000, default 60000");
  EXPECT_EQ(refusal_of({{"SPARK_RENDEZVOUS", "node1"}}),
            "SPARK_RENDEZVOUS=\"node1\" is refused: not HOST:PORT; valid: HOST:PORT with PORT in "
            "1..65535");
  EXPECT_EQ(refusal_of({{"SPARK_RENDEZVOUS", "node1:70000"}}),
            "SPARK_RENDEZVOUS=\"node1:70000\" is refused: the port is not an integer in "
            "1..65535; valid: HOST:PORT with PORT in 1..65535");
  EXPECT_EQ(refusal_of({{"SPARK_HOST", ""}}),
            "SPARK_HOST=\"\" is refused: empty value (unset the variable instead); valid: a "
            "non-empty string");
  EXPECT_EQ(refusal_of({{"SPARK_TRACE", ""}}),
            "SPARK_TRACE=\"\" is refused: empty value (unset the variable instead); valid: a "
            "non-empty path");
  EXPECT_EQ(refusal_of({{"SPARK_TCP_ADDR", "10.0.0"}}),
            "SPARK_TCP_ADDR=\"10.0.0\" is refused: not a dotted IPv4 address; valid: a non-empty "
            "IPv4 address");
  EXPECT_EQ(refusal_of({{"SPARK_LOG", "loud"}}),
            "SPARK_LOG=\"loud\" is refused: unknown level; valid: LEVEL[:SUBSYSTEM,...] with "
            "LEVEL one of error|warn|info|trace, default warn");
  EXPECT_EQ(refusal_of({{"SPARK_LOG", "info:"}}),
            "SPARK_LOG=\"info:\" is refused: bad subsystem list; valid: LEVEL[:SUBSYSTEM,...] "
            "with LEVEL one of error|warn|info|trace, default warn");
  EXPECT_EQ(refusal_of({{"SPARK_LOG", "info:wirup"}}),
            "SPARK_LOG=\"info:wirup\" is refused: unknown subsystem \"wirup\" (subsystems: "
            "bootstrap|wireup|tcp|shm|roce|launch); valid: LEVEL[:SUBSYSTEM,...] with LEVEL one "
            "of error|warn|info|trace, default warn");
  EXPECT_EQ(refusal_of({{"MASTER_PORT", "0"}}),
            "MASTER_PORT=\"0\" is refused: out of range; valid: an integer in 1..65535");
}

TEST(Config, RankSizeRelations) {
  EXPECT_EQ(refusal_of({{"SPARK_RANK", "3"}, {"SPARK_SIZE", "3"}}),
            "SPARK_RANK=3 is refused: it must be less than SPARK_SIZE=3 (valid ranks are 0..2)");
  EXPECT_EQ(refusal_of({{"SPARK_RANK", ""}, {"SPARK_SIZE", "3"}}),
            "SPARK_RANK=\"\" is refused: empty value (unset the variable instead); valid: an "
            "integer in 0..1048575");
  EXPECT_EQ(refusal_of({{"SPARK_RANK", "one"}, {"SPARK_SIZE", "3"}}),
            "SPARK_RANK=\"one\" is refused: not a decimal integer; valid: an integer in "
            "0..1048575");
  EXPECT_EQ(refusal_of({{"SPARK_SIZE", "0"}}),
            "SPARK_SIZE=\"0\" is refused: out of range; valid: an integer in 1..1048576");
  EXPECT_EQ(refusal_of({{"SPARK_RANK", "1"}}),
            "SPARK_RANK=1 is set but SPARK_SIZE is not: set both (or neither)");
  EXPECT_EQ(refusal_of({{"SPARK_SIZE", "2"}}),
            "SPARK_SIZE=2 is set but SPARK_RANK is not: set both (or neither)");
  EXPECT_EQ(refusal_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
            "RANK=4 is refused: it must be less than WORLD_SIZE=4 (valid ranks are 0..3)");
  EXPECT_EQ(refusal_of({{"SPARK_LOCAL_RANK", "2"}, {"SPARK_LOCAL_SIZE", "2"}}),
            "SPARK_LOCAL_RANK=2 is refused: it must be less than SPARK_LOCAL_SIZE=2 (valid ranks "
            "are 0..1)");
  EXPECT_EQ(refusal_of({{"SPARK_RANK", "0"}, {"SPARK_SIZE", "2"}, {"SPARK_LOCAL_SIZE", "3"}}),
            "SPARK_LOCAL_SIZE=3 is refused: it must not exceed SPARK_SIZE=2");
}

TEST(Config, TableIsCompleteAndConsistent) {
  std::set<std::string_view> names;
  for (const auto& knob : spark::config::knobs()) {
    EXPECT_TRUE(names.insert(knob.name).second) << "duplicate " << knob.name;
    EXPECT_FALSE(knob.doc.empty()) << knob.name;
    EXPECT_FALSE(knob.type.empty()) << knob.name;
    // Every default must itself pass the knob's own checks.
    if (!knob.default_value.empty()) {
      EXPECT_EQ(refusal_of({{std::string(knob.name), std::string(knob.default_value)}}),
                "(accepted)")
          << knob.name;
    }
  }
  for (const char* required : {"SPARKNET_ROCE_TIMEOUT_MS",
                               "SPARK_BARRIER_TIMEOUT_MS",
                               "SPARK_JOIN_TIMEOUT_MS",
                               "SPARK_TRANSPORT",
                               "SPARK_TCP_LANES",
                               "SPARK_RENDEZVOUS",
                               "SPARK_RANK",
                               "SPARK_SIZE",
                               "SPARK_LOCAL_RANK",
                               "SPARK_LOCAL_SIZE",
                               "SPARK_NODE_RANK",
                               "SPARK_JOB_ID",
                               "SPARK_HOST",
                               "SPARK_CPUSET",
                               "SPARK_LANES",
                               "SPARK_IB_HCA",
                               "SPARK_IB_GID_INDEX",
                               "SPARK_TRACE",
                               "SPARK_LOG",
                               "SPARK_TOPOLOGY_XML",
                               "SPARKNET_ROCE_SPIN_LIMIT",
                               "SPARKNET_ROCE_KERNELS",
                               "RANK",
                               "WORLD_SIZE",
                               "MASTER_ADDR",
                               "MASTER_PORT",
                               "LOCAL_RANK"}) {
    EXPECT_NE(spark::config::find_knob(required), nullptr) << required;
  }
  EXPECT_EQ(spark::config::find_knob("SPARK_NOPE"), nullptr);
}

// The table lists values and sources; the unknown names are the caller's to warn about (on
// stderr, sparkrun --print-config), not lines of the table.
TEST(Config, DescribeSourcesListsValuesAndSources) {
  const Config cfg = Config::from_map({{"SPARK_TRANSPORT", "tcp"}, {"SPARK_TRANSPRT", "shm"}});
  const std::string text = cfg.describe_sources();
  EXPECT_NE(text.find("SPARK_TRANSPORT=tcp [set]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("SPARKNET_ROCE_TIMEOUT_MS=10000 [default]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("SPARK_RANK=(unset) [default]\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("SPARK_TRANSPRT"), std::string::npos) << text;
  EXPECT_EQ(cfg.unknown_variables(), (std::vector<std::string>{"SPARK_TRANSPRT"}));
}

TEST(Config, FromEnvironmentReadsTheProcessEnvironment) {
  // The one test that touches the real environment; it restores what it changes.
  ::setenv("SPARK_TCP_LANES", "3", 1);
  const Config cfg = Config::from_environment();
  EXPECT_EQ(spark::CommOptions::from_config(cfg).tcp_lanes, 3);
  EXPECT_EQ(cfg.source("SPARK_TCP_LANES"), spark::config::Source::environment);
  ::setenv("SPARKNET_ROCE_SPIN_LIMIT", "", 1);
  EXPECT_THROW((void)Config::from_environment(), ConfigError);
  ::unsetenv("SPARKNET_ROCE_SPIN_LIMIT");
  // sparkrun's -x wins over the environment and is named as the source (--print-config -x).
  const Config given = Config::from_environment(
      {{"SPARK_TCP_LANES", "5"}, {"SPARK_TRASNPORT", "tcp"}, {"OTHER_TOOL_VAR", "1"}});
  EXPECT_EQ(spark::CommOptions::from_config(given).tcp_lanes, 5);
  EXPECT_EQ(given.source("SPARK_TCP_LANES"), spark::config::Source::option);
  EXPECT_NE(given.describe_sources().find("SPARK_TCP_LANES=5 [-x]\n"), std::string::npos);
  EXPECT_EQ(given.unknown_variables(), (std::vector<std::string>{"SPARK_TRASNPORT"}));
  ::unsetenv("SPARK_TCP_LANES");
}

}  // namespace
