// The job's data-plane token (net/hello.hpp) through the bootstrap, for wire-up and the tools
// sparkrun runs on every rank (spark_fabric_discover, spark_doctor_probe). The bootstrap is
// the job's own channel (a PMIx namespace, or the env rendezvous that checks the job id), so
// the token is never on a command line or in the environment.
#pragma once

#include "bootstrap/bootstrap.hpp"
#include "net/hello.hpp"

namespace spark::bootstrap {

/// Rank 0 draws the token (getrandom) and puts it, with the puts before the first fence;
/// the other ranks put nothing.
void publish_job_token(Bootstrap& boot);
/// The token rank 0 published, once that fence has passed. Throws BootstrapError when the
/// value is malformed.
net::hello::Token job_token(Bootstrap& boot);

}  // namespace spark::bootstrap
