// Node daemon mode: `sparkrun --daemon --connect ADDR:PORT --node N --job ID --host NAME`,
// started by the launcher through the launch agent (never typed by users). It reads the
// job secret from stdin, connects back to the launcher, authenticates both ways, receives
// its part of the plan and runs it with the launcher's node runner (PMIx server, binding,
// output, exit statuses). Fences go up to the launcher; abort orders come down. If the
// control link is lost, the daemon kills its ranks and exits within a second.
#pragma once

namespace spark::launch {

/// argv[1] is "--daemon". Returns the process exit code.
int daemon_main(int argc, char** argv);

}  // namespace spark::launch
