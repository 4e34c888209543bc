#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "options.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

ParseResult parse(std::vector<std::string> args) {
  return parse_options(args);
}

TEST(Options, MpirunStyle) {
  auto r = parse({"-np", "3", "--tag-output", "-x", "FOO=1", "-x", "BAR", "./app", "-n", "5"});
  EXPECT_EQ(r.action, Action::kRun);
  ASSERT_TRUE(r.options.np.has_value());
  EXPECT_EQ(*r.options.np, 3);
  EXPECT_TRUE(r.options.tag_output);
  EXPECT_EQ(r.options.exports, (std::vector<std::string>{"FOO=1", "BAR"}));
  // Everything from the program on belongs to the program, even "-n 5".
  EXPECT_EQ(r.options.command, (std::vector<std::string>{"./app", "-n", "5"}));
}

TEST(Options, ShortAndLongForms) {
  auto r = parse({"-n", "2", "--host", "a:2,b", "-H", "c", "--timeout", "1.5", "--kill-grace", "0",
                  "--oversubscribe", "--timestamp-output", "--output-dir", "out", "prog"});
  EXPECT_EQ(*r.options.np, 2);
  EXPECT_EQ(r.options.hosts, (std::vector<std::string>{"a:2,b", "c"}));
  EXPECT_DOUBLE_EQ(*r.options.timeout_s, 1.5);
  EXPECT_DOUBLE_EQ(r.options.kill_grace_s, 0.0);
  EXPECT_TRUE(r.options.oversubscribe);
  EXPECT_TRUE(r.options.timestamp_output);
  EXPECT_EQ(r.options.output_dir, "out");
  EXPECT_EQ(r.options.command, (std::vector<std::string>{"prog"}));
}

TEST(Options, Restarts) {
  auto r = parse({"prog"});
  EXPECT_EQ(r.options.max_restarts, 0);
  EXPECT_DOUBLE_EQ(r.options.restart_backoff_s, 1.0);
  r = parse({"--max-restarts", "3", "--restart-backoff", "0.25", "prog"});
  EXPECT_EQ(r.options.max_restarts, 3);
  EXPECT_DOUBLE_EQ(r.options.restart_backoff_s, 0.25);
  EXPECT_DOUBLE_EQ(parse({"--restart-backoff", "0", "prog"}).options.restart_backoff_s, 0.0);
  for (const char* bad : {"-1", "x", "1.5", ""})
    EXPECT_THROW(parse({"--max-restarts", bad, "prog"}), UsageError) << bad;
  for (const char* bad : {"-1", "x", "inf"})
    EXPECT_THROW(parse({"--restart-backoff", bad, "prog"}), UsageError) << bad;
}

// mpirun's -wdir and Hydra's -env-all habit: --wdir DIR (also -wdir, -wdir=DIR), --env-all.
TEST(Options, WorkingDirectoryAndEnvAll) {
  auto r = parse({"-wdir", "/data/run", "--env-all", "-x", "NCCL_*", "./app", "-wdir", "x"});
  EXPECT_EQ(r.options.wdir, "/data/run");
  EXPECT_TRUE(r.options.env_all);
  EXPECT_EQ(r.options.exports, (std::vector<std::string>{"NCCL_*"}));
  EXPECT_EQ(r.options.command, (std::vector<std::string>{"./app", "-wdir", "x"}));
  EXPECT_EQ(parse({"--wdir", "rel", "./app"}).options.wdir, "rel");
  EXPECT_EQ(parse({"-wdir=/tmp", "./app"}).options.wdir, "/tmp");
  EXPECT_FALSE(parse({"./app"}).options.env_all);
  EXPECT_THROW(parse({"--wdir", "", "./app"}), UsageError);
}

// Every value-taking option comes from the one table: "-np" after "--fabric FILE" is still the
// launcher's (it was read as "-n p": "-n: 'p' is not a whole number").
TEST(Options, NpAfterFabricFile) {
  auto r = parse({"--fabric", "map.json", "-np", "2", "./app"});
  EXPECT_EQ(r.options.np, 2);
  EXPECT_EQ(r.options.fabric_file, "map.json");
  EXPECT_EQ(r.options.command, (std::vector<std::string>{"./app"}));
  EXPECT_EQ(parse({"-v", "-np", "2", "./app"}).options.np, 2);  // a flag takes no value
}

// doctor and fabric pass the launch options on to sparkrun, spelled from the same table.
TEST(Options, LaunchOptionsGivenAgain) {
  CLI::App app;
  LaunchOptions launch(app);
  EXPECT_FALSE(parse_command_line(app, {"-np", "2", "-x", "A=1", "-H", "a,b", "-v", "-x", "B"}));
  EXPECT_EQ(launch.finish().np, 2);
  EXPECT_EQ(launch.given(), (std::vector<std::string>{"--np", "2", "--host", "a,b", "-x", "A=1",
                                                      "-x", "B", "--verbose"}));
  CLI::App bad;
  LaunchOptions bad_launch(bad);
  EXPECT_THROW(parse_command_line(bad, {"--bogus"}), UsageError);
}

TEST(Options, DoubleDashSeparatesTheProgram) {
  auto r = parse({"-n", "1", "--", "-weird-name", "arg"});
  EXPECT_EQ(r.options.command, (std::vector<std::string>{"-weird-name", "arg"}));
}

TEST(Options, Defaults) {
  auto r = parse({"prog"});
  EXPECT_FALSE(r.options.np.has_value());
  EXPECT_FALSE(r.options.timeout_s.has_value());
  EXPECT_DOUBLE_EQ(r.options.kill_grace_s, 2.0);
  EXPECT_FALSE(r.options.tag_output);
}

TEST(Options, HelpVersionPrintConfig) {
  EXPECT_EQ(parse({"--help"}).action, Action::kHelp);
  EXPECT_NE(parse({"-h"}).help.find("--tag-output"), std::string::npos);
  EXPECT_EQ(parse({"--version"}).action, Action::kVersion);
  EXPECT_EQ(parse({"--print-config"}).action, Action::kPrintConfig);
}

TEST(Options, BindingFlagsHaveAPlace) {
  auto r = parse({"--bind-to", "core", "--map-by", "l3", "--report-bindings", "prog"});
  EXPECT_EQ(r.options.bind_to, "core");
  EXPECT_EQ(r.options.map_by, "l3");
  EXPECT_TRUE(r.options.report_bindings);
}

void expect_usage_error(std::vector<std::string> args, const std::string& fragment) {
  try {
    parse(args);
    FAIL() << "accepted: " << ::testing::PrintToString(args);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
  }
}

// Habits people bring from mpirun and Hydra (issue 23).
TEST(Options, MpirunHabitsAreAccepted) {
  auto r = parse({"-N", "2", "--allow-run-as-root", "--signal-group", "prog"});
  ASSERT_TRUE(r.options.per_node.has_value());
  EXPECT_EQ(*r.options.per_node, 2);
  EXPECT_TRUE(r.options.signal_group);
  EXPECT_FALSE(r.options.np.has_value());
  r = parse({"--npernode", "3", "prog"});
  EXPECT_EQ(*r.options.per_node, 3);
  r = parse({"--map-by", "ppr:4:node", "prog"});
  EXPECT_EQ(*r.options.per_node, 4);
  EXPECT_EQ(r.options.map_by, "");  // consumed: not a topology mapping
  r = parse({"-N", "4", "--map-by", "ppr:4:node", "prog"});
  EXPECT_EQ(*r.options.per_node, 4);
  EXPECT_FALSE(parse({"prog"}).options.signal_group);  // SIGUSR1/2 to the rank itself
  expect_usage_error({"-N", "2", "--map-by", "ppr:3:node", "prog"}, "disagree");
  expect_usage_error({"--map-by", "ppr:2:socket", "prog"}, "ppr:N:node");
  expect_usage_error({"-N", "x", "prog"}, "-N");
}

TEST(Options, HelpShowsTypesAndOneUsage) {
  auto r = parse({"--help"});
  const std::string& h = r.help;
  EXPECT_NE(h.find("-n,--np INT"), std::string::npos) << h;
  EXPECT_NE(h.find("--timeout SECONDS"), std::string::npos) << h;
  EXPECT_EQ(h.find("Usage:"), h.rfind("Usage:")) << "two usage lines:\n" << h;
}

TEST(Options, RejectsBadInput) {
  expect_usage_error({"-n", "0", "prog"}, "out of range");
  expect_usage_error({"-n", "abc", "prog"}, "not a whole number");
  expect_usage_error({"-n", "12x", "prog"}, "not a whole number");
  expect_usage_error({"-n", "", "prog"}, "not a whole number");
  expect_usage_error({"-n", "-3", "prog"}, "-n");
  expect_usage_error({"-n", "99999999999999999999", "prog"}, "out of range");
  expect_usage_error({"--timeout", "0", "prog"}, "--timeout");
  expect_usage_error({"--timeout", "abc", "prog"}, "--timeout");
  expect_usage_error({"--timeout", "-1", "prog"}, "--timeout");
  expect_usage_error({"--kill-grace", "1s", "prog"}, "--kill-grace");
  expect_usage_error({"--bogus", "prog"}, "--bogus");
  expect_usage_error({"-n", "3"}, "no program");
  expect_usage_error({"-n"}, "-n");
  expect_usage_error({"--hostfile", "", "prog"}, "--hostfile");
}

// `sparkrun --daemon` (started by sparkrun itself): the same table machinery, its own words.
TEST(Options, Daemon) {
  const auto d = parse_daemon_options({"--connect", "10.0.0.1:4000", "--node", "2", "--job", "j"});
  EXPECT_EQ(d.address, "10.0.0.1");
  EXPECT_EQ(d.port, 4000);
  EXPECT_EQ(d.node, 2u);
  EXPECT_EQ(d.job, "j");
  for (auto [args, what] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--node", "1", "--job", "j"}, "--connect, --node and --job are required"},
           {{"--connect", "a", "--node", "1", "--job", "j"}, "--connect wants ADDR:PORT"},
           {{"--connect", "a:0", "--node", "1", "--job", "j"}, "--connect port"},
           {{"--connect", "a:1", "--node", "x", "--job", "j"}, "--node"},
           {{"--connect", "a:1", "--node", "1", "--job", "j", "--bogus", "v"},
            "unknown daemon option --bogus"}}) {
    try {
      parse_daemon_options(args);
      ADD_FAILURE() << "accepted, expected: " << what;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace spark::launch
