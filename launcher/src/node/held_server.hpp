// Who holds this process's PMIx server: OpenPMIx's server reads a client's handshake with a
// blocking read on its one thread (docs/reliability.md, "A held PMIx server"), so a process
// that connects and sends nothing stops the server from answering any rank. The ranks bound
// their waits and fail; this names the process they waited for.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spark::launch {

/// A thread of this process blocked reading a loopback TCP connection (the PMIx server's
/// handshake read; sparkrun's own threads never block in a read on a socket), twice, `settle`
/// apart: "sparkrun: its PMIx server is held: it waits for a handshake from pid P (COMM), a
/// process connected to it that sends nothing (...)". `ranks` are (rank, pid) of this node's
/// ranks, so that a rank is named as one. Nothing when no thread is held there.
std::optional<std::string> held_server_note(const std::vector<std::pair<int, pid_t>>& ranks,
                                            unsigned settle_ms = 100);

}  // namespace spark::launch
