// `sparkrun status [JOB] [--list] [--json] [--watch [SECONDS]] [--stacks]`: a running job of
// this user on this machine, asked through its status socket (node/status_socket.hpp).
#pragma once

namespace spark::launch {

int status_main(int argc, char** argv);

}  // namespace spark::launch
